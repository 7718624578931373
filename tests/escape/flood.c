/* Floods stdout and stderr with 2 GiB each (snekbox #81: output that OOMs the supervisor). */
#include "attack.h"
int main(void) {
    static char chunk[1 << 20];
    memset(chunk, 'x', sizeof chunk);
    for (int i = 0; i < 2048; i++) {
        if (write(1, chunk, sizeof chunk) < 0 || write(2, chunk, sizeof chunk) < 0) return 1;
    }
    return 0;
}
