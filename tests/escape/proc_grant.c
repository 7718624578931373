/* Reads every process's command line through a procfs mounted below a granted directory (the
 * path given): a recursive bind would carry the host's /proc into the jail. */
#include "attack.h"
#include <dirent.h>
int main(int argc, char **argv) {
    DIR *d = opendir(argv[2]);
    if (!d) return step("opendir", -1);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        char path[4200];
        snprintf(path, sizeof path, "%s/%s/cmdline", argv[2], e->d_name);
        int fd = open(path, O_RDONLY);
        if (fd < 0) continue;
        dump_fd(path, fd);
        close(fd);
        n++;
    }
    printf("read %d command lines\n", n);
    return 0;
}
