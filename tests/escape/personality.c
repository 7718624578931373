/* Switches its execution domain (READ_IMPLIES_EXEC | ADDR_NO_RANDOMIZE: every readable page
 * executable, no ASLR), then holds so the host can read /proc/PID/personality. */
#include "attack.h"
#include <sys/personality.h>
int main(int argc, char **argv) {
    if (step("personality", personality(READ_IMPLIES_EXEC | ADDR_NO_RANDOMIZE)) != 0) return 1;
    hold();
    return 0;
}
