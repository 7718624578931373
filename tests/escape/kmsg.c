/* Reads the kernel log: syslog(READ_ALL) and /dev/kmsg; prints the lines about stockade. */
#include "attack.h"
#include <sys/klog.h>
int main(int argc, char **argv) {
    static char buf[1 << 20];
    int n = klogctl(3, buf, sizeof buf - 1);
    if (!step("syslog(READ_ALL)", n)) {
        buf[n] = 0;
        for (char *l = strtok(buf, "\n"); l; l = strtok(0, "\n"))
            if (strstr(l, argv[2])) printf("log: %s\n", l);
    }
    int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
    if (step("open /dev/kmsg", fd)) return 0;
    ssize_t r;
    while ((r = read(fd, buf, sizeof buf - 1)) > 0) {
        buf[r] = 0;
        if (strstr(buf, argv[2])) printf("kmsg: %s", buf);
    }
    return 0;
}
