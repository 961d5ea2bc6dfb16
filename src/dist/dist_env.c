/* What the launcher says about the job, read from its environment; shared by
 * the MPI and the single-process builds (the latter must refuse a multi-rank
 * launch rather than run P independent copies). */
#include <stdio.h>
#include <stdlib.h>

#include "dist/dist.h"

int tf_dist_launch_size(char *var, size_t n) {
    /* Open MPI's mpirun, MPICH / Intel MPI (PMI), Slurm's srun (the step's
     * task count: SLURM_NTASKS alone is also set inside a batch script that
     * launched nothing) */
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                       "SLURM_STEP_NUM_TASKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (!v || !*v) continue;
        char *end;
        long s = strtol(v, &end, 10);
        if (*end || s < 1 || s > 1 << 20) continue;
        if (var && n) snprintf(var, n, "%s=%ld", vars[i], s);
        return (int)s;
    }
    if (var && n) var[0] = 0;
    return 1;
}
