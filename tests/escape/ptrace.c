/* Attaches to a host process and detaches with SIGKILL; reads its memory with process_vm_readv. */
#include "attack.h"
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/wait.h>
int main(int argc, char **argv) {
    pid_t pid = atoi(argv[2]);
    unsigned long addr = strtoul(argv[3], 0, 0);
    char buf[256] = {0};
    struct iovec local = {buf, sizeof buf - 1}, remote = {(void *)addr, sizeof buf - 1};
    if (!step("process_vm_readv", process_vm_readv(pid, &local, 1, &remote, 1, 0)))
        printf("memory: %s\n", buf);
    if (!step("ptrace(ATTACH)", ptrace(PTRACE_ATTACH, pid, 0, 0))) {
        waitpid(pid, 0, __WALL);
        step("ptrace(DETACH, SIGKILL)", ptrace(PTRACE_DETACH, pid, 0, (void *)SIGKILL));
    }
    return 0;
}
