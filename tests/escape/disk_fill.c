/* Fills the writable places (piston tests/fallocate.py): each path given with bytes until refused,
 * then with empty files (inodes) until refused. */
#include "attack.h"
#include <signal.h>
int main(int argc, char **argv) {
    signal(SIGXFSZ, SIG_IGN); /* the file-size rlimit: EFBIG, next file */
    static char chunk[1 << 20];
    memset(chunk, 'x', sizeof chunk);
    for (int i = 2; i < argc; i++) {
        long total = 0;
        for (int f = 0; f < 1000; f++) {
            char path[4200];
            snprintf(path, sizeof path, "%s/fill-%d", argv[i], f);
            int fd = open(path, O_CREAT | O_WRONLY, 0644);
            if (fd < 0) break;
            ssize_t n;
            while ((n = write(fd, chunk, sizeof chunk)) > 0) total += n;
            close(fd);
            if (n < 0 && errno != EFBIG) break;
        }
        int files = 0;
        for (; files < 100000; files++) {
            char path[4200];
            snprintf(path, sizeof path, "%s/inode-%d", argv[i], files);
            int fd = open(path, O_CREAT | O_WRONLY, 0644);
            if (fd < 0) break;
            close(fd);
        }
        printf("%s: wrote %ld MiB and %d empty files\n", argv[i], total >> 20, files);
    }
    return 0;
}
