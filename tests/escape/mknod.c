/* Makes a device node (/dev/null's numbers, harmless) in the writable directory: a jail that
 * allowed it would let the next holder of the directory reach a host device through it. */
#include "attack.h"
#include <sys/stat.h>
#include <sys/sysmacros.h>
int main(int argc, char **argv) { return step("mknod", mknod(argv[2], S_IFCHR | 0666, makedev(1, 3))); }
