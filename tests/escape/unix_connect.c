/* Reaches host daemons' socket files found in a granted directory: connect() to a stream
 * socket, sendto() a datagram socket, and sendmsg() with a name through a datagram socketpair. */
#include "attack.h"
#include <sys/socket.h>
#include <sys/un.h>
static struct sockaddr_un addr(const char *path) {
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    strncpy(a.sun_path, path, sizeof a.sun_path - 1);
    return a;
}
int main(int argc, char **argv) {
    struct sockaddr_un s = addr(argv[2]), d = addr(argv[3]);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    step("socket(stream)", fd);
    if (fd >= 0) step("connect", connect(fd, (struct sockaddr *)&s, sizeof s));
    int g = socket(AF_UNIX, SOCK_DGRAM, 0);
    step("socket(dgram)", g);
    if (g >= 0) step("sendto", sendto(g, "x", 1, 0, (struct sockaddr *)&d, sizeof d));
    int pair[2];
    if (step("socketpair(dgram)", socketpair(AF_UNIX, SOCK_DGRAM, 0, pair)) == 0) {
        struct iovec iov = {.iov_base = "y", .iov_len = 1};
        struct msghdr m = {.msg_name = &d, .msg_namelen = sizeof d, .msg_iov = &iov, .msg_iovlen = 1};
        step("sendmsg", sendmsg(pair[0], &m, 0));
    }
    int sp[2];
    step("socketpair(stream)", socketpair(AF_UNIX, SOCK_STREAM, 0, sp));
    return 0;
}
