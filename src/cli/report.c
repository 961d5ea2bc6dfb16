/* What a training run prints, in the reference's shape: a configuration
 * header, a step line every --log-every steps, a summary. Averages are over
 * timed steps only (warm-up and --counters replay steps excluded). */
#include "cli.h"
#include "backend/registry.h"
#include "train/loss_scale.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define MB(x) ((double)(x) / (1024.0 * 1024.0))

void tf_cli_summarize(tf_cli_summary *s, const tf_cli_steprec *r, int n, int batch,
                      double flops_step)
{
    memset(s, 0, sizeof *s);
    s->loss_scale = 1.0f;
    s->steps = n;
    for (int i = 0; i < n; i++) {
        s->skipped_steps += r[i].skipped != 0;
        s->loss_scaled |= r[i].loss_scaled;
        if (r[i].warmup || r[i].counter_replay)
            continue;
        s->n_timed++;
        s->samples_per_sec += r[i].samples_per_sec;
        s->step_ms += r[i].step_ms;
        s->data_ms += r[i].data_ms;
        s->forward_ms += r[i].forward_ms;
        s->backward_ms += r[i].backward_ms;
        s->optimizer_ms += r[i].optimizer_ms;
        s->comm_ms += r[i].comm_ms;
        s->exposed_comm_ms += r[i].exposed_comm_ms;
        s->mean_loss += r[i].loss;
        s->final_loss = r[i].loss;
    }
    if (s->n_timed) {
        double k = 1.0 / s->n_timed;
        s->samples_per_sec *= k;
        s->step_ms *= k;
        s->data_ms *= k;
        s->forward_ms *= k;
        s->backward_ms *= k;
        s->optimizer_ms *= k;
        s->comm_ms *= k;
        s->exposed_comm_ms *= k;
        s->mean_loss *= k;
    } else {
        /* no timed step (a run that failed or stopped in warm-up): no loss to
         * report, written as null rather than a made-up 0 */
        s->mean_loss = s->final_loss = NAN;
    }
    s->total_samples = (long)s->n_timed * batch;
    s->gflops = s->step_ms > 0 ? flops_step / (s->step_ms * 1e-3) * 1e-9 : 0.0;
}

/* 266.4 GFLOP, 1.2 TFLOP, 35.1 MFLOP */
static void flops_str(char *out, size_t n, double fl)
{
    static const char *const unit[] = {"FLOP", "kFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP"};
    int u = 0;
    while (fl >= 1000.0 && u < 5) {
        fl /= 1000.0;
        u++;
    }
    snprintf(out, n, "%.1f %s", fl, unit[u]);
}

static const char *onoff(int v) { return v ? "enabled" : "disabled"; }

