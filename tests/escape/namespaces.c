/* A nested user namespace (then root in it), or a new mount namespace with a tmpfs of a telltale
 * size; holds it for the host to look at /proc/PID/ns and /proc/PID/mountinfo. */
#include "attack.h"
#include <sched.h>
#include <sys/mount.h>
int main(int argc, char **argv) {
    if (!strcmp(argv[2], "user")) {
        step("unshare(CLONE_NEWUSER)", unshare(CLONE_NEWUSER));
    } else {
        step("unshare(CLONE_NEWNS)", unshare(CLONE_NEWNS));
        step("mount(tmpfs, size=1234k)", mount("none", "/tmp", "tmpfs", 0, "size=1234k"));
    }
    hold();
    return 0;
}
