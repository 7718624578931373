/* A host process for the process attacks to aim at: sleeps, with a secret in its command line. */
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) { sleep(argc > 2 ? atoi(argv[2]) : 60); return 0; }
