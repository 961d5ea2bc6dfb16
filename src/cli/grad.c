/* `tinyfold grad --load W --data B --out G`: loss, predictions and gradients
 * of one batch with given weights, no update: what the PyTorch reference is
 * compared with. */
#include "cli.h"
#include "config/limits.h"
#include "io/checkpoint.h"
#include "io/datafile.h"
#include "train/trainer_io.h"
#include "train/hostmem.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

int tf_cli_grad(tf_cli_opts *o)
{
    char err[2 * 4096 + 512], note[384];
    tf_cli_signals_track(o->out_path);
    tf_cli_signals_install();
    tf_config c;
    long gs = 0;
    tf_status s = tf_checkpoint_peek_config(o->load_path, &c, &gs, err, sizeof err);
    if (s != TF_OK) {
        tf_cli_error("--load: %s", err);
        return TF_EXIT_USAGE;
    }
    /* The model is the checkpoint's; how to compute it is the command line's. */
    c.impl = o->cfg.impl;
    c.fusion = o->cfg.fusion;
    c.backend = o->cfg.backend;
    c.device = o->cfg.device;
    c.threads = o->cfg.threads;
    c.precision = o->cfg.precision;
    memcpy(c.gpu_plan, o->cfg.gpu_plan, sizeof c.gpu_plan);
    c.graph = 0;

    tf_datafile *d = NULL;
    s = tf_datafile_open(o->data_path, &d, err, sizeof err);
    if (s != TF_OK) {
        tf_cli_error("--data: %s", err);
        return TF_EXIT_USAGE;
    }
    int count = tf_datafile_count(d);
    c.seq_len = tf_datafile_N(d);
    c.n_seqs = tf_datafile_S(d);
    c.batch = (o->set & TF_SET_BATCH) ? o->cfg.batch : count;
    c.warmup_steps = 0;
    if (c.num_steps < 1)
        c.num_steps = 1;

    tf_trainer *t = NULL;
    tf_batch b = {0};
    float *pred = NULL;
    int rc = TF_EXIT_OK;
    if (!(o->set & TF_SET_BATCH) && count > TF_LIM_BATCH_MAX) {
        char q[64];
        tf_cli_quote(q, sizeof q, o->data_path);
        tf_cli_error("--data: '%s' holds %d samples, more than one batch (%d): pass --batch-size",
                     q, count, TF_LIM_BATCH_MAX);
        rc = TF_EXIT_USAGE;
        goto done;
    }
    if (tf_config_validate(&c, err, sizeof err) != TF_OK) {
        tf_cli_error("%s", err);
        rc = TF_EXIT_USAGE;
        goto done;
    }
    if ((rc = tf_cli_resolve_backend(&c, note, sizeof note)) != TF_EXIT_OK)
        goto done;
    s = tf_trainer_create(&t, &c, err, sizeof err);
    if (s != TF_OK) {
        t = NULL;
        tf_cli_error("%s", err);
        rc = tf_cli_exit_for(s);
        goto done;
    }
    s = tf_checkpoint_load(t, o->load_path, 0, &gs, err, sizeof err);
    if (s != TF_OK) {
        tf_cli_error("--load: %s", err);
        rc = s == TF_ERR_INTERNAL ? TF_EXIT_FAIL : TF_EXIT_USAGE;
        goto done;
    }
    long npred = (long)c.batch * c.seq_len * c.seq_len;
    pred = malloc((size_t)npred * sizeof *pred);
    if (!pred || !tf_hostmem_batch_alloc(&b, &c)) {
        tf_cli_error("out of host memory for the batch");
        rc = TF_EXIT_USAGE;
        goto done;
    }
    tf_datafile_batch(d, 0, &b);
    float loss = 0;
    s = tf_trainer_grad(t, &b, &loss, pred);
    tf_cli_signals_steps_over();
    if (s != TF_OK) {
        if (s == TF_ERR_NONFINITE)
            tf_cli_error("loss is not finite (loss %g)", (double)loss);
        else
            tf_cli_error("grad: forward/backward failed (status %d)", (int)s);
        rc = TF_EXIT_FAIL;
        goto done;
    }
    if (tf_cli_stop_signal()) {
        /* one step, nothing to keep: --out is left as it was */
        tf_cli_error("%s by %s before --out was written",
                     tf_cli_stop_signal() == SIGINT ? "interrupted" : "terminated",
                     tf_cli_signal_name(tf_cli_stop_signal()));
        rc = 128 + tf_cli_stop_signal();
        goto done;
    }
    s = tf_gradfile_save(o->out_path, t, loss, pred, npred, err, sizeof err);
    if (s != TF_OK) {
        tf_cli_error("--out: %s", err);
        rc = TF_EXIT_FAIL;
        goto done;
    }
    if (!o->quiet)
        printf("grad: %s, batch %d (N %d, S %d), %s on %s: loss %.9g -> %s\n", o->load_path,
               c.batch, c.seq_len, c.n_seqs, tf_cli_impl_name(c.impl), tf_trainer_backend_name(t),
               (double)loss, o->out_path);
done:
    free(pred);
    tf_hostmem_batch_free(&b);
    if (t)
        tf_trainer_destroy(t);
    tf_datafile_close(d);
    return rc;
}
