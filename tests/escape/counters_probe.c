/* Run on the host (as root, not jailed) while `counters` holds its counters: can root still
 * create an inotify instance and queue a real-time signal? */
#include "attack.h"
#include <signal.h>
#include <sys/inotify.h>
int main(void) {
    int fd = inotify_init1(IN_CLOEXEC);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGRTMIN + 1);
    sigprocmask(SIG_BLOCK, &set, 0);
    union sigval v = {0};
    int q = sigqueue(getpid(), SIGRTMIN + 1, v);
    printf("root inotify_init1: %s, root sigqueue: %s\n", fd >= 0 ? "ok" : strerrorname_np(errno),
           q == 0 ? "ok" : strerrorname_np(errno));
    return fd >= 0 && q == 0 ? 0 : 1;
}
