/* Signals and stdout of a run.
 *
 * SIGINT / SIGTERM: the first one only sets a flag; the step loop stops after
 * the current step and the run writes what it has (train.c). A second one
 * removes the temporary files of the run's outputs and exits at once with
 * 128 + the signal: the atomic writers rename a complete temporary file over
 * the output, so an output is then either its previous version or complete.
 *
 * SIGPIPE is ignored by the commands that run (train, profile, grad, bench,
 * validate; main.c): a closed stdout must not kill a run
 * before it writes its files. Write errors on stdout are reported once, at
 * exit (tf_cli_finish_stdout). */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_TRACKED 8

static volatile sig_atomic_t g_signal;
static struct timespec g_first; /* when the first signal came */
/* Written before the handlers are installed, read only by the handler. */
static char g_tmp[MAX_TRACKED][PATH_MAX + 32];
static int g_ntmp;

static void put(const char *s)
{
    ssize_t r = write(STDERR_FILENO, s, strlen(s));
    (void)r;
}

/* One signal can arrive twice at once: `timeout` and shells forward it to
 * the process and to its whole process group. A repeat within this window is
 * that echo, not a second request. */
#define REPEAT_WINDOW_NS 250000000L

static void on_signal(int sig)
{
    int saved = errno;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now); /* async-signal-safe */
    if (!g_signal) {
        g_first = now;
        g_signal = sig;
        errno = saved;
        return;
    }
    long ns = (long)(now.tv_sec - g_first.tv_sec) * 1000000000L + (now.tv_nsec - g_first.tv_nsec);
    if (ns < REPEAT_WINDOW_NS) {
        errno = saved;
        return;
    }
    for (int i = 0; i < g_ntmp; i++)
        unlink(g_tmp[i]);
    put(sig == SIGINT ? "tinyfold: interrupted (SIGINT) again: exiting now; outputs not yet "
                        "written are left as they were\n"
                      : "tinyfold: terminated (SIGTERM) again: exiting now; outputs not yet "
                        "written are left as they were\n");
    errno = saved;
    _exit(128 + sig);
}

void tf_cli_signals_track(const char *path)
{
    if (!path || g_ntmp >= MAX_TRACKED)
        return;
    int n = snprintf(g_tmp[g_ntmp], sizeof g_tmp[g_ntmp], "%s.tmp.%ld", path, (long)getpid());
    if (n > 0 && (size_t)n < sizeof g_tmp[g_ntmp])
        g_ntmp++;
}

void tf_cli_signals_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART; /* reads and writes carry on; the loop polls the flag */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

int tf_cli_stop_signal(void) { return (int)g_signal; }

const char *tf_cli_signal_name(int sig)
{
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal";
}

void tf_cli_ignore_sigpipe(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGPIPE, &sa, NULL);
}

int tf_cli_finish_stdout(int rc)
{
    errno = 0;
    int bad = fflush(stdout) != 0;
    int e = errno;
    bad |= ferror(stdout) != 0;
    if (!bad)
        return rc;
    /* stdout is gone or full: say so where it can still be read. */
    fprintf(stderr, "tinyfold: standard output: write failed%s%s (files written by the "
                    "command are not affected)\n",
            e ? ": " : "", e ? strerror(e) : "");
    return rc == TF_EXIT_OK ? TF_EXIT_FAIL : rc;
}
