/* Why a step's loss was not finite, from what can be checked after it: the
 * batch the step read, the weights (when the step stopped after its
 * forward: step.c), and for the half types the same forward in fp32. */
#include "train/nonfinite.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/trainer.h"

static void check_batch(const tf_batch *b, tf_nonfinite_why *w) {
    const size_t nn = (size_t)b->N * b->N, per_pair = nn * 65;
    for (int j = 0; j < b->B; j++) {
        const float *p = b->pair + (size_t)j * per_pair, *g = b->target + (size_t)j * nn;
        for (size_t i = 0; i < per_pair; i++) {
            if (!isfinite(p[i])) {
                if (!w->input_bad++) w->input_what = "pair features", w->input_sample = j;
            } else if (fabs(p[i]) > w->pair_max) {
                w->pair_max = fabs(p[i]);
            }
        }
        for (size_t i = 0; i < nn; i++)
            if (!isfinite(g[i]) && !w->input_bad++)
                w->input_what = "target distances", w->input_sample = j;
    }
}

static void check_weights(tf_trainer *t, const tf_config *c, tf_nonfinite_why *w, float *p) {
    size_t nt = tf_param_count_tensors(c);
    tf_param_info *tab = malloc(nt * sizeof *tab);
    if (!tab) return;
    tf_param_table(c, tab);
    tf_trainer_get_params(t, p);
    w->weights = tf_param_count_floats(c);
    for (size_t k = 0; k < nt; k++)
        for (size_t i = 0; i < tab[k].count; i++)
            if (!isfinite(p[tab[k].offset + i]) && !w->weights_bad++)
                snprintf(w->weights_tensor, sizeof w->weights_tensor, "%s", tab[k].name);
    free(tab);
}

/* The forward (and backward) again in fp32 with the same weights and batch. */
static void check_fp32(const tf_config *c, const float *p, const tf_batch *b, tf_nonfinite_why *w) {
    tf_config c32 = *c;
    c32.precision = TF_PREC_FP32;
    c32.graph = 0;
    tf_trainer *t32 = NULL;
    char err[256];
    if (tf_trainer_create(&t32, &c32, err, sizeof err) != TF_OK) return;
    tf_trainer_set_params(t32, p);
    float loss = NAN;
    tf_trainer_grad(t32, b, &loss, NULL);
    tf_trainer_destroy(t32);
    w->fp32_checked = 1;
    w->fp32_loss = loss;
}

void tf_nonfinite_explain(tf_trainer *t, tf_nonfinite_why *w) {
    memset(w, 0, sizeof *w);
    const tf_config *c = tf_trainer_config(t);
    tf_batch b = {.B = c->batch, .S = c->n_seqs, .N = c->seq_len};
    const size_t nn = (size_t)b.N * b.N;
    b.tokens = malloc((size_t)b.B * b.S * b.N * sizeof *b.tokens);
    b.pair = malloc((size_t)b.B * nn * 65 * sizeof *b.pair);
    b.target = malloc((size_t)b.B * nn * sizeof *b.target);
    float *p = malloc(tf_param_count_floats(c) * sizeof *p);
    w->held = tf_trainer_nonfinite_held(t);
    /* held is never set under data parallelism, where the batch is this
     * rank's share of c->batch */
    if (w->held && b.tokens && b.pair && b.target) {
        tf_trainer_get_batch(t, &b);
        check_batch(&b, w);
    }
    if (w->held && p) {
        check_weights(t, c, w, p);
        if (!w->input_bad && !w->weights_bad && b.pair &&
            (c->precision == TF_PREC_FP16 || c->precision == TF_PREC_BF16))
            check_fp32(c, p, &b, w);
    }
    free(p);
    free(b.tokens);
    free(b.pair);
    free(b.target);
}

void tf_nonfinite_describe(const tf_nonfinite_why *w, tf_precision prec, int first_update,
                           const char *weights_src, long step, char *buf, size_t n) {
    const char *pn = tf_precision_name(prec);
    if (!w->held) {
        snprintf(buf, n, "the step ran to its end (its update included), so its weights and "
                         "batch could not be checked");
    } else if (w->input_bad) {
        snprintf(buf, n, "the input sample itself is not finite: %ld value%s of the batch "
                         "(first in sample %d's %s)",
                 w->input_bad, w->input_bad == 1 ? "" : "s", w->input_sample, w->input_what);
    } else if (w->weights_bad && first_update) {
        snprintf(buf, n, "the batch is finite but %zu of the %zu weights are not (first in %s), "
                         "as the %s were given",
                 w->weights_bad, w->weights, w->weights_tensor, weights_src);
    } else if (w->weights_bad) {
        snprintf(buf, n, "the batch is finite but %zu of the %zu weights are not (first in %s) "
                         "after the update of global step %ld: a lower --learning-rate makes "
                         "smaller updates",
                 w->weights_bad, w->weights, w->weights_tensor, step - 1);
    } else if (w->fp32_checked && isfinite(w->fp32_loss)) {
        snprintf(buf, n, "the weights and the batch are finite and the same forward in fp32 "
                         "gives loss %g: the forward leaves %s's range%s",
                 (double)w->fp32_loss, pn,
                 prec == TF_PREC_FP16
                     ? " (largest value 65504; the batch's pair features reach "
                     : "");
        if (prec == TF_PREC_FP16) {
            size_t l = strlen(buf);
            snprintf(buf + l, n > l ? n - l : 0,
                     "%g); bf16 has fp32's range (--precision bf16), and the loss scale does "
                     "not enter the forward",
                     w->pair_max);
        }
    } else if (prec == TF_PREC_FP32 || prec == TF_PREC_TF32 || w->fp32_checked) {
        snprintf(buf, n, "the weights and the batch are finite, and the forward overflows %s: "
                         "the batch's pair features reach %g",
                 w->fp32_checked ? "in fp32 too" : "fp32's range", w->pair_max);
    } else {
        snprintf(buf, n, "the weights and the batch are finite (pair features up to %g); the "
                         "forward could not be run again in fp32 to compare",
                 w->pair_max);
    }
}
