/* Allocates and touches 4 GiB, 64 MiB at a time. */
#include "attack.h"
int main(void) {
    for (int i = 0; i < 64; i++) {
        char *p = malloc(64 << 20);
        if (!p) return step("malloc", -1);
        memset(p, i + 1, 64 << 20);
    }
    printf("allocated 4 GiB\n");
    return 0;
}
