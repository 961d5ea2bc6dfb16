/* Tensor names of a foreign (PyTorch) state_dict: the wrapper prefix it may
 * carry (nn.DataParallel's "module.", torch.compile's "_orig_mod."), the
 * fused projections of the upstream TinyOpenFold v2 script (qkv_proj = q|k|v,
 * left_right_proj = left|right, left_right_gate = left|right gates, stacked
 * along the output rows), and which names a TinyOpenFold state_dict may hold
 * at all (see checkpoint_internal.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/checkpoint_internal.h"

static const char *const prefixes[] = {"", "module.", "_orig_mod.", "module._orig_mod.",
                                       "_orig_mod.module."};

const char *tf_ckpt_prefix(const tf_st_file *f) {
    char nm[64];
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
        snprintf(nm, sizeof nm, "%smsa_embedding.weight", prefixes[i]);
        if (tf_st_find(f, nm)) return prefixes[i];
    }
    return "";
}

/* Our suffix, the fused tensor's suffix, the part and the number of parts. */
static const struct {
    const char *ours, *fused;
    int part, parts;
} fused[] = {
    {".q_proj.weight", ".qkv_proj.weight", 0, 3},
    {".k_proj.weight", ".qkv_proj.weight", 1, 3},
    {".v_proj.weight", ".qkv_proj.weight", 2, 3},
    {".left_proj.weight", ".left_right_proj.weight", 0, 2},
    {".right_proj.weight", ".left_right_proj.weight", 1, 2},
    {".left_gate.weight", ".left_right_gate.weight", 0, 2},
    {".right_gate.weight", ".left_right_gate.weight", 1, 2},
};

static int ends_with(const char *s, const char *suffix, size_t *stem) {
    size_t n = strlen(s), k = strlen(suffix);
    if (n < k || strcmp(s + n - k, suffix) != 0) return 0;
    if (stem) *stem = n - k;
    return 1;
}

const tf_st_tensor *tf_ckpt_find_param(const tf_st_file *f, const char *prefix, const char *name,
                                       int *part, int *parts) {
    char nm[NAME_MAX_LEN + 32];
    *part = 0;
    *parts = 1;
    snprintf(nm, sizeof nm, "%s%s", prefix, name);
    const tf_st_tensor *t = tf_st_find(f, nm);
    for (size_t i = 0; i < sizeof fused / sizeof fused[0]; i++) {
        size_t stem;
        if (!ends_with(name, fused[i].ours, &stem)) continue;
        snprintf(nm, sizeof nm, "%s%.*s%s", prefix, (int)stem, name, fused[i].fused);
        const tf_st_tensor *u = tf_st_find(f, nm);
        if (t && u) { /* two tensors hold the parameter */
            *parts = 0;
            return u;
        }
        if (u) {
            *part = fused[i].part;
            *parts = fused[i].parts;
            return u;
        }
        break;
    }
    return t;
}

/* The suffixes after "evoformer_blocks.<b>." of a block's parameters. */
static int block_suffix_known(const char *s) {
    static char (*names)[96];
    static size_t n;
    if (!names) {
        tf_config c;
        tf_config_default(&c);
        c.n_blocks = 1;
        size_t nt = tf_param_count_tensors(&c);
        tf_param_info *tab = malloc(nt * sizeof *tab);
        names = malloc(nt * sizeof *names);
        if (!tab || !names) {
            free(tab);
            free(names);
            names = NULL;
            return 0;
        }
        tf_param_table(&c, tab);
        const char *blk = "evoformer_blocks.0.";
        for (size_t i = 0; i < nt; i++)
            if (strncmp(tab[i].name, blk, strlen(blk)) == 0)
                snprintf(names[n++], sizeof names[0], "%s", tab[i].name + strlen(blk));
        free(tab);
    }
    for (size_t i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0) return 1;
    for (size_t i = 0; i < sizeof fused / sizeof fused[0]; i++) {
        size_t stem;
        if (ends_with(s, fused[i].fused, &stem) && stem > 0) {
            char ours[128];
            snprintf(ours, sizeof ours, "%.*s%s", (int)stem, s, fused[i].ours);
            for (size_t k = 0; k < n; k++)
                if (strcmp(ours, names[k]) == 0) return 1;
        }
    }
    return 0;
}

static int known_name(const char *key) {
    static const char *const top[] = {"msa_embedding.weight", "pair_embedding.weight",
                                      "structure_module.distance_pred.weight"};
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
        if (strcmp(key, top[i]) == 0) return 1;
    const char *blk = "evoformer_blocks.";
    if (strncmp(key, blk, strlen(blk)) != 0) return 0;
    const char *p = key + strlen(blk);
    if (*p < '0' || *p > '9') return 0;
    while (*p >= '0' && *p <= '9')
        p++;
    return *p == '.' && block_suffix_known(p + 1);
}

const char *tf_ckpt_first_unknown(const tf_st_file *f, const char *prefix) {
    size_t k = strlen(prefix);
    for (size_t i = 0; i < tf_st_count(f); i++) {
        const char *nm = tf_st_at(f, i)->name;
        if (strncmp(nm, prefix, k) != 0 || !known_name(nm + k)) return nm;
    }
    return NULL;
}
