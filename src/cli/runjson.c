/* The run JSON (`tinyfold train --json FILE`; embedded by the profiler in
 * summary.json under "run"; read by `tinyfold compare`). Schema: docs/cli.md. */
#include "cli.h"
#include "backend/registry.h"

#include <cJSON.h>
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The shortest decimal that reads back as the same float: 3e-4f is written
 * 0.0003, not 0.000300000014, and a loss reads back bit for bit. */
static double float_json(float x)
{
    if (!isfinite(x))
        return (double)x; /* cJSON writes null */
    char buf[32];
    for (int digits = 6; digits <= 9; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, (double)x);
        if ((float)strtod(buf, NULL) == x)
            break;
    }
    return strtod(buf, NULL);
}

/* Timings to 0.1 us: enough, and short. */
static double ms_json(double ms) { return round(ms * 1e4) / 1e4; }

/* "OpenBLAS 0.3.21, OpenMP, SkylakeX kernels" from OpenBLAS's build string
 * ("OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ... USE_OPENMP SkylakeX ..."). */
const char *tf_cli_blas_info(void)
{
    static char info[192];
    if (!info[0]) {
        const char *cfg = openblas_get_config();
        int name_len = (int)strcspn(cfg, " ");
        int ver_len = cfg[name_len] ? (int)strcspn(cfg + name_len + 1, " ") : 0;
        snprintf(info, sizeof info, "%.*s%s%.*s, %s, %s kernels%s", name_len, cfg,
                 ver_len ? " " : "", ver_len, cfg + name_len + (ver_len ? 1 : 0),
                 strstr(cfg, "USE_OPENMP") ? "OpenMP" : "pthreads", openblas_get_corename(),
                 tf_cpu_blas_kernels_note());
    }
    return info;
}

cJSON *tf_cli_build_json(void)
{
    cJSON *b = cJSON_CreateObject();
    cJSON *be = cJSON_AddArrayToObject(b, "backends");
    for (size_t i = 0; tf_backend_at(i); i++)
        if (tf_backend_at(i)->built())
            cJSON_AddItemToArray(be, cJSON_CreateString(tf_backend_at(i)->name));
#if defined(__clang__)
    cJSON_AddStringToObject(b, "compiler", "clang " __clang_version__);
#elif defined(__GNUC__)
    cJSON_AddStringToObject(b, "compiler", "gcc " __VERSION__);
#else
    cJSON_AddStringToObject(b, "compiler", "unknown");
#endif
    cJSON_AddStringToObject(b, "blas", openblas_get_config());
    return b;
}

static cJSON *config_json(const tf_config *c)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "batch", c->batch);
    cJSON_AddNumberToObject(j, "seq_len", c->seq_len);
    cJSON_AddNumberToObject(j, "n_seqs", c->n_seqs);
    cJSON_AddNumberToObject(j, "n_blocks", c->n_blocks);
    cJSON_AddNumberToObject(j, "msa_dim", c->msa_dim);
    cJSON_AddNumberToObject(j, "pair_dim", c->pair_dim);
    cJSON_AddNumberToObject(j, "n_heads_msa", c->n_heads_msa);
    cJSON_AddNumberToObject(j, "n_heads_pair", c->n_heads_pair);
    cJSON_AddNumberToObject(j, "outer_dim", c->outer_dim);
    cJSON_AddNumberToObject(j, "num_steps", c->num_steps);
    cJSON_AddNumberToObject(j, "warmup_steps", c->warmup_steps);
    cJSON_AddNumberToObject(j, "learning_rate", float_json(c->learning_rate));
    /* A JSON number is a double: seeds above 2^53 are written as strings. */
    if (c->seed <= (1ull << 53))
        cJSON_AddNumberToObject(j, "seed", (double)c->seed);
    else {
        char s[24];
        snprintf(s, sizeof s, "%llu", (unsigned long long)c->seed);
        cJSON_AddStringToObject(j, "seed", s);
    }
    cJSON_AddStringToObject(j, "impl", tf_cli_impl_name(c->impl));
    cJSON_AddStringToObject(j, "backend", tf_backend_kind_name(c->backend));
    cJSON_AddNumberToObject(j, "device", c->device);
    cJSON_AddNumberToObject(j, "threads", c->threads);
    /* the setting, not what auto found at start (which changes with the machine's load) */
    cJSON_AddStringToObject(j, "omp_wait", tf_cli_omp_wait_setting());
    cJSON_AddStringToObject(j, "precision", tf_precision_name(c->precision));
    cJSON_AddBoolToObject(j, "graph", c->graph);
    cJSON_AddStringToObject(j, "gpu_plan", c->gpu_plan[0] ? c->gpu_plan : "default");
    static const char *const recompute[] = {"none", "blocks", "modules"};
    cJSON_AddStringToObject(j, "recompute", recompute[c->recompute]);
    cJSON_AddNumberToObject(j, "chunk_size", c->chunk_size); /* 0: off */
    cJSON *f = cJSON_AddObjectToObject(j, "fusion");
    cJSON_AddBoolToObject(f, "qkv_msa", c->fusion.qkv_msa);
    cJSON_AddBoolToObject(f, "qkv_triangle", c->fusion.qkv_triangle);
    cJSON_AddBoolToObject(f, "flash", c->fusion.flash);
    cJSON_AddBoolToObject(f, "triangle", c->fusion.triangle);
    return j;
}

