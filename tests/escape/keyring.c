/* Reads the caller's session keyring: the key named by argv[2]. */
#include "attack.h"
#include <linux/keyctl.h>
#include <sys/syscall.h>
int main(int argc, char **argv) {
    long id = syscall(__NR_keyctl, KEYCTL_SEARCH, KEY_SPEC_SESSION_KEYRING, "user", argv[2], 0);
    if (step("keyctl(SEARCH session)", id)) {
        id = syscall(__NR_request_key, "user", argv[2], NULL, 0);
        if (step("request_key", id)) return 1;
    }
    char buf[256] = {0};
    long n = syscall(__NR_keyctl, KEYCTL_READ, id, buf, sizeof buf - 1);
    if (!step("keyctl(READ)", n)) printf("key: %s\n", buf);
    return 0;
}
