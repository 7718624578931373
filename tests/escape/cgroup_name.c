/* Prints /proc/self/cgroup: on a cgroup v1 host a leaf joined after the cgroup namespace was
 * made shows its name, which carries the supervisor's host pid. */
#include "attack.h"
int main(int argc, char **argv) {
    int fd = open("/proc/self/cgroup", O_RDONLY);
    if (fd < 0) return step("open /proc/self/cgroup", -1);
    dump_fd("/proc/self/cgroup", fd);
    return 0;
}
