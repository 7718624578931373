/* A fork bomb (piston tests/fork.py): every process forks forever. */
#include "attack.h"
int main(void) {
    for (;;) fork();
}
