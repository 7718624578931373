// Attacks run inside the jail by the tests. Each subcommand tries one thing; the tests judge the
// outcome from the host side (a listener that got nothing, a marker file not written, a host
// file unchanged, /proc of the process). Built static by the test run (gcc -static).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

static int report(const char *what, int rc) {
    if (rc < 0) {
        printf("%s: failed: %s\n", what, strerror(errno));
        return 1;
    }
    printf("%s: ok\n", what);
    return 0;
}

static int connect_inet(int family, int type, const char *port) {
    int s = socket(family, type, 0);
    if (s < 0) return report("socket", -1);
    int rc;
    if (family == AF_INET) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(port))};
        inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
        rc = type == SOCK_DGRAM ? (int)sendto(s, "x", 1, 0, (void *)&a, sizeof a) : connect(s, (void *)&a, sizeof a);
    } else {
        struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons(atoi(port))};
        inet_pton(AF_INET6, "::1", &a.sin6_addr);
        rc = connect(s, (void *)&a, sizeof a);
    }
    return report("connect", rc);
}

// Through the egress proxy on the jail's loopback: CONNECT 127.0.0.1:PORT, then "ping" through the
// tunnel and what comes back printed.
static int tunnel(const char *port) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) return report("socket", -1);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(3128)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(s, (void *)&a, sizeof a) < 0) return report("connect to the proxy", -1);
    char req[128], buf[512];
    int n = snprintf(req, sizeof req, "CONNECT 127.0.0.1:%s HTTP/1.1\r\n\r\n", port);
    if (write(s, req, n) != n) return report("write", -1);
    int got = 0;
    while (got < (int)sizeof buf - 1 && !memmem(buf, got, "\r\n\r\n", 4)) {
        int k = read(s, buf + got, sizeof buf - 1 - got);
        if (k <= 0) break;
        got += k;
    }
    buf[got] = 0;
    printf("proxy: %.12s\n", buf);
    if (write(s, "ping", 4) != 4) return report("write", -1);
    got = 0;
    while (got < 4) {
        int k = read(s, buf + got, 4 - got);
        if (k <= 0) break;
        got += k;
    }
    buf[got] = 0;
    printf("host: %s\n", buf);
    return 0;
}

static int connect_abstract(const char *name) {
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    if (s < 0) return report("socket", -1);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    size_t n = strlen(name);
    memcpy(a.sun_path + 1, name, n);
    return report("connect", connect(s, (void *)&a, offsetof(struct sockaddr_un, sun_path) + 1 + n));
}

// io_uring: IORING_OP_SOCKET then IORING_OP_CONNECT, past any socket() filter.
static int uring_connect(const char *port) {
    struct io_uring_params p = {0};
    int fd = (int)syscall(__NR_io_uring_setup, 4, &p);
    if (fd < 0) return report("io_uring_setup", -1);
    size_t sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    size_t cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    char *sq = mmap(0, sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQ_RING);
    char *cq = mmap(0, cq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_CQ_RING);
    struct io_uring_sqe *sqes =
        mmap(0, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd,
             IORING_OFF_SQES);
    if (sq == MAP_FAILED || cq == MAP_FAILED || sqes == MAP_FAILED) return report("mmap", -1);
    unsigned *sq_tail = (unsigned *)(sq + p.sq_off.tail), *sq_array = (unsigned *)(sq + p.sq_off.array);
    unsigned *cq_head = (unsigned *)(cq + p.cq_off.head);
    struct io_uring_cqe *cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(port))};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    int sock = -1;
    for (int step = 0; step < 2; step++) {
        struct io_uring_sqe *e = &sqes[0];
        memset(e, 0, sizeof *e);
        if (step == 0) {
            e->opcode = IORING_OP_SOCKET;
            e->fd = AF_INET;
            e->off = SOCK_STREAM;
        } else {
            e->opcode = IORING_OP_CONNECT;
            e->fd = sock;
            e->addr = (uint64_t)(uintptr_t)&a;
            e->off = sizeof a;
        }
        sq_array[*sq_tail & (p.sq_entries - 1)] = 0;
        __atomic_store_n(sq_tail, *sq_tail + 1, __ATOMIC_RELEASE);
        if (syscall(__NR_io_uring_enter, fd, 1, 1, IORING_ENTER_GETEVENTS, 0, 0) < 0) return report("io_uring_enter", -1);
        struct io_uring_cqe *c = &cqes[*cq_head & (p.cq_entries - 1)];
        int res = c->res;
        __atomic_store_n(cq_head, *cq_head + 1, __ATOMIC_RELEASE);
        if (res < 0) {
            errno = -res;
            return report(step == 0 ? "uring socket" : "uring connect", -1);
        }
        sock = res;
    }
    return report("uring connect", 0);
}

