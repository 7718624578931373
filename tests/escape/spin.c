/* Ignores SIGTERM and SIGINT and spins: only a kill ends it. */
#include "attack.h"
#include <signal.h>
int main(void) {
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    for (volatile unsigned long i = 0;; i++) {}
}
