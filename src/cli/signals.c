/* Signals and stdout of a run.
 *
 * SIGINT / SIGTERM: the first one sets a flag; the step loop stops after the
 * current step and the run writes what it has (train.c). A step that does
 * not end (OpenBLAS retrying a failed allocation for ever, a device that
 * hangs) would hold the run for ever, so the first signal also sets a
 * deadline: if the step loop has not ended by then, the run exits as for a
 * second signal. The deadline is TF_STOP_GRACE_S after the signal, or
 * TF_STOP_STEPS times the longest step the run has taken when that is longer
 * (a slow step is not a stuck one). A second signal removes the temporary
 * files of the run's outputs and exits at once with 128 + the signal: the
 * atomic writers rename a complete temporary file over the output, so an
 * output is then either its previous version or complete.
 *
 * SIGPIPE is ignored by the commands that run (train, profile, grad, bench,
 * validate; main.c): a closed stdout must not kill a run
 * before it writes its files. Write errors on stdout are reported once, at
 * exit (tf_cli_finish_stdout). */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_TRACKED 8
#define TF_STOP_GRACE_S 10 /* the deadline's least seconds after the first signal */
#define TF_STOP_STEPS 3    /* ... or this many of the longest step so far */

static volatile sig_atomic_t g_signal;
static struct timespec g_first; /* when the first signal came */
/* Written before the handlers are installed, read only by the handlers. */
static char g_tmp[MAX_TRACKED][PATH_MAX + 32];
static int g_ntmp;
/* the deadline in seconds, kept by the step loop (tf_cli_signals_step_ms) */
static volatile sig_atomic_t g_grace_s = TF_STOP_GRACE_S;
static double g_longest_ms;
/* set once the step loop has ended: no deadline from then on */
static volatile sig_atomic_t g_over;

static void put(const char *s)
{
    ssize_t r = write(STDERR_FILENO, s, strlen(s));
    (void)r;
}

/* s with n's decimal digits appended (no stdio in a handler) */
static void put_int(char *s, size_t cap, long n)
{
    char d[24];
    int k = 0;
    do
        d[k++] = (char)('0' + n % 10);
    while ((n /= 10) > 0 && k < (int)sizeof d);
    size_t len = strlen(s);
    while (k > 0 && len + 1 < cap)
        s[len++] = d[--k];
    s[len] = '\0';
}

/* Removes the temporary files, says why in one line and exits 128 + sig. */
static void exit_now(int sig, const char *why)
{
    for (int i = 0; i < g_ntmp; i++)
        unlink(g_tmp[i]);
    char line[256] = "tinyfold: ";
    strcat(line, sig == SIGINT ? "interrupted by SIGINT" : "terminated by SIGTERM");
    strcat(line, why);
    strcat(line, ": exiting now; outputs not yet written are left as they were\n");
    put(line);
    _exit(128 + sig);
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
        if (!g_over)
            alarm((unsigned)g_grace_s);
        errno = saved;
        return;
    }
    long ns = (long)(now.tv_sec - g_first.tv_sec) * 1000000000L + (now.tv_nsec - g_first.tv_nsec);
    if (ns < REPEAT_WINDOW_NS) {
        errno = saved;
        return;
    }
    exit_now(sig, " again");
}

/* The first signal's deadline: the step under way has not ended. */
static void on_deadline(int sig)
{
    (void)sig;
    if (g_over || !g_signal)
        return; /* the step loop ended meanwhile: the run is writing its outputs */
    char why[96] = " and the step under way did not end within ";
    put_int(why, sizeof why, (long)g_grace_s);
    strcat(why, " s of it");
    exit_now((int)g_signal, why);
}

void tf_cli_signals_step_ms(double ms)
{
    if (!(ms > g_longest_ms))
        return;
    g_longest_ms = ms;
    double s = ceil(TF_STOP_STEPS * ms * 1e-3);
    if (s > TF_STOP_GRACE_S)
        g_grace_s = s < 86400 ? (sig_atomic_t)s : 86400;
}

void tf_cli_signals_steps_over(void)
{
    g_over = 1;
    alarm(0); /* a deadline that comes anyway finds g_over set */
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
    sa.sa_handler = on_deadline;
    sigaction(SIGALRM, &sa, NULL);
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