void tf_cli_print_header(FILE *f, const tf_cli_opts *o, const tf_config *c,
                         const char *backend_line, const char *data_line, long start_step,
                         size_t backend_bytes, size_t arena_bytes, float loss_scale)
{
    char params[32];
    size_t nparam = tf_param_count_floats(c);
    tf_cli_thousands(params, sizeof params, nparam);
    double fwd = tf_flops_forward(c);
    const char *rule = "=============================================================="
                       "==================";
    fprintf(f, "%s\nTINYFOLD %s - TinyOpenFold training in C (%s: %s)\n%s\n", rule, TF_VERSION,
            tf_cli_impl_name(c->impl), tf_cli_impl_desc(c->impl), rule);
    fprintf(f, "\nModel configuration:\n");
    fprintf(f, "   MSA dimension: %d (%d heads)\n", c->msa_dim, c->n_heads_msa);
    fprintf(f, "   Pair dimension: %d (%d heads)\n", c->pair_dim, c->n_heads_pair);
    fprintf(f, "   Evoformer blocks: %d\n", c->n_blocks);
    fprintf(f, "   MSA sequences: %d\n", c->n_seqs);
    fprintf(f, "   Sequence length: %d\n", c->seq_len);
    fprintf(f, "   Total parameters: %s\n", params);
    fprintf(f, "   Model size: %.1f MB (FP32)\n", nparam * 4.0 / 1e6);

    fprintf(f, "\nImplementation: %s (%s)\n", tf_cli_impl_name(c->impl), tf_cli_impl_desc(c->impl));
    fprintf(f, "   MSA QKV fusion: %s\n", onoff(c->fusion.qkv_msa));
    fprintf(f, "   Triangle QKV fusion: %s\n", onoff(c->fusion.qkv_triangle));
    fprintf(f, "   Flash attention: %s\n", onoff(c->fusion.flash));
    fprintf(f, "   Triangle gate/proj fusion: %s\n", onoff(c->fusion.triangle));
    const tf_backend_entry *be = tf_backend_find(c->backend);
    if (be && be->gpu)
        fprintf(f, "   %s graph: %s\n", be->title, onoff(c->graph));

    fprintf(f, "\nTraining configuration:\n");
    if (start_step > 0)
        fprintf(f, "   Training steps: %d (resumed at global step %ld, no warm-up)\n", c->num_steps,
                start_step);
    else
        fprintf(f, "   Training steps: %d (+%d warm-up)\n", c->num_steps, c->warmup_steps);
    fprintf(f, "   Batch size: %d\n", c->batch);
    fprintf(f, "   Learning rate: %g\n", (double)c->learning_rate);
    fprintf(f, "   Seed: %llu\n", (unsigned long long)c->seed);
    fprintf(f, "   Data: %s\n", data_line);
    fprintf(f, "   Backend: %s\n", backend_line);
    fprintf(f, "   Precision: %s%s (%s)\n", tf_precision_name(c->precision),
            o->use_amp ? ", from --use-amp" : "", tf_cli_precision_desc(c->precision));
    if (c->precision == TF_PREC_FP16)
        fprintf(f, "   Loss scaled dynamically: from %g, halved and the step skipped on an "
                   "inf/NaN gradient, doubled after %d clean steps\n",
                (double)loss_scale,
                TF_LOSS_SCALE_INTERVAL);
    static const char *const recompute[] = {"none (every activation kept)",
                                            "blocks (each block's inputs kept)",
                                            "modules (each module's input kept)"};
    fprintf(f, "   Recompute: %s\n", recompute[c->recompute]);
    if (c->chunk_size)
        fprintf(f, "   Chunk size: %d pair rows at a time\n", c->chunk_size);
    else
        fprintf(f, "   Chunk size: off (the whole pair at a time)\n");
    char step_fl[32], fwd_fl[32];
    flops_str(step_fl, sizeof step_fl, 3.0 * fwd);
    flops_str(fwd_fl, sizeof fwd_fl, fwd);
    fprintf(f, "   Estimated FLOPs/step: %s (3 x %s forward)\n", step_fl, fwd_fl);
    fprintf(f, "   Memory planned: %.1f MB on the backend (activation arena %.1f MB)\n",
            MB(backend_bytes), MB(arena_bytes));
    if (o->save_path)
        fprintf(f, "   Checkpoint: %s%s\n", o->save_path, o->save_every ? " (periodic)" : "");
    fprintf(f, "%s\n", rule);
}

const char *tf_cli_precision_desc(tf_precision p)
{
    switch (p) {
    case TF_PREC_TF32: return "fp32 tensors, GEMMs on TF32 tensor cores";
    case TF_PREC_BF16:
    case TF_PREC_FP16:
        return p == TF_PREC_BF16 ? "bf16 activations; fp32 weights, gradients, optimizer, loss; "
                                   "fp32 arithmetic"
                                 : "fp16 activations; fp32 weights, gradients, optimizer, loss; "
                                   "fp32 arithmetic";
    default: return "fp32 everywhere";
    }
}

/* fp16: " | Scale: 65536", and what a skipped step did. */
static void print_scale(FILE *f, const tf_cli_steprec *r)
{
    if (!r->loss_scaled)
        return;
    fprintf(f, " | Scale: %g", (double)r->loss_scale);
    if (r->skipped)
        fputs(" | skipped (inf/NaN gradient: no update, scale halved)", f);
}

void tf_cli_print_warmup(FILE *f, int k, int n, const tf_cli_steprec *r)
{
    fprintf(f, "Warm-up %d/%d | Loss: %.4f | Step: %6.1f ms", k, n, (double)r->loss, r->step_ms);
    print_scale(f, r);
    fputc('\n', f);
}

