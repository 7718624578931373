/* The exec target: creates the file named by argv[1] (its existence proves it ran). */
#include <fcntl.h>
int main(int argc, char **argv) { return argc > 1 && open(argv[1], O_CREAT | O_WRONLY, 0666) >= 0 ? 0 : 1; }
