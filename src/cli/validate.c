/* `tinyfold validate` (also `--validate-setup`): what would run, and a tiny
 * 3-step run that must give finite losses on which the three levels agree
 * (src/train/selfcheck.h runs it). */
#include "cli.h"
#include "backend/registry.h"
#include "train/selfcheck.h"

#include <string.h>

static void created(void *ctx, const tf_trainer *t)
{
    (void)ctx;
    printf("Trainer: %s\n", tf_trainer_backend_name(t));
}

static void stepped(void *ctx, int i, const tf_step_stats *st)
{
    const tf_config *c = ctx;
    printf("  step %d/%d: loss %.6f (%.1f ms)\n", i + 1, c->num_steps, (double)st->loss,
           st->step_ms);
    fflush(stdout);
}

static void leveled(void *ctx, tf_impl impl, float loss)
{
    (void)ctx;
    printf(" %s %.6f", tf_cli_impl_name(impl), (double)loss);
}

int tf_cli_validate(tf_cli_opts *o)
{
    tf_config c = o->cfg;
    char note[384], err[512], why[1024] = "";
    tf_selfcheck_problem(&c);
    if (tf_config_validate(&c, err, sizeof err) != TF_OK) {
        tf_cli_error("%s", err);
        return TF_EXIT_USAGE;
    }
    int rc = tf_cli_resolve_backend(&c, note, sizeof note);
    if (rc != TF_EXIT_OK)
        return rc;

    printf("tinyfold %s validate\n", TF_VERSION);
    char built[128];
    tf_backend_built_names(built, sizeof built, ", ");
    printf("Build: backends %s\n", built);
    const tf_backend_entry *gpu = tf_backend_gpu();
    int gpu_ok = tf_backend_usable(gpu, why, sizeof why);
    printf("%s: %s%s\n", gpu->title, gpu_ok ? "available" : "not available: ",
           gpu_ok ? "" : (why[0] ? why : "no usable device"));

    tf_backend_opts bo;
    if (tf_backend_opts_from_config(&bo, &c, err, sizeof err) != 0) {
        tf_cli_error("%s", err);
        return TF_EXIT_USAGE;
    }
    /* the CPU always (the host's BLAS and threads), then the one runs use */
    const tf_backend_entry *cpu = tf_backend_find(TF_BACKEND_CPU);
    const tf_backend_entry *run = tf_backend_find(c.backend);
    char desc[512] = "";
    if (tf_selfcheck_describe(cpu, &bo, desc, sizeof desc, err, sizeof err) != 0) {
        tf_cli_error("validation failed: the %s backend does not start: %s", cpu->title, err);
        return TF_EXIT_FAIL;
    }
    printf("%s backend: %s\n", cpu->title, desc);
    printf("OpenMP wait: %s\n", tf_cli_omp_wait_info());
    if (run && run != cpu) {
        if (tf_selfcheck_describe(run, &bo, desc, sizeof desc, err, sizeof err) != 0) {
            tf_cli_error("validation failed: the %s backend does not start: %s", run->title, err);
            return TF_EXIT_USAGE;
        }
        printf("%s backend: %s\n", run->title, desc);
    }
    printf("Runs use: %s%s%s%s\n", tf_backend_kind_name(c.backend), note[0] ? " (" : "", note,
           note[0] ? ")" : "");

    char params[32];
    tf_cli_thousands(params, sizeof params, tf_param_count_floats(&c));
    printf("Tiny problem: batch %d, seq-len %d, num-seqs %d, %d block, msa-dim %d, pair-dim %d "
           "(%s parameters), %s\n",
           c.batch, c.seq_len, c.n_seqs, c.n_blocks, c.msa_dim, c.pair_dim, params,
           tf_cli_impl_name(c.impl));
    fflush(stdout);

    tf_selfcheck_hooks h = {.ctx = &c, .created = created, .step = stepped, .level = leveled};
    tf_selfcheck r;
    tf_status s = tf_selfcheck_steps(&c, &h, &r, err, sizeof err);
    if (s != TF_OK && r.failed < 0) {
        tf_cli_error("validation failed: %s", err);
        return tf_cli_exit_for(s);
    }
    if (s != TF_OK) {
        tf_cli_error("validation failed: loss is not finite at step %d (loss %g, status %d)",
                     r.failed + 1, (double)r.st.loss, (int)r.step_status);
        return TF_EXIT_FAIL;
    }

    /* Same weights, same batch: every level must give the same step-0 loss. */
    printf("Levels at step 0:");
    s = tf_selfcheck_levels(&c, &h, &r, err, sizeof err);
    if (s != TF_OK) {
        printf("\n");
        if (r.level_stepped)
            tf_cli_error("validation failed: %s: %s", tf_cli_impl_name(r.level), err);
        else
            tf_cli_error("validation failed: %s", err);
        return tf_cli_exit_for(s) == TF_EXIT_USAGE ? TF_EXIT_USAGE : TF_EXIT_FAIL;
    }
    printf(" (largest relative difference %.1e)\n", r.worst);
    if (!(r.worst <= TF_SELFCHECK_LEVEL_RTOL)) {
        tf_cli_error("validation failed: the levels disagree on the step-0 loss by %.1e "
                     "relative (more than %.0e)",
                     r.worst, TF_SELFCHECK_LEVEL_RTOL);
        return TF_EXIT_FAIL;
    }
    printf("validation successful\n");
    return TF_EXIT_OK;
}