void tf_cli_print_step(FILE *f, int k, int n, const tf_cli_steprec *r, size_t backend_bytes)
{
    const int prec = r->samples_per_sec > 0 && r->samples_per_sec < 0.1 ? 4 : 1;
    fprintf(f, "Step %3d/%d | Loss: %.4f | Speed: %5.*f samples/sec | Step: %6.1f ms | "
               "Memory: %6.1f MB",
            k, n, (double)r->loss, prec, r->samples_per_sec, r->step_ms, MB(backend_bytes));
    print_scale(f, r);
    fputc('\n', f);
    if (r->counter_replay)
        fprintf(f, "           (step %d replayed its matching kernels for --counters: not in the means)\n", k);
}

void tf_cli_progress(int warm, int k, int n, const tf_cli_steprec *prev, double eta_s)
{
    long eta = (long)(eta_s + 0.5);
    fprintf(stderr, "\r\033[K%s %d/%d", warm ? "warm-up" : "step", k, n);
    if (prev)
        fprintf(stderr, " | loss %.4f | %.1f samples/s", (double)prev->loss,
                prev->samples_per_sec);
    if (eta > 0)
        fprintf(stderr, " | ETA %ld:%02ld", eta / 60, eta % 60);
    fflush(stderr);
}

void tf_cli_progress_clear(void)
{
    fputs("\r\033[K", stderr);
    fflush(stderr);
}

void tf_cli_print_summary(FILE *f, const tf_cli_summary *s, int memprof, size_t param_floats)
{
    char total[32];
    tf_cli_thousands(total, sizeof total, (unsigned long long)s->total_samples);
    fprintf(f, "\nPerformance summary (%d timed step%s, warm-up excluded):\n", s->n_timed,
            s->n_timed == 1 ? "" : "s");
    fprintf(f, "   Total samples processed: %s\n", total);
    /* a step of minutes (long sequences on a CPU) still shows its rate */
    fprintf(f, "   Average training speed: %.*f samples/sec\n",
            s->samples_per_sec > 0 && s->samples_per_sec < 0.1 ? 4 : 1, s->samples_per_sec);
    fprintf(f, "   Average batch (data) time: %.1f ms\n", s->data_ms);
    fprintf(f, "   Average forward time: %.1f ms\n", s->forward_ms);
    fprintf(f, "   Average backward time: %.1f ms\n", s->backward_ms);
    fprintf(f, "   Average optimizer time: %.1f ms\n", s->optimizer_ms);
    if (s->comm)
        fprintf(f, "   Average communication time: %.1f ms, %.1f ms of it exposed (%d ranks, "
                   "gradient all-reduce)\n",
                s->comm_ms, s->exposed_comm_ms, s->ranks);
    fprintf(f, "   Average step time: %.1f ms\n", s->step_ms);
    fprintf(f, "   Mean loss: %.4f\n", s->mean_loss);
    fprintf(f, "   Final loss: %.4f\n", s->final_loss);
    if (s->loss_scaled)
        fprintf(f, "   Skipped steps: %ld of %d (inf/NaN gradients; warm-up included), loss "
                   "scale now %g\n",
                s->skipped_steps, s->steps, (double)s->loss_scale);
    fprintf(f, "   Peak memory usage: %.1f MB (backend)\n", MB(s->peak_bytes));
    fprintf(f, "   Host peak RSS: %.1f MB\n", MB(s->rss_bytes));
    fprintf(f, "   Achieved: %.1f GFLOP/s (3 x forward FLOPs / mean step time)\n", s->gflops);
    if (s->graph_kernels)
        fprintf(f, "   CUDA graph: %zu kernel nodes per step (forward, backward, optimizer)\n",
                s->graph_kernels);
    if (memprof) {
        size_t p = param_floats * sizeof(float);
        size_t other = s->peak_bytes > 4 * p + s->arena_bytes
                           ? s->peak_bytes - 4 * p - s->arena_bytes
                           : 0;
        fprintf(f, "\nMemory breakdown (backend):\n");
        fprintf(f, "   Parameters: %.1f MB\n", MB(p));
        fprintf(f, "   Gradients: %.1f MB\n", MB(p));
        fprintf(f, "   Adam moments: %.1f MB\n", MB(2 * p));
        fprintf(f, "   Activation arena: %.1f MB\n", MB(s->arena_bytes));
        fprintf(f, "   Batch buffers and library workspaces: %.1f MB\n", MB(other));
        fprintf(f, "   Total: %.1f MB\n", MB(s->peak_bytes));
    }
}
