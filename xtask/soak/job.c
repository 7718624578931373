/* The soak's jailed program (built static by `cargo xtask soak`): one behaviour per argument. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    const char *m = argc > 1 ? argv[1] : "ok";
    if (!strcmp(m, "ok")) { puts("ok"); return 0; }
    if (!strcmp(m, "exit")) return 3;
    if (!strcmp(m, "crash")) { volatile int *p = 0; return *p; }
    if (!strcmp(m, "abort")) abort();
    if (!strcmp(m, "spin")) { signal(SIGTERM, SIG_IGN); for (;;) {} }
    if (!strcmp(m, "sleep")) { sleep(60); return 0; }
    if (!strcmp(m, "oom")) {
        for (;;) { char *p = malloc(1 << 20); if (p) memset(p, 1, 1 << 20); }
    }
    if (!strcmp(m, "forkbomb")) { for (;;) fork(); }
    if (!strcmp(m, "flood")) {
        static char buf[65536];
        memset(buf, 'x', sizeof buf);
        for (int i = 0; i < 128; i++) if (write(1, buf, sizeof buf) < 0) return 1; /* 8 MiB */
        return 0;
    }
    if (!strcmp(m, "daemon")) {
        /* Double fork + setsid: a grandchild that would outlive the run, then the parent exits. */
        if (fork() == 0) { setsid(); if (fork() == 0) { sleep(60); _exit(0); } _exit(0); }
        return 0;
    }
    fprintf(stderr, "unknown mode %s\n", m);
    return 2;
}
