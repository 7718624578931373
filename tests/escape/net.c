/* Reaches a listener on the host's loopback: TCP, UDP, IPv6, an abstract or a path unix socket,
 * io_uring's connect, and the i386 and x32 entry points. */
#include "attack.h"
#include <arpa/inet.h>
#include <stddef.h>
#include <linux/io_uring.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>

static int inet(int family, int type, int port, struct sockaddr_storage *ss) {
    memset(ss, 0, sizeof *ss);
    if (family == AF_INET) {
        struct sockaddr_in *a = (void *)ss;
        a->sin_family = AF_INET, a->sin_port = htons(port), a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        return sizeof *a;
    }
    struct sockaddr_in6 *a = (void *)ss;
    a->sin6_family = AF_INET6, a->sin6_port = htons(port), a->sin6_addr = in6addr_loopback;
    return sizeof *a;
}

static int uring_connect(int port) {
    struct io_uring_params p = {0};
    int ring = syscall(__NR_io_uring_setup, 4, &p);
    if (step("io_uring_setup", ring)) return 1;
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (step("socket", s)) return 1;
    struct sockaddr_storage ss;
    int len = inet(AF_INET, SOCK_STREAM, port, &ss);
    size_t sq_sz = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    char *sq = mmap(0, sq_sz, PROT_READ | PROT_WRITE, MAP_SHARED, ring, IORING_OFF_SQ_RING);
    struct io_uring_sqe *sqes = mmap(0, p.sq_entries * sizeof *sqes, PROT_READ | PROT_WRITE, MAP_SHARED, ring, IORING_OFF_SQES);
    memset(&sqes[0], 0, sizeof sqes[0]);
    sqes[0].opcode = IORING_OP_CONNECT, sqes[0].fd = s, sqes[0].addr = (unsigned long)&ss, sqes[0].off = len;
    ((unsigned *)(sq + p.sq_off.array))[0] = 0;
    __atomic_store_n((unsigned *)(sq + p.sq_off.tail), 1, __ATOMIC_RELEASE);
    return step("io_uring_enter(CONNECT)", syscall(__NR_io_uring_enter, ring, 1, 1, IORING_ENTER_GETEVENTS, 0, 0));
}

int main(int argc, char **argv) {
    const char *how = argv[2], *where = argv[3];
    struct sockaddr_storage ss;
    if (!strcmp(how, "tcp4") || !strcmp(how, "tcp6") || !strcmp(how, "udp4")) {
        int family = how[3] == '6' ? AF_INET6 : AF_INET, type = how[0] == 'u' ? SOCK_DGRAM : SOCK_STREAM;
        int s = socket(family, type, 0);
        if (step("socket", s)) return 1;
        int len = inet(family, type, atoi(where), &ss);
        if (step("connect", connect(s, (void *)&ss, len))) return 1;
        return step("send", send(s, "PWNED", 5, 0));
    }
    if (!strcmp(how, "abstract") || !strcmp(how, "unix")) {
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        int abstract = how[0] == 'a';
        strncpy(a.sun_path + abstract, where, sizeof a.sun_path - 2);
        int s = socket(AF_UNIX, SOCK_STREAM, 0);
        if (step("socket(AF_UNIX)", s)) return 1;
        int len = offsetof(struct sockaddr_un, sun_path) + abstract + strlen(where);
        if (step("connect", connect(s, (void *)&a, len))) return 1;
        return step("send", send(s, "PWNED", 5, 0));
    }
    if (!strcmp(how, "uring")) return uring_connect(atoi(where));
    if (!strcmp(how, "int80")) {
        /* The i386 entry point: socketcall(SOCKET) then socketcall(CONNECT) through int 0x80
         * (a static, non-PIE binary keeps its data below 4 GiB, where 32-bit pointers reach). */
        static unsigned args[3] = {AF_INET, SOCK_STREAM, 0};
        static struct sockaddr_in addr;
        static unsigned cargs[3];
        long fd, rc;
        __asm__ volatile("int $0x80" : "=a"(fd) : "a"(102), "b"(1), "c"(args) : "memory");
        printf("int80 socketcall(SOCKET): %ld\n", fd);
        if (fd < 0) return 1;
        addr.sin_family = AF_INET, addr.sin_port = htons(atoi(where)), addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        cargs[0] = fd, cargs[1] = (unsigned)(unsigned long)&addr, cargs[2] = sizeof addr;
        __asm__ volatile("int $0x80" : "=a"(rc) : "a"(102), "b"(3), "c"(cargs) : "memory");
        printf("int80 socketcall(CONNECT): %ld\n", rc);
        return rc < 0;
    }
    if (!strcmp(how, "x32")) {
        long s = syscall(__NR_socket | 0x40000000, AF_INET, SOCK_STREAM, 0);
        if (step("x32 socket", s)) return 1;
        int len = inet(AF_INET, SOCK_STREAM, atoi(where), &ss);
        return step("x32 connect", syscall(__NR_connect | 0x40000000, s, &ss, len));
    }
    return 2;
}
