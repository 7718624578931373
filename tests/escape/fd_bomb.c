/* Exhausts file descriptors in as many processes as it can make, then holds them. */
#include "attack.h"
int main(void) {
    for (int i = 0; i < 200 && fork() > 0; i++) {}
    long n = 0;
    while (open("/dev/null", O_RDONLY) >= 0) n++;
    printf("%ld fds\n", n);
    sleep(3);
    return 0;
}
