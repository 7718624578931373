/* Shared by the escape-suite attacks: each attack is one small program built from source in the
 * test run (static, with the system compiler). Attacks print what they obtained; the harness
 * judges them from the host side (a secret seen in the output, a host file changed, a listener
 * that logged a connection, a host process signalled, a kernel object held), never by their word. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Prints the result of a step: "name: ok" or "name: <errno name>". */
__attribute__((unused)) static int step(const char *name, long rc) {
    if (rc < 0) printf("%s: %s\n", name, strerrorname_np(errno) ? strerrorname_np(errno) : "error");
    else printf("%s: ok (%ld)\n", name, rc);
    fflush(stdout);
    return rc < 0 ? 1 : 0;
}

/* Prints up to 256 KiB of what an fd holds (NULs as spaces: environ, cmdline). */
__attribute__((unused)) static void dump_fd(const char *label, int fd) {
    static char buf[1 << 18];
    ssize_t n, total = 0;
    while (total < (ssize_t)sizeof buf - 1 && (n = read(fd, buf + total, sizeof buf - 1 - total)) > 0) total += n;
    if (total == 0 && n < 0) { step(label, -1); return; }
    for (ssize_t i = 0; i < total; i++) if (!buf[i]) buf[i] = ' ';
    buf[total] = 0;
    printf("%s: read %zd bytes: %s\n", label, total, buf);
    fflush(stdout);
}

/* Holds whatever the attack obtained for the host to inspect (/proc/PID/fd, ns, mountinfo). */
__attribute__((unused)) static void hold(void) {
    printf("holding\n");
    fflush(stdout);
    sleep(3);
}
