/* Runs another program after the first exec, four ways; the target creates a marker file. */
#include "attack.h"
#include <sys/mman.h>
#include <sys/syscall.h>
int main(int argc, char **argv) {
    const char *how = argv[2], *target = argv[3], *marker = argv[4];
    char *args[] = {(char *)target, (char *)marker, NULL};
    char *env[] = {NULL};
    if (!strcmp(how, "execve")) return step("execve", execve(target, args, env));
    if (!strcmp(how, "execveat")) return step("execveat", syscall(SYS_execveat, AT_FDCWD, target, args, env, 0));
    if (!strcmp(how, "memfd")) {
        /* Bytes never on disk: copy the target into a memfd and exec that. */
        int src = open(target, O_RDONLY), mfd = memfd_create("x", MFD_CLOEXEC);
        char buf[65536];
        ssize_t n;
        while (src >= 0 && (n = read(src, buf, sizeof buf)) > 0) write(mfd, buf, n);
        return step("fexecve(memfd)", fexecve(mfd, args, env));
    }
    if (!strcmp(how, "ldso")) {
        char *ld[] = {"/lib64/ld-linux-x86-64.so.2", (char *)target, (char *)marker, NULL};
        return step("execve(ld.so)", execve(ld[0], ld, env));
    }
    if (!strcmp(how, "shell")) {
        char cmd[4200];
        snprintf(cmd, sizeof cmd, "%s %s", target, marker);
        char *sh[] = {"/bin/sh", "-c", cmd, NULL};
        return step("execve(/bin/sh)", execve("/bin/sh", sh, env));
    }
    return 2;
}
