/* Signals a host process by pid, and everything it may reach (kill -1). */
#include "attack.h"
#include <signal.h>
int main(int argc, char **argv) {
    step("kill(pid)", kill(atoi(argv[2]), SIGKILL));
    if (argc > 3 && !strcmp(argv[3], "all")) step("kill(-1)", kill(-1, SIGKILL));
    return 0;
}
