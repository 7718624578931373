/* Double fork and setsid: a daemon that tries to outlive the run (argv[1], its marker, stays in
 * its command line for the host to look for). */
#include "attack.h"
int main(int argc, char **argv) {
    if (fork() == 0) {
        setsid();
        if (fork() == 0) {
            for (int i = 0; i < 1024; i++) close(i);
            sleep(30);
            _exit(0);
        }
        _exit(0);
    }
    printf("parent exits, daemon left\n");
    return 0;
}
