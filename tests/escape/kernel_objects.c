/* Tries to obtain a kernel object the default policy denies, then holds it so the host can see
 * it in /proc/PID/fd: perf event, bpf map, userfaultfd, io_uring, packet socket, netlink socket,
 * raw IP socket, fanotify, secret memory (memfd_secret). */
#include "attack.h"
#include <linux/bpf.h>
#include <linux/perf_event.h>
#include <sys/fanotify.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <sys/syscall.h>
#include <linux/io_uring.h>
int main(int argc, char **argv) {
    const char *what = argv[2];
    long fd = -1;
    if (!strcmp(what, "perf")) {
        struct perf_event_attr a = {.type = PERF_TYPE_SOFTWARE, .size = sizeof a, .config = PERF_COUNT_SW_CPU_CLOCK};
        fd = syscall(__NR_perf_event_open, &a, 0, -1, -1, 0);
    } else if (!strcmp(what, "bpf")) {
        union bpf_attr a = {.map_type = BPF_MAP_TYPE_ARRAY, .key_size = 4, .value_size = 4, .max_entries = 1};
        fd = syscall(__NR_bpf, BPF_MAP_CREATE, &a, sizeof a);
    } else if (!strcmp(what, "userfaultfd")) {
        fd = syscall(__NR_userfaultfd, 0);
    } else if (!strcmp(what, "io_uring")) {
        struct io_uring_params p = {0};
        fd = syscall(__NR_io_uring_setup, 4, &p);
    } else if (!strcmp(what, "packet")) {
        fd = socket(AF_PACKET, SOCK_RAW, 0);
    } else if (!strcmp(what, "raw")) {
        fd = socket(AF_INET, SOCK_RAW, IPPROTO_ICMP);
    } else if (!strcmp(what, "netlink")) {
        fd = socket(AF_NETLINK, SOCK_RAW, 0);
    } else if (!strcmp(what, "fanotify")) {
        fd = fanotify_init(FAN_CLASS_NOTIF, O_RDONLY);
    } else if (!strcmp(what, "secretmem")) {
        fd = syscall(447 /* memfd_secret */, 0);
    }
    step(what, fd);
    hold();
    return 0;
}
