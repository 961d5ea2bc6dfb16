/* Gradient files (see gradfile.h). */
#include "io/gradfile.h"

#include <stdio.h>
#include <stdlib.h>

#include "io/config_json.h"
#include "io/safetensors.h"

#define GRAD_PREFIX "grad."

tf_status tf_gradfile_write(const char *path, const tf_io_holder *h, float loss, const float *pred,
                            long npred, char *err, size_t errlen) {
    const tf_config *c = h->c;
    long want = (long)c->batch * c->seq_len * c->seq_len;
    if (!pred || npred != want) {
        if (errlen)
            snprintf(err, errlen, "%s: pred has %ld values, expected B*N*N = %ld", path,
                     pred ? npred : 0L, want);
        return TF_ERR_INTERNAL;
    }
    size_t nt = tf_param_count_tensors(c), nf = tf_param_count_floats(c);
    const size_t name_len = sizeof(((tf_param_info *)0)->name) + sizeof GRAD_PREFIX;
    tf_param_info *tab = malloc(nt * sizeof *tab);
    float *g = malloc(nf * sizeof *g);
    tf_st_out *out = calloc(nt + 2, sizeof *out);
    char *names = malloc(nt * name_len);
    char *cfg = tf_io_config_to_json_string(c);
    tf_status st;
    if (!tab || !g || !out || !names || !cfg) {
        if (errlen) snprintf(err, errlen, "%s: out of memory", path);
        st = TF_ERR_NOMEM;
        goto done;
    }
    tf_param_table(c, tab);
    h->get_grads(h->ctx, g);
    size_t n = 0;
    out[n++] =
        (tf_st_out){.name = "loss", .dtype = TF_ST_F32, .ndim = 1, .shape = {1}, .data = &loss};
    out[n++] = (tf_st_out){.name = "pred",
                           .dtype = TF_ST_F32,
                           .ndim = 4,
                           .shape = {c->batch, c->seq_len, c->seq_len, 1},
                           .data = pred};
    for (size_t i = 0; i < nt; i++) {
        if (!tab[i].trainable) continue; /* pair_norm_outer: no gradient exists */
        char *nm = names + i * name_len;
        snprintf(nm, name_len, GRAD_PREFIX "%s", tab[i].name);
        tf_st_out *o = &out[n++];
        o->name = nm;
        o->dtype = TF_ST_F32;
        o->ndim = tab[i].ndim;
        for (int d = 0; d < tab[i].ndim; d++)
            o->shape[d] = tab[i].shape[d];
        o->data = g + tab[i].offset;
    }
    const char *meta[] = {"format",           "tinyfold-grads", "version",         "1",
                          "tinyfold_version", TF_VERSION,       "tinyfold_config", cfg};
    st = tf_st_write(path, out, n, meta, sizeof meta / sizeof meta[0] / 2, err, errlen);
done:
    free(cfg);
    free(names);
    free(out);
    free(g);
    free(tab);
    return st;
}