static int copy_to(int dst, const char *src) {
    int in = open(src, O_RDONLY);
    if (in < 0) return -1;
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0)
        if (write(dst, buf, n) != n) return -1;
    close(in);
    return 0;
}

static void sleep_s(int s) {
    struct timespec t = {.tv_sec = s};
    nanosleep(&t, 0);
}

int main(int argc, char **argv) {
    setvbuf(stdout, 0, _IONBF, 0);
    if (argc < 2) return 2;
    const char *cmd = argv[1];
    if (!strcmp(cmd, "tcp4")) return connect_inet(AF_INET, SOCK_STREAM, argv[2]);
    if (!strcmp(cmd, "tcp6")) return connect_inet(AF_INET6, SOCK_STREAM, argv[2]);
    if (!strcmp(cmd, "udp4")) return connect_inet(AF_INET, SOCK_DGRAM, argv[2]);
    if (!strcmp(cmd, "tunnel")) return tunnel(argv[2]);
    if (!strcmp(cmd, "abstract")) return connect_abstract(argv[2]);
    if (!strcmp(cmd, "uring")) return uring_connect(argv[2]);
    if (!strcmp(cmd, "exec")) return report("execv", execv(argv[2], argv + 2));
    if (!strcmp(cmd, "execveat-abs")) {
        // An absolute path ignores the fd argument: the hole a fd-pinning filter leaves.
        return report("execveat", (int)syscall(__NR_execveat, 3, argv[2], argv + 2, environ, AT_EMPTY_PATH));
    }
    if (!strcmp(cmd, "memfd-exec")) {
        int fd = memfd_create("payload", 0);
        if (fd < 0) return report("memfd_create", -1);
        if (copy_to(fd, argv[2]) < 0) return report("copy", -1);
        return report("fexecve", fexecve(fd, argv + 2, environ));
    }
    if (!strcmp(cmd, "write")) {
        int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) return report("open", -1);
        return report("write", (int)write(fd, argv[3], strlen(argv[3])));
    }
    if (!strcmp(cmd, "symlink")) return report("symlink", symlink(argv[2], argv[3]));
    if (!strcmp(cmd, "link")) return report("link", link(argv[2], argv[3]));
    if (!strcmp(cmd, "userns-sleep")) {
        report("unshare", unshare(CLONE_NEWUSER));
        sleep_s(30);
        return 0;
    }
    if (!strcmp(cmd, "sleep")) {
        sleep_s(atoi(argv[2]));
        return 0;
    }
    if (!strcmp(cmd, "ptrace")) return report("ptrace", (int)ptrace(PTRACE_TRACEME, 0, 0, 0));
    if (!strcmp(cmd, "x32")) return report("x32 getpid", (int)syscall(__NR_getpid | 0x40000000));
    if (!strcmp(cmd, "int80")) {
        long r;
        __asm__ volatile("int $0x80" : "=a"(r) : "a"(20) : "memory"); // i386 getpid
        printf("int80 returned %ld\n", r);
        return 0;
    }
    if (!strcmp(cmd, "tiocsti")) {
        char c = 'x';
        return report("TIOCSTI", ioctl(0, TIOCSTI, &c));
    }
    if (!strcmp(cmd, "alloc")) {
        // Touch N MiB, one page at a time.
        size_t n = (size_t)atol(argv[2]) << 20;
        char *p = malloc(n);
        if (!p) return report("malloc", -1);
        for (size_t i = 0; i < n; i += 4096) p[i] = 1;
        printf("touched %s MiB\n", argv[2]);
        return 0;
    }
    if (!strcmp(cmd, "forks")) {
        // Try to have N children alive at once; count the refusals.
        int n = atoi(argv[2]), ok = 0, refused = 0;
        for (int i = 0; i < n; i++) {
            pid_t p = fork();
            if (p == 0) { sleep_s(30); _exit(0); }
            if (p > 0) ok++; else refused++;
        }
        printf("forked %d refused %d\n", ok, refused);
        return 0;
    }
    if (!strcmp(cmd, "spin")) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        do { clock_gettime(CLOCK_MONOTONIC, &b); } while (b.tv_sec - a.tv_sec < atoi(argv[2]));
        return 0;
    }
    if (!strcmp(cmd, "spin-ignore-term")) {
        signal(SIGTERM, SIG_IGN);
        for (;;) {}
    }
    if (!strcmp(cmd, "mount")) return report("mount", (int)syscall(__NR_mount, "none", "/tmp", "tmpfs", 0, 0));
    if (!strcmp(cmd, "bpf")) return report("bpf", (int)syscall(__NR_bpf, 0, 0, 0));
    fprintf(stderr, "unknown command %s\n", cmd);
    return 2;
}
