/* Writes one byte at a time for the seconds given: each write a wakeup for a supervisor that
 * reads as data arrives, outside the run's cgroup. */
#include "attack.h"
#include <time.h>
int main(int argc, char **argv) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    b = a;
    long n = 0;
    while (b.tv_sec - a.tv_sec < atoi(argv[2])) {
        if (write(1, "x", 1) != 1) break;
        if (!(++n & 1023)) clock_gettime(CLOCK_MONOTONIC, &b);
    }
    fprintf(stderr, "wrote %ld bytes\n", n);
    return 0;
}
