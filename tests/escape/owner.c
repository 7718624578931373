/* Creates a file in the writable directory: the host checks who owns it (never host root). */
#include "attack.h"
int main(int argc, char **argv) { return step("create", open(argv[2], O_CREAT | O_WRONLY, 0644)); }
