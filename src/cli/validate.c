/* `tinyfold validate` (also `--validate-setup`): what would run, and a tiny
 * 3-step run that must give finite losses on which the three levels agree. */
#include "cli.h"
#include "backend/registry.h"

#include <math.h>
#include <string.h>

/* The levels compute the same math in different orders: at step 0 (the
 * initial weights) their losses differ by fp32 rounding, ~1e-6 relative at
 * this size. 1e-4 leaves room for that and still catches any real mistake,
 * which moves the loss by O(1). */
#define LEVEL_RTOL 1e-4

static void tiny_problem(tf_config *c)
{
    c->batch = 1;
    c->seq_len = 8;
    c->n_seqs = 4;
    c->n_blocks = 1;
    c->msa_dim = 16;
    c->pair_dim = 32;
    c->warmup_steps = 0;
    c->num_steps = 3;
}

/* Loss of step 0 at a level; returns a status, message in err. */
static tf_status level_loss(const tf_config *base, tf_impl impl, float *loss, char *err,
                            size_t errlen)
{
    tf_config c = *base;
    c.impl = impl;
    c.fusion = tf_fusion_for_impl(impl);
    tf_trainer *t = NULL;
    tf_status s = tf_trainer_create(&t, &c, err, errlen);
    if (s != TF_OK)
        return s;
    tf_step_stats st = {0};
    s = tf_trainer_step(t, 0, &st);
    *loss = st.loss;
    tf_trainer_destroy(t);
    if (s != TF_OK)
        snprintf(err, errlen, "%s: step 0 failed (status %d, loss %g)", tf_cli_impl_name(impl),
                 (int)s, (double)st.loss);
    return s;
}

/* One line from a backend of the row: created, described, destroyed. */
static int describe(const tf_backend_entry *e, const tf_backend_opts *bo, char *desc, size_t n,
                    char *err, size_t errlen)
{
    tf_backend *be = NULL;
    const tf_ops *ops = NULL;
    if (e->create(&be, &ops, bo, err, errlen) != 0)
        return 1;
    e->describe(be, desc, n);
    e->destroy(be);
    return 0;
}

int tf_cli_validate(tf_cli_opts *o)
{
    tf_config c = o->cfg;
    char note[384], err[512], why[1024] = "";
    tiny_problem(&c);
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
    if (describe(cpu, &bo, desc, sizeof desc, err, sizeof err) != 0) {
        tf_cli_error("validation failed: the %s backend does not start: %s", cpu->title, err);
        return TF_EXIT_FAIL;
    }
    printf("%s backend: %s\n", cpu->title, desc);
    printf("OpenMP wait: %s\n", tf_cli_omp_wait_info());
    if (run && run != cpu) {
        if (describe(run, &bo, desc, sizeof desc, err, sizeof err) != 0) {
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

    tf_trainer *t = NULL;
    tf_status s = tf_trainer_create(&t, &c, err, sizeof err);
    if (s != TF_OK) {
        tf_cli_error("validation failed: %s", err);
        return tf_cli_exit_for(s);
    }
    printf("Trainer: %s\n", tf_trainer_backend_name(t));
    float loss0 = NAN;
    for (int i = 0; i < c.num_steps; i++) {
        tf_step_stats st = {0};
        s = tf_trainer_step(t, i, &st);
        if (s != TF_OK || !isfinite(st.loss)) {
            tf_trainer_destroy(t);
            tf_cli_error("validation failed: loss is not finite at step %d (loss %g, status %d)",
                         i + 1, (double)st.loss, (int)s);
            return TF_EXIT_FAIL;
        }
        if (i == 0)
            loss0 = st.loss;
        printf("  step %d/%d: loss %.6f (%.1f ms)\n", i + 1, c.num_steps, (double)st.loss,
               st.step_ms);
        fflush(stdout);
    }
    tf_trainer_destroy(t);

    /* Same weights, same batch: every level must give the same step-0 loss. */
    double worst = 0;
    printf("Levels at step 0:");
    for (int lv = TF_IMPL_V1; lv <= TF_IMPL_V3; lv++) {
        float l = NAN;
        s = level_loss(&c, (tf_impl)lv, &l, err, sizeof err);
        if (s != TF_OK) {
            printf("\n");
            tf_cli_error("validation failed: %s", err);
            return tf_cli_exit_for(s) == TF_EXIT_USAGE ? TF_EXIT_USAGE : TF_EXIT_FAIL;
        }
        double rel = fabs((double)l - loss0) / fmax(fabs((double)loss0), 1e-30);
        worst = fmax(worst, rel);
        printf(" %s %.6f", tf_cli_impl_name((tf_impl)lv), (double)l);
    }
    printf(" (largest relative difference %.1e)\n", worst);
    if (!(worst <= LEVEL_RTOL)) {
        tf_cli_error("validation failed: the levels disagree on the step-0 loss by %.1e "
                     "relative (more than %.0e)",
                     worst, LEVEL_RTOL);
        return TF_EXIT_FAIL;
    }
    printf("validation successful\n");
    return TF_EXIT_OK;
}