cJSON *tf_cli_run_json(const char *command, const tf_config *c, size_t params,
                       const tf_cli_summary *s, const tf_cli_steprec *r, int n)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "schema_version", TF_RUN_JSON_SCHEMA);
    cJSON_AddStringToObject(j, "tinyfold_version", TF_VERSION);
    cJSON_AddStringToObject(j, "command", command);
    cJSON_AddItemToObject(j, "build", tf_cli_build_json());
    cJSON_AddItemToObject(j, "config", config_json(c));
    cJSON_AddNumberToObject(j, "parameters", (double)params);

    cJSON *sj = cJSON_AddObjectToObject(j, "summary");
    cJSON_AddNumberToObject(sj, "samples_per_sec", ms_json(s->samples_per_sec));
    cJSON_AddNumberToObject(sj, "step_ms", ms_json(s->step_ms));
    cJSON_AddNumberToObject(sj, "data_ms", ms_json(s->data_ms));
    cJSON_AddNumberToObject(sj, "forward_ms", ms_json(s->forward_ms));
    cJSON_AddNumberToObject(sj, "backward_ms", ms_json(s->backward_ms));
    cJSON_AddNumberToObject(sj, "optimizer_ms", ms_json(s->optimizer_ms));
    if (s->comm) {
        cJSON_AddNumberToObject(sj, "ranks", s->ranks);
        cJSON_AddNumberToObject(sj, "comm_ms", ms_json(s->comm_ms));
        cJSON_AddNumberToObject(sj, "exposed_comm_ms", ms_json(s->exposed_comm_ms));
    }
    cJSON_AddNumberToObject(sj, "mean_loss", float_json((float)s->mean_loss));
    cJSON_AddNumberToObject(sj, "final_loss", float_json((float)s->final_loss));
    /* fp16's loss scaler: steps it skipped (warm-up included), the scale it ended at */
    cJSON_AddNumberToObject(sj, "skipped_steps", (double)s->skipped_steps);
    cJSON_AddNumberToObject(sj, "loss_scale", float_json(s->loss_scale));
    cJSON_AddNumberToObject(sj, "peak_memory_bytes", (double)s->peak_bytes);
    cJSON_AddNumberToObject(sj, "arena_bytes", (double)s->arena_bytes);
    cJSON_AddNumberToObject(sj, "host_peak_rss_bytes", (double)s->rss_bytes);
    if (s->graph_kernels)
        cJSON_AddNumberToObject(sj, "graph_kernel_nodes", (double)s->graph_kernels);
    cJSON_AddNumberToObject(sj, "gflops", ms_json(s->gflops));

    cJSON *steps = cJSON_AddArrayToObject(j, "steps");
    for (int i = 0; i < n; i++) {
        cJSON *e = cJSON_CreateObject();
        /* the integer's digits: a double formatted by cJSON can lose the
         * last ones (2^53 came out as 9.00719925474099e+15) */
        char num[24];
        snprintf(num, sizeof num, "%ld", r[i].step);
        cJSON_AddRawToObject(e, "step", num);
        cJSON_AddBoolToObject(e, "warmup", r[i].warmup);
        if (r[i].counter_replay)
            cJSON_AddBoolToObject(e, "counter_replay", 1);
        cJSON_AddNumberToObject(e, "loss", float_json(r[i].loss));
        cJSON_AddBoolToObject(e, "skipped", r[i].skipped);
        cJSON_AddNumberToObject(e, "loss_scale", float_json(r[i].loss_scale));
        cJSON_AddNumberToObject(e, "step_ms", ms_json(r[i].step_ms));
        cJSON_AddNumberToObject(e, "data_ms", ms_json(r[i].data_ms));
        cJSON_AddNumberToObject(e, "forward_ms", ms_json(r[i].forward_ms));
        cJSON_AddNumberToObject(e, "backward_ms", ms_json(r[i].backward_ms));
        cJSON_AddNumberToObject(e, "optimizer_ms", ms_json(r[i].optimizer_ms));
        if (s->comm) {
            cJSON_AddNumberToObject(e, "comm_ms", ms_json(r[i].comm_ms));
            cJSON_AddNumberToObject(e, "exposed_comm_ms", ms_json(r[i].exposed_comm_ms));
        }
        cJSON_AddNumberToObject(e, "samples_per_sec", ms_json(r[i].samples_per_sec));
        cJSON_AddItemToArray(steps, e);
    }
    return j;
}
