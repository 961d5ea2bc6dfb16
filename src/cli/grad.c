/* `tinyfold grad --load W --data B --out G`: loss, predictions and gradients
 * of one batch with given weights, no update: what the PyTorch reference is
 * compared with. The work is src/train/grad.h's. */
#include "cli.h"
#include "train/grad.h"

#include <signal.h>

int tf_cli_grad(tf_cli_opts *o)
{
    char err[2 * 4096 + 512], note[384];
    tf_cli_signals_track(o->out_path);
    tf_cli_signals_install();
    tf_grad_opts go = {.cfg = o->cfg,
                       .batch_given = (o->set & TF_SET_BATCH) != 0,
                       .load_path = o->load_path,
                       .data_path = o->data_path,
                       .out_path = o->out_path};
    tf_grad g;
    int rc = TF_EXIT_OK;
    tf_status s = tf_grad_configure(&g, &go, err, sizeof err);
    if (s != TF_OK) {
        tf_cli_error("%s", err);
        rc = TF_EXIT_USAGE;
        goto done;
    }
    if ((rc = tf_cli_resolve_backend(&g.c, note, sizeof note)) != TF_EXIT_OK)
        goto done;
    s = tf_grad_prepare(&g, err, sizeof err);
    if (s != TF_OK) {
        tf_cli_error("%s", err);
        rc = tf_cli_exit_for(s);
        goto done;
    }
    s = tf_grad_compute(&g, err, sizeof err);
    tf_cli_signals_steps_over();
    if (s != TF_OK) {
        tf_cli_error("%s", err);
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
    if (tf_grad_save(&g, err, sizeof err) != TF_OK) {
        tf_cli_error("%s", err);
        rc = TF_EXIT_FAIL;
        goto done;
    }
    if (!o->quiet)
        printf("grad: %s, batch %d (N %d, S %d), %s on %s: loss %.9g -> %s\n", o->load_path,
               g.c.batch, g.c.seq_len, g.c.n_seqs, tf_cli_impl_name(g.c.impl),
               tf_trainer_backend_name(g.t), (double)g.loss, o->out_path);
done:
    tf_grad_close(&g);
    return rc;
}
