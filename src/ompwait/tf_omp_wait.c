/* OpenMP's wait policy, set before the OpenMP runtime starts.
 *
 * A libgomp thread that waits (at a barrier, or for the next parallel region)
 * spins GOMP_SPINCOUNT times before it sleeps: 300000 by default, ~16 ms
 * where the pause instruction takes ~50 ns. While other processes hold the
 * cores, a spinning thread keeps the core its partner needs and is not
 * favoured by the scheduler as a woken one is: a step of a few ms then
 * waits for the scheduler at every region (bench/RESULTS.md).
 * Even a short spin loses there: a thread that spins through the gaps
 * between regions looks busy to the scheduler, is preempted like a busy
 * process and waits for its turn, where a sleeping one is run as soon as it
 * is woken. On free cores spinning saves the wake-up of every region. So
 * auto looks at the machine as the process starts: when other tasks are
 * running on half the processors this process may use or more, a waiting
 * thread sleeps at once; else it spins TF_OMP_WAIT_AUTO_SPIN times (~50 us)
 * and then sleeps, which bounds the loss should the machine get busy later
 * (bench/omp_wait.sh measures the policies on idle and busy cores).
 *
 * libgomp reads OMP_WAIT_POLICY and GOMP_SPINCOUNT once, in its constructor,
 * and has no call to change them. So this file is a shared object of its
 * own whose constructor sets them first: the loader runs a program's
 * constructors dependencies first and, among libraries that do not depend on
 * one another, in the reverse order of the program's DT_NEEDED entries;
 * CMakeLists.txt links this object after libgomp, and
 * tests/cli/test_omp_wait.sh checks the value libgomp read.
 *
 * The policy is tinyfold's --omp-wait: auto (the default) keeps the user's
 * OMP_WAIT_POLICY or GOMP_SPINCOUNT when either is set, else chooses as
 * above (GOMP_SPINCOUNT 0 or TF_OMP_WAIT_AUTO_SPIN); active and passive set
 * OMP_WAIT_POLICY and override the environment's. The loader passes the
 * command line to the constructor: this reads --omp-wait there, in full
 * spelling as the option parser accepts it; the parser reads it again,
 * refuses a bad value, and checks that it names what was applied. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT; setenv, nanosleep */
#include "tf_omp_wait.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STR_(x) #x
#define STR(x) STR_(x)

static struct {
    int applied;
    tf_omp_wait policy;
    char kept[96];       /* auto: the environment's setting, kept */
    char overridden[96]; /* active/passive: the environment's setting, replaced */
    int busy, others, cpus; /* auto: what it saw of the machine */
} st;

/* The processors this process may run on; 0 when unknown. */
static int cpus_available(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
}

/* Other tasks running on the machine now: /proc/stat's procs_running counts
 * every running task, this one included. The fewest of three looks 1 ms
 * apart, so that a task that runs for an instant does not count. -1 when
 * unreadable. (A container limited to some of the host's processors sees
 * the host's count: it may sleep at once where it need not.) */
static int others_running(void)
{
    int fewest = -1;
    for (int k = 0; k < 3; k++) {
        if (k) {
            struct timespec ms = {0, 1000000};
            nanosleep(&ms, NULL);
        }
        FILE *f = fopen("/proc/stat", "r");
        if (!f)
            return -1;
        char line[256];
        int n = -1;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "procs_running %d", &n) == 1)
                break;
        fclose(f);
        if (n < 1)
            return -1;
        if (fewest < 0 || n - 1 < fewest)
            fewest = n - 1;
    }
    return fewest;
}

static void env_setting(char *out, size_t n)
{
    const char *pol = getenv("OMP_WAIT_POLICY"), *spin = getenv("GOMP_SPINCOUNT");
    out[0] = '\0';
    if (pol && spin)
        snprintf(out, n, "OMP_WAIT_POLICY=%.24s and GOMP_SPINCOUNT=%.24s", pol, spin);
    else if (pol || spin)
        snprintf(out, n, "%s=%.32s", pol ? "OMP_WAIT_POLICY" : "GOMP_SPINCOUNT", pol ? pol : spin);
}

__attribute__((constructor)) static void tf_omp_wait_init(int argc, char **argv, char **envp)
{
    (void)envp;
    if (argc < 1 || !argv)
        return;
    tf_omp_wait policy = TF_OMP_WAIT_AUTO;
    for (int i = 1; i < argc && argv[i]; i++) {
        const char *a = argv[i], *v = NULL;
        if (strcmp(a, "--") == 0)
            break;
        if (strcmp(a, "--omp-wait") == 0)
            v = i + 1 < argc ? argv[++i] : NULL;
        else if (strncmp(a, "--omp-wait=", 11) == 0)
            v = a + 11;
        if (!v)
            continue;
        /* A bad value leaves the last good one: the parser refuses it. */
        if (strcmp(v, "auto") == 0)
            policy = TF_OMP_WAIT_AUTO;
        else if (strcmp(v, "active") == 0)
            policy = TF_OMP_WAIT_ACTIVE;
        else if (strcmp(v, "passive") == 0)
            policy = TF_OMP_WAIT_PASSIVE;
    }
    st.policy = policy;
    st.applied = 1;
    if (policy == TF_OMP_WAIT_AUTO) {
        env_setting(st.kept, sizeof st.kept);
        if (st.kept[0])
            return;
        st.cpus = cpus_available();
        st.others = others_running();
        st.busy = st.cpus > 0 && st.others >= (st.cpus + 1) / 2;
        setenv("GOMP_SPINCOUNT", st.busy ? "0" : STR(TF_OMP_WAIT_AUTO_SPIN), 1);
        return;
    }
    env_setting(st.overridden, sizeof st.overridden);
    /* libgomp lets GOMP_SPINCOUNT win over OMP_WAIT_POLICY */
    unsetenv("GOMP_SPINCOUNT");
    setenv("OMP_WAIT_POLICY", policy == TF_OMP_WAIT_ACTIVE ? "active" : "passive", 1);
}

tf_omp_wait tf_omp_wait_requested(int *applied)
{
    if (applied)
        *applied = st.applied;
    return st.policy;
}

void tf_omp_wait_describe(char *out, size_t n)
{
    if (!st.applied)
        snprintf(out, n, "the OpenMP runtime's own (the command line was not readable before it "
                         "started)");
    else if (st.policy == TF_OMP_WAIT_AUTO && st.kept[0])
        snprintf(out, n, "%s (the environment's, kept by --omp-wait auto)", st.kept);
    else if (st.policy == TF_OMP_WAIT_AUTO && st.busy)
        snprintf(out, n, "auto: sleep at once (%d other task%s running on the %d processor%s at "
                         "start)",
                 st.others, st.others == 1 ? " was" : "s were", st.cpus, st.cpus == 1 ? "" : "s");
    else if (st.policy == TF_OMP_WAIT_AUTO)
        snprintf(out, n, "auto: spin %d times, then sleep (the processors were free at start)",
                 TF_OMP_WAIT_AUTO_SPIN);
    else
        snprintf(out, n, "%s (--omp-wait%s%s)",
                 st.policy == TF_OMP_WAIT_ACTIVE ? "active: spin" : "passive: sleep at once",
                 st.overridden[0] ? "; replaces " : "", st.overridden);
}
