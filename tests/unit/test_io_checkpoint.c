/* Checkpoints and gradient files through a real trainer (tiny config, CPU):
 * file contents, save/load round trip, resume == straight run bit for bit,
 * config checks, missing / mis-shaped / bad tensors, PyTorch-style files,
 * and failed saves that keep the previous checkpoint. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "io/checkpoint.h"
#include "io/config_json.h"
#include "io/gradfile.h"
#include "train/trainer_io.h"
#include "io/safetensors.h"
#include "test_io_util.h"

static tf_config tiny(uint64_t seed) {
    tf_config c;
    tf_config_default(&c);
    c.msa_dim = 8;
    c.pair_dim = 8;
    c.n_blocks = 1;
    c.n_heads_msa = 2;
    c.n_heads_pair = 2;
    c.outer_dim = 4;
    c.batch = 2;
    c.seq_len = 6;
    c.n_seqs = 3;
    c.num_steps = 4;
    c.warmup_steps = 1;
    c.learning_rate = 1e-3f;
    c.seed = seed;
    c.backend = TF_BACKEND_CPU;
    c.threads = 1;
    c.impl = TF_IMPL_V2;
    c.fusion = tf_fusion_for_impl(c.impl);
    return c;
}

static tf_trainer *make(const tf_config *c) {
    tf_trainer *t = NULL;
    char err[512] = "";
    tf_status st = tf_trainer_create(&t, c, err, sizeof err);
    if (st != TF_OK) print_error("tf_trainer_create: %s\n", err);
    assert_int_equal(st, TF_OK);
    return t;
}

static void steps(tf_trainer *t, long from, long to) {
    for (long s = from; s < to; s++) {
        tf_step_stats st;
        assert_int_equal(tf_trainer_step(t, s, &st), TF_OK);
    }
}

typedef struct {
    size_t nf;
    float *p, *m, *v;
    long step;
} snap;

static snap take_snap(tf_trainer *t) {
    snap s;
    s.nf = tf_param_count_floats(tf_trainer_config(t));
    s.p = malloc(3 * s.nf * sizeof(float));
    s.m = s.p + s.nf;
    s.v = s.p + 2 * s.nf;
    tf_trainer_get_params(t, s.p);
    tf_trainer_get_adam(t, s.m, s.v, &s.step);
    return s;
}

static void assert_snap_equal(const snap *a, const snap *b, int with_adam) {
    assert_int_equal(a->nf, b->nf);
    assert_memory_equal(a->p, b->p, a->nf * sizeof(float)); /* bit for bit */
    if (with_adam) {
        assert_memory_equal(a->m, b->m, a->nf * sizeof(float));
        assert_memory_equal(a->v, b->v, a->nf * sizeof(float));
        assert_int_equal(a->step, b->step);
    }
}

/* ---- rewriting a checkpoint with one change (malformed-file cases) ----------- */

typedef void (*edit_fn)(tf_st_out *t, size_t *n, void *arg);

static void rewrite(const char *src, const char *dst, edit_fn edit, void *arg) {
    tf_st_file *f = NULL;
    char err[512] = "";
    assert_int_equal(tf_st_open(&f, src, err, sizeof err), TF_OK);
    size_t n = tf_st_count(f);
    tf_st_out *t = calloc(n + 4, sizeof *t);
    for (size_t i = 0; i < n; i++) {
        const tf_st_tensor *x = tf_st_at(f, i);
        t[i].name = x->name;
        t[i].dtype = x->dtype;
        t[i].ndim = x->ndim;
        memcpy(t[i].shape, x->shape, sizeof t[i].shape);
        t[i].data = x->data;
    }
    const char **meta = calloc(2 * tf_st_meta_count(f) + 1, sizeof *meta);
    for (size_t i = 0; i < tf_st_meta_count(f); i++)
        tf_st_meta_at(f, i, &meta[2 * i], &meta[2 * i + 1]);
    if (edit) edit(t, &n, arg);
    assert_int_equal(tf_st_write(dst, t, n, meta, tf_st_meta_count(f), err, sizeof err), TF_OK);
    free(meta);
    free(t);
    tf_st_close(f);
}

/* The optimizer file beside checkpoint p (one of 4 rotating buffers). */
static const char *optim_of(const char *p) {
    static char b[4][700];
    static int k;
    k = (k + 1) % 4;
    assert_int_equal(tf_checkpoint_optim_path(p, b[k], sizeof b[k]), 0);
    return b[k];
}

/* q and its optimizer file: copies of p's, with the edit applied to the
 * model file (in_optim 0) or to the optimizer file (1). */
static void rewrite_pair(const char *p, const char *q, int in_optim, edit_fn edit, void *arg) {
    char op[700], oq[700];
    snprintf(op, sizeof op, "%s", optim_of(p));
    snprintf(oq, sizeof oq, "%s", optim_of(q));
    rewrite(p, q, in_optim ? NULL : edit, arg);
    rewrite(op, oq, in_optim ? edit : NULL, arg);
}

static tf_st_out *find_out(tf_st_out *t, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(t[i].name, name)) return &t[i];
    fail_msg("no tensor %s", name);
    return NULL;
}

static void edit_drop(tf_st_out *t, size_t *n, void *arg) {
    tf_st_out *x = find_out(t, *n, arg);
    *x = t[--*n];
}

static void edit_transpose(tf_st_out *t, size_t *n, void *arg) {
    tf_st_out *x = find_out(t, *n, arg);
    int64_t a = x->shape[0];
    x->shape[0] = x->shape[1];
    x->shape[1] = a;
}

static void edit_as_i32(tf_st_out *t, size_t *n, void *arg) {
    find_out(t, *n, arg)->dtype = TF_ST_I32;
}

static float g_edit_buf[4096];
static float g_edit_value;
static void edit_value(tf_st_out *t, size_t *n, void *arg) {
    tf_st_out *x = find_out(t, *n, arg);
    size_t cnt = 1;
    for (int d = 0; d < x->ndim; d++)
        cnt *= (size_t)x->shape[d];
    assert_true(cnt <= 4096);
    memcpy(g_edit_buf, x->data, cnt * sizeof(float));
    g_edit_buf[cnt - 1] = g_edit_value;
    x->data = g_edit_buf;
}

static void edit_add(tf_st_out *t, size_t *n, void *arg) {
    t[*n] = t[0];
    t[*n].name = arg;
    ++*n;
}

/* ---- tests ---------------------------------------------------------------------- */

static void test_file_contents(void **state) {
    (void)state;
    tf_config c = tiny(7);
    tf_trainer *t = make(&c);
    steps(t, 0, 3);
    const char *p = io_path("a.ckpt");
    char err[512] = "";
    assert_int_equal(tf_checkpoint_save(t, p, 3, err, sizeof err), TF_OK);
    snap s = take_snap(t);

    tf_st_file *f = NULL;
    assert_int_equal(tf_st_open(&f, p, err, sizeof err), TF_OK);
    size_t nt = tf_param_count_tensors(&c);
    tf_param_info *tab = malloc(nt * sizeof *tab);
    tf_param_table(&c, tab);
    /* the model file: the parameters only, as PyTorch's state_dict */
    assert_int_equal(tf_st_count(f), nt);
    tf_st_file *g = NULL;
    assert_string_equal(optim_of(p), io_path("a.ckpt.optim.safetensors"));
    assert_int_equal(tf_st_open(&g, optim_of(p), err, sizeof err), TF_OK);
    assert_int_equal(tf_st_count(g), 2 * nt);
    static const char *pre[3] = {"", "optimizer.exp_avg.", "optimizer.exp_avg_sq."};
    const float *src[3] = {s.p, s.m, s.v};
    for (size_t i = 0; i < nt; i++)
        for (int k = 0; k < 3; k++) {
            char nm[160];
            snprintf(nm, sizeof nm, "%s%s", pre[k], tab[i].name);
            const tf_st_tensor *x = tf_st_find(k ? g : f, nm);
            if (!x) fail_msg("missing %s", nm);
            assert_int_equal(x->dtype, TF_ST_F32);
            assert_int_equal(x->ndim, tab[i].ndim);
            for (int d = 0; d < tab[i].ndim; d++)
                assert_int_equal(x->shape[d], tab[i].shape[d]);
            assert_memory_equal(x->data, src[k] + tab[i].offset, tab[i].count * sizeof(float));
        }
    assert_string_equal(tf_st_meta_get(f, "format"), "tinyfold-checkpoint");
    assert_string_equal(tf_st_meta_get(f, "version"), "2");
    assert_string_equal(tf_st_meta_get(f, "global_step"), "3");
    assert_null(tf_st_meta_get(f, "adam_step"));
    assert_string_equal(tf_st_meta_get(g, "format"), "tinyfold-optimizer");
    assert_string_equal(tf_st_meta_get(g, "global_step"), "3");
    assert_non_null(tf_st_meta_get(g, "model_checksum"));
    char as[32];
    snprintf(as, sizeof as, "%ld", s.step);
    assert_string_equal(tf_st_meta_get(g, "adam_step"), as);
    tf_st_close(g);
    assert_int_equal(s.step, 3);
    tf_config back;
    assert_int_equal(
        tf_io_config_from_json_string(&back, tf_st_meta_get(f, "tinyfold_config"), err, sizeof err),
        TF_OK);
    assert_int_equal(back.pair_dim, 8);
    assert_int_equal(back.n_heads_pair, 2);
    tf_st_close(f);
    free(tab);
    free(s.p);
    tf_trainer_destroy(t);
}

static void test_round_trip(void **state) {
    (void)state;
    tf_config c = tiny(7);
    tf_trainer *a = make(&c);
    steps(a, 0, 3);
    const char *p = io_path("rt.ckpt");
    char err[512] = "";
    assert_int_equal(tf_checkpoint_save(a, p, 3, err, sizeof err), TF_OK);
    tf_config c2 = tiny(99); /* different initial weights */
    tf_trainer *b = make(&c2);
    snap sa = take_snap(a), sb0 = take_snap(b);
    assert_true(memcmp(sa.p, sb0.p, sa.nf * sizeof(float)) != 0);
    long gs = -1;
    assert_int_equal(tf_checkpoint_load(b, p, 1, &gs, err, sizeof err), TF_OK);
    assert_int_equal(gs, 3);
    snap sb = take_snap(b);
    assert_snap_equal(&sa, &sb, 1);
    /* parameters only: the optimizer state of a fresh trainer stays as it was */
    tf_trainer *d = make(&c2);
    assert_int_equal(tf_checkpoint_load(d, p, 0, &gs, err, sizeof err), TF_OK);
    snap sd = take_snap(d);
    assert_memory_equal(sd.p, sa.p, sa.nf * sizeof(float));
    assert_memory_equal(sd.m, sb0.m, sa.nf * sizeof(float));
    assert_int_equal(sd.step, sb0.step);
    free(sa.p);
    free(sb.p);
    free(sb0.p);
    free(sd.p);
    tf_trainer_destroy(a);
    tf_trainer_destroy(b);
    tf_trainer_destroy(d);
}

/* N steps + save + resume (config from the file, as --resume does) + M steps
 * == N+M steps straight, bit for bit. */
static void test_resume_bit_for_bit(void **state) {
    (void)state;
    const long n = 3, m = 2;
    tf_config c = tiny(11);
    tf_trainer *straight = make(&c);
    steps(straight, 0, n + m);

    tf_trainer *first = make(&c);
    steps(first, 0, n);
    const char *p = io_path("resume.ckpt");
    char err[512] = "";
    assert_int_equal(tf_checkpoint_save(first, p, n, err, sizeof err), TF_OK);
    tf_trainer_destroy(first);

    tf_config rc;
    long gs = -1;
    assert_int_equal(tf_checkpoint_peek_config(p, &rc, &gs, err, sizeof err), TF_OK);
    assert_int_equal(gs, n);
    tf_trainer *resumed = make(&rc);
    assert_int_equal(tf_checkpoint_load(resumed, p, 1, &gs, err, sizeof err), TF_OK);
    steps(resumed, gs, gs + m);

    snap a = take_snap(straight), b = take_snap(resumed);
    assert_snap_equal(&a, &b, 1);
    free(a.p);
    free(b.p);
    tf_trainer_destroy(straight);
    tf_trainer_destroy(resumed);
}

static void test_peek_config(void **state) {
    (void)state;
    tf_config c = tiny(18446744073709551557ull); /* above 2^53: stored as a string */
    c.learning_rate = 3.0e-4f;
    c.impl = TF_IMPL_V1;
    c.fusion = tf_fusion_for_impl(c.impl);
    c.fusion.flash = 1;
    c.warmup_steps = 2;
    tf_trainer *t = make(&c);
    const char *p = io_path("peek.ckpt");
    char err[512] = "";
    assert_int_equal(tf_checkpoint_save(t, p, 123456789012L, err, sizeof err), TF_OK);
    tf_config r;
    long gs = 0;
    assert_int_equal(tf_checkpoint_peek_config(p, &r, &gs, err, sizeof err), TF_OK);
    assert_int_equal(gs, 123456789012L);
    assert_int_equal(r.msa_dim, c.msa_dim);
    assert_int_equal(r.pair_dim, c.pair_dim);
    assert_int_equal(r.n_blocks, c.n_blocks);
    assert_int_equal(r.n_heads_msa, c.n_heads_msa);
    assert_int_equal(r.n_heads_pair, c.n_heads_pair);
    assert_int_equal(r.outer_dim, c.outer_dim);
    assert_int_equal(r.vocab, c.vocab);
    assert_int_equal(r.pair_input_dim, c.pair_input_dim);
    assert_int_equal(r.batch, c.batch);
    assert_int_equal(r.seq_len, c.seq_len);
    assert_int_equal(r.n_seqs, c.n_seqs);
    assert_int_equal(r.num_steps, c.num_steps);
    assert_int_equal(r.warmup_steps, c.warmup_steps);
    assert_memory_equal(&r.learning_rate, &c.learning_rate, sizeof(float));
    assert_true(r.seed == c.seed);
    assert_int_equal(r.impl, c.impl);
    assert_int_equal(r.fusion.qkv_msa, 0);
    assert_int_equal(r.fusion.flash, 1);
    assert_int_equal(r.backend, c.backend);
    assert_int_equal(r.threads, c.threads);
    assert_int_equal(r.precision, c.precision);
    assert_int_equal(r.graph, c.graph);
    char e2[512] = "";
    assert_int_equal(tf_config_validate(&r, e2, sizeof e2), TF_OK);
    const char *q = io_path("none.ckpt");
    assert_fails_with(tf_checkpoint_peek_config(q, &r, &gs, err, sizeof err), TF_ERR_IO, err, q);
    tf_trainer_destroy(t);
}

#define LOAD_FAILS(tr_, path_, opt_, ...)                                                          \
    do {                                                                                           \
        char err_[512] = "";                                                                       \
        snap before_ = take_snap(tr_);                                                             \
        long gs_ = -7;                                                                             \
        tf_status st_ = tf_checkpoint_load(tr_, path_, opt_, &gs_, err_, sizeof err_);             \
        assert_fails_with(st_, TF_ERR_USAGE, err_, path_, __VA_ARGS__);                            \
        assert_int_equal(gs_, -7);                                                                 \
        snap after_ = take_snap(tr_);                                                              \
        assert_snap_equal(&before_, &after_, 1); /* trainer untouched */                           \
        free(before_.p);                                                                           \
        free(after_.p);                                                                            \
    } while (0)

static void test_wrong_config(void **state) {
    (void)state;
    tf_config c = tiny(7);
    tf_trainer *t = make(&c);
    const char *p = io_path("w.ckpt");
    char err[512] = "";
    assert_int_equal(tf_checkpoint_save(t, p, 0, err, sizeof err), TF_OK);
    tf_config c2 = c;
    c2.pair_dim = 16;
    tf_trainer *t2 = make(&c2);
    LOAD_FAILS(t2, p, 0, "wrong config", "pair_dim=8", "pair_dim=16");
    tf_trainer_destroy(t2);
    c2 = c;
    c2.n_heads_pair = 4; /* same shapes, different model */
    t2 = make(&c2);
    LOAD_FAILS(t2, p, 1, "wrong config", "n_heads_pair=2", "n_heads_pair=4");
    tf_trainer_destroy(t2);
    c2 = c;
    c2.n_blocks = 2;
    t2 = make(&c2);
    LOAD_FAILS(t2, p, 0, "wrong config", "n_blocks=1");
    tf_trainer_destroy(t2);
    /* problem-size fields may differ: weights do not depend on B, N, S */
    c2 = c;
    c2.seq_len = 5;
    c2.batch = 1;
    t2 = make(&c2);
    assert_int_equal(tf_checkpoint_load(t2, p, 1, NULL, err, sizeof err), TF_OK);
    tf_trainer_destroy(t2);
    tf_trainer_destroy(t);
}

static void test_bad_tensors(void **state) {
    (void)state;
    tf_config c = tiny(7);
    tf_trainer *t = make(&c);
    steps(t, 0, 1);
    const char *p = io_path("good.ckpt"), *q = io_path("bad.ckpt");
    char err[512] = "";
    assert_int_equal(tf_checkpoint_save(t, p, 1, err, sizeof err), TF_OK);
    tf_config c2 = tiny(8);
    tf_trainer *u = make(&c2);

    rewrite_pair(p, q, 0, edit_drop, "structure_module.distance_pred.weight");
    LOAD_FAILS(u, q, 0, "missing tensor 'structure_module.distance_pred.weight'", "[1,8]");
    rewrite_pair(p, q, 1, edit_drop, "optimizer.exp_avg_sq.evoformer_blocks.0.pair_norm_outer.bias");
    LOAD_FAILS(u, q, 1,
               "missing tensor 'optimizer.exp_avg_sq.evoformer_blocks.0.pair_norm_outer.bias'");
    assert_int_equal(tf_checkpoint_load(u, q, 0, NULL, err, sizeof err), TF_OK); /* not needed */
    u = (tf_trainer_destroy(u), make(&c2));
    rewrite_pair(p, q, 0, edit_transpose, "structure_module.distance_pred.weight");
    LOAD_FAILS(u, q, 0, "tensor 'structure_module.distance_pred.weight'", "shape [8,1]",
               "expected [1,8]");
    rewrite_pair(p, q, 0, edit_as_i32, "msa_embedding.weight");
    LOAD_FAILS(u, q, 0, "tensor 'msa_embedding.weight'", "dtype I32");
    g_edit_value = NAN;
    rewrite_pair(p, q, 0, edit_value, "evoformer_blocks.0.msa_transition.linear2.weight");
    LOAD_FAILS(u, q, 0, "evoformer_blocks.0.msa_transition.linear2.weight", "element 255",
               "not finite");
    g_edit_value = INFINITY;
    rewrite_pair(p, q, 1, edit_value, "optimizer.exp_avg.msa_embedding.weight");
    LOAD_FAILS(u, q, 1, "optimizer.exp_avg.msa_embedding.weight", "not finite");
    g_edit_value = -1e-6f;
    rewrite_pair(p, q, 1, edit_value, "optimizer.exp_avg_sq.msa_embedding.weight");
    LOAD_FAILS(u, q, 1, "optimizer.exp_avg_sq.msa_embedding.weight", "negative");
    rewrite_pair(p, q, 0, edit_add, "evoformer_blocks.1.msa_row_attention.q_proj.weight");
    LOAD_FAILS(u, q, 0, "unexpected tensor 'evoformer_blocks.1.msa_row_attention.q_proj.weight'");
    rewrite_pair(p, q, 1, edit_add, "optimizer.exp_avg.structure_module.extra");
    LOAD_FAILS(u, q, 1, "unexpected tensor 'optimizer.exp_avg.structure_module.extra'");
    /* other prefixes are ignored */
    rewrite_pair(p, q, 0, edit_add, "ema.msa_embedding.weight");
    assert_int_equal(tf_checkpoint_load(u, q, 1, NULL, err, sizeof err), TF_OK);
    /* a model value changed after the save: the optimizer file is not its pair */
    u = (tf_trainer_destroy(u), make(&c2));
    g_edit_value = 0.5f;
    rewrite_pair(p, q, 0, edit_value, "msa_embedding.weight");
    LOAD_FAILS(u, q, 1, "model checksum differs", "not a pair");
    assert_int_equal(tf_checkpoint_load(u, q, 0, NULL, err, sizeof err), TF_OK);
    /* no optimizer file: fine without, an error with, naming the file and --load */
    u = (tf_trainer_destroy(u), make(&c2));
    const char *lone = io_path("lone.ckpt");
    rewrite(p, lone, NULL, NULL);
    LOAD_FAILS(u, lone, 1, "no optimizer state", "lone.ckpt.optim.safetensors", "does not exist",
               "--load");
    assert_int_equal(tf_checkpoint_load(u, lone, 0, NULL, err, sizeof err), TF_OK);
    assert_fails_with(tf_checkpoint_check_resumable(lone, err, sizeof err), TF_ERR_USAGE, err,
                      "no optimizer state");
    assert_int_equal(tf_checkpoint_check_resumable(p, err, sizeof err), TF_OK);
    /* the optimizer file of another step: not a pair */
    steps(t, 1, 2);
    const char *later = io_path("later.ckpt");
    assert_int_equal(tf_checkpoint_save(t, later, 2, err, sizeof err), TF_OK);
    rewrite(optim_of(later), optim_of(lone), NULL, NULL);
    LOAD_FAILS(u, lone, 1, "global step 2", "step 1", "not a pair");
    /* the optimizer file given as the checkpoint */
    LOAD_FAILS(u, optim_of(p), 0, "optimizer file", "not a checkpoint");
    tf_trainer_destroy(u);
    tf_trainer_destroy(t);
}

/* Writes the parameters like tests/reference/check_checkpoint.py
 * --save-checkpoint: state_dict names and order, no optimizer, the config as
 * string metadata; as_f64 stores them as F64 instead. */
static void write_reference_style(const char *path, tf_trainer *t, int as_f64, int with_meta,
                                  const char *n_heads_pair, const char *msa_dim) {
    const tf_config *c = tf_trainer_config(t);
    size_t nt = tf_param_count_tensors(c), nf = tf_param_count_floats(c);
    tf_param_info *tab = malloc(nt * sizeof *tab);
    tf_param_table(c, tab);
    float *p = malloc(nf * sizeof *p);
    double *d = malloc(nf * sizeof *d);
    tf_trainer_get_params(t, p);
    for (size_t i = 0; i < nf; i++)
        d[i] = (double)p[i] + (double)p[i] * 1e-9; /* rounds back to p[i] */
    tf_st_out *o = calloc(nt, sizeof *o);
    for (size_t i = 0; i < nt; i++) {
        o[i].name = tab[i].name;
        o[i].dtype = as_f64 ? TF_ST_F64 : TF_ST_F32;
        o[i].ndim = tab[i].ndim;
        for (int k = 0; k < tab[i].ndim; k++)
            o[i].shape[k] = tab[i].shape[k];
        o[i].data = as_f64 ? (const void *)(d + tab[i].offset) : (const void *)(p + tab[i].offset);
    }
    char nb[16];
    snprintf(nb, sizeof nb, "%d", c->n_blocks);
    const char *meta[] = {"msa_dim",      msa_dim,
                          "pair_dim",     "8",
                          "n_blocks",     nb,
                          "n_heads_msa",  "2",
                          "n_heads_pair", n_heads_pair,
                          "outer_dim",    "4",
                          "format",       "tinyopenfold-reference-checkpoint",
                          "version",      "1"};
    const char *pt[] = {"format", "pt"};
    char err[512] = "";
    assert_int_equal(
        tf_st_write(path, o, nt, with_meta ? meta : pt, with_meta ? 8 : 1, err, sizeof err), TF_OK);
    free(o);
    free(d);
    free(p);
    free(tab);
}

static void test_reference_params_only(void **state) {
    (void)state;
    tf_config c = tiny(5);
    tf_trainer *src = make(&c);
    snap s = take_snap(src);
    const char *p = io_path("ref.safetensors");
    char err[512] = "";
    for (int f64 = 0; f64 <= 1; f64++) {
        write_reference_style(p, src, f64, 1, "2", "8");
        tf_config pc;
        long gs = -1;
        assert_int_equal(tf_checkpoint_peek_config(p, &pc, &gs, err, sizeof err), TF_OK);
        assert_int_equal(gs, 0);
        assert_int_equal(pc.msa_dim, 8);
        assert_int_equal(pc.pair_dim, 8);
        assert_int_equal(pc.n_blocks, 1);
        assert_int_equal(pc.n_heads_msa, 2);
        assert_int_equal(pc.n_heads_pair, 2);
        assert_int_equal(pc.outer_dim, 4);
        assert_int_equal(pc.vocab, 21);
        assert_int_equal(pc.pair_input_dim, 65);
        tf_config c2 = tiny(6);
        tf_trainer *t = make(&c2);
        snap before = take_snap(t);
        LOAD_FAILS(t, p, 1, "no optimizer state");
        assert_int_equal(tf_checkpoint_load(t, p, 0, &gs, err, sizeof err), TF_OK);
        assert_int_equal(gs, 0);
        snap after = take_snap(t);
        assert_memory_equal(after.p, s.p, s.nf * sizeof(float));
        assert_memory_equal(after.m, before.m, s.nf * sizeof(float));
        free(before.p);
        free(after.p);
        tf_trainer_destroy(t);
    }
    /* no metadata at all (format "pt" only): shapes tell all but n_heads_pair */
    write_reference_style(p, src, 0, 0, "2", "8");
    tf_config pc;
    assert_int_equal(tf_checkpoint_peek_config(p, &pc, NULL, err, sizeof err), TF_OK);
    assert_int_equal(pc.msa_dim, 8);
    assert_int_equal(pc.outer_dim, 4);
    tf_config d;
    tf_config_default(&d);
    assert_int_equal(pc.n_heads_pair, d.n_heads_pair);
    tf_trainer *t = make(&c);
    assert_int_equal(tf_checkpoint_load(t, p, 0, NULL, err, sizeof err), TF_OK);
    /* metadata that contradicts the shapes */
    write_reference_style(p, src, 0, 1, "2", "16");
    assert_fails_with(tf_checkpoint_peek_config(p, &pc, NULL, err, sizeof err), TF_ERR_USAGE, err,
                      "msa_dim=16", "shapes say 8");
    write_reference_style(p, src, 0, 1, "4", "8");
    LOAD_FAILS(t, p, 0, "wrong config", "n_heads_pair=4");
    tf_trainer_destroy(t);
    tf_trainer_destroy(src);
    free(s.p);
}

static void test_not_a_checkpoint(void **state) {
    (void)state;
    tf_config c = tiny(7);
    tf_trainer *t = make(&c);
    const char *p = io_path("x.safetensors");
    char err[512] = "";
    float x = 1;
    tf_st_out o = {.name = "x", .dtype = TF_ST_F32, .ndim = 1, .shape = {1}, .data = &x};
    assert_int_equal(tf_st_write(p, &o, 1, NULL, 0, err, sizeof err), TF_OK);
    LOAD_FAILS(t, p, 0, "unknown tensor 'x'", "tinyopenfold_ref.py");
    const char *v3[] = {"format", "tinyfold-checkpoint", "version", "3", "tinyfold_config", "{}"};
    assert_int_equal(tf_st_write(p, &o, 1, v3, 3, err, sizeof err), TF_OK);
    LOAD_FAILS(t, p, 0, "unsupported checkpoint version '3'");
    const char *bad_cfg[] = {"format",
                             "tinyfold-checkpoint",
                             "version",
                             "1",
                             "tinyfold_config",
                             "{\"msa_dim\":8.5,\"pair_dim\":8,\"n_blocks\":1,\"n_heads_msa\":2,"
                             "\"n_heads_pair\":2,\"outer_dim\":4}",
                             "global_step",
                             "0"};
    assert_int_equal(tf_st_write(p, &o, 1, bad_cfg, 4, err, sizeof err), TF_OK);
    LOAD_FAILS(t, p, 0, "tinyfold_config", "msa_dim");
    const char *bad_gs[] = {"format",
                            "tinyfold-checkpoint",
                            "version",
                            "1",
                            "tinyfold_config",
                            "{\"msa_dim\":8,\"pair_dim\":8,\"n_blocks\":1,\"n_heads_msa\":2,"
                            "\"n_heads_pair\":2,\"outer_dim\":4}",
                            "global_step",
                            "-3"};
    assert_int_equal(tf_st_write(p, &o, 1, bad_gs, 4, err, sizeof err), TF_OK);
    LOAD_FAILS(t, p, 0, "global_step", "-3");
    io_write_file(p, "garbage!garbage!", 16);
    LOAD_FAILS(t, p, 0, "header length");
    tf_trainer_destroy(t);
}

static void test_failed_save_keeps_old(void **state) {
    (void)state;
    tf_config c = tiny(7);
    tf_trainer *t = make(&c);
    const char *p = io_path("keep.ckpt");
    char err[512] = "";
    assert_int_equal(tf_checkpoint_save(t, p, 1, err, sizeof err), TF_OK);
    size_t n0, n1;
    unsigned char *b0 = io_read_file(p, &n0);
    steps(t, 1, 2);
    for (int stage = 1; stage <= 2; stage++) {
        tf_st_test_inject_write_failure(stage);
        assert_fails_with(tf_checkpoint_save(t, p, 2, err, sizeof err), TF_ERR_IO, err, p,
                          "unchanged");
        unsigned char *b1 = io_read_file(p, &n1);
        assert_int_equal(n0, n1);
        assert_memory_equal(b0, b1, n0);
        free(b1);
        long gs = 0;
        tf_config r;
        assert_int_equal(tf_checkpoint_peek_config(p, &r, &gs, err, sizeof err), TF_OK);
        assert_int_equal(gs, 1);
        assert_int_equal(io_dir_count(".tmp."), 0);
    }
    const char *q = io_path("missing_dir/x.ckpt");
    assert_fails_with(tf_checkpoint_save(t, q, 2, err, sizeof err), TF_ERR_IO, err, q);
    free(b0);
    tf_trainer_destroy(t);
}

static void test_gradfile(void **state) {
    (void)state;
    tf_config c = tiny(7);
    tf_trainer *t = make(&c);
    const int B = c.batch, S = c.n_seqs, N = c.seq_len;
    int32_t *tok = malloc(sizeof(int32_t) * B * S * N);
    float *pair = malloc(sizeof(float) * B * N * N * 65),
          *target = malloc(sizeof(float) * B * N * N);
    float *pred = malloc(sizeof(float) * B * N * N);
    tf_batch b = {.B = B, .S = S, .N = N, .tokens = tok, .pair = pair, .target = target};
    tf_data_batch(c.seed, 0, &b);
    float loss = 0;
    assert_int_equal(tf_trainer_grad(t, &b, &loss, pred), TF_OK);
    const char *p = io_path("g.safetensors");
    char err[512] = "";
    assert_fails_with(tf_gradfile_save(p, t, loss, pred, B * N * N - 1, err, sizeof err),
                      TF_ERR_INTERNAL, err, "pred has");
    assert_int_equal(tf_gradfile_save(p, t, loss, pred, (long)B * N * N, err, sizeof err), TF_OK);

    size_t nt = tf_param_count_tensors(&c), nf = tf_param_count_floats(&c);
    tf_param_info *tab = malloc(nt * sizeof *tab);
    tf_param_table(&c, tab);
    float *g = malloc(nf * sizeof *g);
    tf_trainer_get_grads(t, g);
    tf_st_file *f = NULL;
    assert_int_equal(tf_st_open(&f, p, err, sizeof err), TF_OK);
    const tf_st_tensor *x = tf_st_find(f, "loss");
    assert_non_null(x);
    assert_int_equal(x->ndim, 1);
    assert_int_equal(x->shape[0], 1);
    assert_memory_equal(x->data, &loss, 4);
    x = tf_st_find(f, "pred");
    assert_non_null(x);
    assert_int_equal(x->ndim, 4);
    int64_t ps[4] = {B, N, N, 1};
    assert_memory_equal(x->shape, ps, sizeof ps);
    assert_memory_equal(x->data, pred, sizeof(float) * B * N * N);
    size_t trainable = 0;
    for (size_t i = 0; i < nt; i++) {
        char nm[160];
        snprintf(nm, sizeof nm, "grad.%s", tab[i].name);
        x = tf_st_find(f, nm);
        if (!tab[i].trainable) {
            assert_null(x); /* pair_norm_outer has no gradient */
            continue;
        }
        trainable++;
        if (!x) fail_msg("missing %s", nm);
        assert_int_equal(x->ndim, tab[i].ndim);
        for (int d = 0; d < tab[i].ndim; d++)
            assert_int_equal(x->shape[d], tab[i].shape[d]);
        assert_memory_equal(x->data, g + tab[i].offset, tab[i].count * sizeof(float));
    }
    assert_int_equal(tf_st_count(f), trainable + 2);
    assert_int_equal(trainable, nt - 2 * (size_t)c.n_blocks);
    assert_string_equal(tf_st_meta_get(f, "format"), "tinyfold-grads");
    assert_non_null(tf_st_meta_get(f, "tinyfold_config"));
    tf_st_close(f);
    /* a gradient file is not a checkpoint */
    LOAD_FAILS(t, p, 0, "gradient file");
    free(g);
    free(tab);
    free(tok);
    free(pair);
    free(target);
    free(pred);
    tf_trainer_destroy(t);
}

/* ---- precision and fp16's loss scaler ------------------------------------------- */

static tf_config tiny_prec(uint64_t seed, tf_precision p) {
    tf_config c = tiny(seed);
    c.precision = p;
    return c;
}

static void assert_scale(const tf_trainer *t, float scale, long clean, long skipped) {
    float s = 0;
    long c = -1, k = -1;
    tf_trainer_get_loss_scale(t, &s, &c, &k);
    assert_memory_equal(&s, &scale, sizeof s);
    assert_int_equal(c, clean);
    assert_int_equal(k, skipped);
}

/* A copy of src with metadata key set to value (NULL: removed). */
static void rewrite_meta(const char *src, const char *dst, const char *key, const char *value) {
    tf_st_file *f = NULL;
    char err[512] = "";
    assert_int_equal(tf_st_open(&f, src, err, sizeof err), TF_OK);
    size_t n = tf_st_count(f), nm = 0;
    tf_st_out *t = calloc(n, sizeof *t);
    for (size_t i = 0; i < n; i++) {
        const tf_st_tensor *x = tf_st_at(f, i);
        t[i] = (tf_st_out){.name = x->name, .dtype = x->dtype, .ndim = x->ndim, .data = x->data};
        memcpy(t[i].shape, x->shape, sizeof t[i].shape);
    }
    const char **meta = calloc(2 * tf_st_meta_count(f) + 2, sizeof *meta);
    int found = 0;
    for (size_t i = 0; i < tf_st_meta_count(f); i++) {
        const char *k, *v;
        tf_st_meta_at(f, i, &k, &v);
        if (!strcmp(k, key)) {
            found = 1;
            if (!value) continue;
            v = value;
        }
        meta[2 * nm] = k;
        meta[2 * nm++ + 1] = v;
    }
    assert_true(found);
    assert_int_equal(tf_st_write(dst, t, n, meta, nm, err, sizeof err), TF_OK);
    free(meta);
    free(t);
    tf_st_close(f);
}

static void test_loss_scale_round_trip(void **state) {
    (void)state;
    tf_config c = tiny_prec(7, TF_PREC_FP16);
    tf_trainer *a = make(&c);
    steps(a, 0, 2);
    assert_scale(a, 65536.0f, 2, 0); /* GradScaler's start; two clean steps */
    tf_trainer_set_loss_scale(a, 1024.0f, 17, 5);
    const char *p = io_path("fp16.ckpt");
    char err[512] = "";
    assert_int_equal(tf_checkpoint_save(a, p, 2, err, sizeof err), TF_OK);

    tf_st_file *f = NULL;
    assert_int_equal(tf_st_open(&f, optim_of(p), err, sizeof err), TF_OK);
    assert_string_equal(tf_st_meta_get(f, "loss_scale"), "1024");
    assert_string_equal(tf_st_meta_get(f, "loss_scale_clean_steps"), "17");
    assert_string_equal(tf_st_meta_get(f, "loss_scale_skipped"), "5");
    tf_st_close(f);
    tf_config r;
    long gs = 0;
    assert_int_equal(tf_checkpoint_peek_config(p, &r, &gs, err, sizeof err), TF_OK);
    assert_int_equal(r.precision, TF_PREC_FP16);

    /* with the optimizer: the scaler continues */
    tf_trainer *b = make(&c);
    assert_int_equal(tf_checkpoint_load(b, p, 1, &gs, err, sizeof err), TF_OK);
    assert_scale(b, 1024.0f, 17, 5);
    /* weights only (--load): a fresh scaler */
    tf_trainer *w = make(&c);
    assert_int_equal(tf_checkpoint_load(w, p, 0, &gs, err, sizeof err), TF_OK);
    assert_scale(w, 65536.0f, 0, 0);
    /* another precision than the file's: its own scaler, which stays 1 */
    tf_config c32 = tiny_prec(7, TF_PREC_FP32);
    tf_trainer *d = make(&c32);
    assert_int_equal(tf_checkpoint_load(d, p, 1, &gs, err, sizeof err), TF_OK);
    assert_scale(d, 1.0f, 0, 0);
    /* an fp32 file resumed in fp16: the fp16 run starts GradScaler's scale */
    const char *q = io_path("fp32.ckpt");
    assert_int_equal(tf_checkpoint_save(d, q, 2, err, sizeof err), TF_OK);
    assert_int_equal(tf_st_open(&f, optim_of(q), err, sizeof err), TF_OK);
    assert_string_equal(tf_st_meta_get(f, "loss_scale"), "1");
    assert_string_equal(tf_st_meta_get(f, "loss_scale_clean_steps"), "0");
    assert_string_equal(tf_st_meta_get(f, "loss_scale_skipped"), "0");
    tf_st_close(f);
    tf_trainer *e = make(&c);
    assert_int_equal(tf_checkpoint_load(e, q, 1, &gs, err, sizeof err), TF_OK);
    assert_scale(e, 65536.0f, 0, 0);
    tf_trainer_destroy(a);
    tf_trainer_destroy(b);
    tf_trainer_destroy(w);
    tf_trainer_destroy(d);
    tf_trainer_destroy(e);
}

/* fp16: N steps + save + resume + M steps == N+M straight, the scaler's
 * clean-step count included (a fresh scaler would count from 0). */
static void test_resume_fp16(void **state) {
    (void)state;
    const long n = 3, m = 2;
    tf_config c = tiny_prec(11, TF_PREC_FP16);
    tf_trainer *straight = make(&c);
    steps(straight, 0, n + m);
    tf_trainer *first = make(&c);
    steps(first, 0, n);
    const char *p = io_path("resume16.ckpt");
    char err[512] = "";
    assert_int_equal(tf_checkpoint_save(first, p, n, err, sizeof err), TF_OK);
    tf_trainer_destroy(first);
    tf_config rc;
    long gs = -1;
    assert_int_equal(tf_checkpoint_peek_config(p, &rc, &gs, err, sizeof err), TF_OK);
    assert_int_equal(rc.precision, TF_PREC_FP16);
    tf_trainer *resumed = make(&rc);
    assert_int_equal(tf_checkpoint_load(resumed, p, 1, &gs, err, sizeof err), TF_OK);
    steps(resumed, gs, gs + m);
    snap a = take_snap(straight), b = take_snap(resumed);
    assert_snap_equal(&a, &b, 1);
    float sa, sb;
    long ca, cb, ka, kb;
    tf_trainer_get_loss_scale(straight, &sa, &ca, &ka);
    tf_trainer_get_loss_scale(resumed, &sb, &cb, &kb);
    assert_memory_equal(&sa, &sb, sizeof sa);
    assert_int_equal(ca, cb);
    assert_int_equal(ka, kb);
    assert_int_equal(ca + ka, n + m); /* every step was clean or skipped */
    free(a.p);
    free(b.p);
    tf_trainer_destroy(straight);
    tf_trainer_destroy(resumed);
}

static void test_bad_loss_scale(void **state) {
    (void)state;
    tf_config c = tiny_prec(5, TF_PREC_FP16);
    tf_trainer *t = make(&c);
    const char *p = io_path("ls.ckpt"), *q = io_path("ls_bad.ckpt");
    char err[512] = "";
    assert_int_equal(tf_checkpoint_save(t, p, 0, err, sizeof err), TF_OK);
    static const char *const bad_scale[] = {"-1", "0", "inf", "nan", "abc", "1e39", " 2", "2x", ""};
    char oq[700];
    snprintf(oq, sizeof oq, "%s", optim_of(q));
    rewrite(p, q, NULL, NULL);
    for (size_t i = 0; i < sizeof bad_scale / sizeof bad_scale[0]; i++) {
        rewrite_meta(optim_of(p), oq, "loss_scale", bad_scale[i]);
        LOAD_FAILS(t, q, 1, "loss_scale");
    }
    rewrite_meta(optim_of(p), oq, "loss_scale_clean_steps", "-3");
    LOAD_FAILS(t, q, 1, "loss_scale_clean_steps");
    rewrite_meta(optim_of(p), oq, "loss_scale_skipped", "1.5");
    LOAD_FAILS(t, q, 1, "loss_scale_skipped");
    rewrite_meta(optim_of(p), oq, "loss_scale_skipped", NULL); /* two of three */
    LOAD_FAILS(t, q, 1, "loss_scale_skipped", "missing");
    /* weights only: the scaler's keys are not read */
    char e2[512] = "";
    assert_int_equal(tf_checkpoint_load(t, q, 0, NULL, e2, sizeof e2), TF_OK);
    tf_trainer_destroy(t);
}

/* A version 1 checkpoint (model and optimizer in one file, as written
 * before the split) still resumes bit for bit. */
static void test_combined_version1(void **state) {
    (void)state;
    tf_config c = tiny(11);
    tf_trainer *a = make(&c);
    steps(a, 0, 2);
    const char *p = io_path("split.ckpt"), *q = io_path("combined.ckpt");
    char err[512] = "";
    assert_int_equal(tf_checkpoint_save(a, p, 2, err, sizeof err), TF_OK);
    tf_st_file *f = NULL, *g = NULL;
    assert_int_equal(tf_st_open(&f, p, err, sizeof err), TF_OK);
    assert_int_equal(tf_st_open(&g, optim_of(p), err, sizeof err), TF_OK);
    size_t nf = tf_st_count(f), ng = tf_st_count(g), n = 0, nm = 0;
    tf_st_out *t = calloc(nf + ng, sizeof *t);
    for (size_t k = 0; k < 2; k++)
        for (size_t i = 0; i < (k ? ng : nf); i++) {
            const tf_st_tensor *x = tf_st_at(k ? g : f, i);
            t[n] = (tf_st_out){.name = x->name, .dtype = x->dtype, .ndim = x->ndim,
                               .data = x->data};
            memcpy(t[n++].shape, x->shape, sizeof t[0].shape);
        }
    const char *meta[32];
    for (size_t k = 0; k < 2; k++)
        for (size_t i = 0; i < tf_st_meta_count(k ? g : f); i++) {
            const char *key, *val;
            tf_st_meta_at(k ? g : f, i, &key, &val);
            if (!strcmp(key, "format") || !strcmp(key, "version") ||
                !strcmp(key, "model_checksum") || !strcmp(key, "tinyfold_version") ||
                (k && !strcmp(key, "global_step")))
                continue;
            meta[2 * nm] = key;
            meta[2 * nm++ + 1] = val;
        }
    meta[2 * nm] = "format";
    meta[2 * nm++ + 1] = "tinyfold-checkpoint";
    meta[2 * nm] = "version";
    meta[2 * nm++ + 1] = "1";
    assert_int_equal(tf_st_write(q, t, n, meta, nm, err, sizeof err), TF_OK);
    free(t);
    tf_st_close(g);
    tf_st_close(f);
    assert_int_equal(tf_checkpoint_check_resumable(q, err, sizeof err), TF_OK);
    tf_trainer *b = make(&c);
    long gs = -1;
    assert_int_equal(tf_checkpoint_load(b, q, 1, &gs, err, sizeof err), TF_OK);
    assert_int_equal(gs, 2);
    snap sa = take_snap(a), sb = take_snap(b);
    assert_snap_equal(&sa, &sb, 1);
    free(sa.p);
    free(sb.p);
    tf_trainer_destroy(a);
    tf_trainer_destroy(b);
}

/* The parameters as the upstream TinyOpenFold v2 script names them (fused
 * qkv_proj, left_right_proj, left_right_gate), under prefix; extra: one more
 * tensor of that name. */
static void write_fused(const char *path, tf_trainer *tr, const char *prefix, const char *extra) {
    const tf_config *c = tf_trainer_config(tr);
    size_t nt = tf_param_count_tensors(c), nf = tf_param_count_floats(c);
    tf_param_info *tab = malloc(nt * sizeof *tab);
    tf_param_table(c, tab);
    float *p = malloc(nf * sizeof *p), *fused = malloc(nf * sizeof *fused);
    tf_trainer_get_params(tr, p);
    tf_st_out *o = calloc(nt + 1, sizeof *o);
    char (*names)[160] = calloc(nt + 1, sizeof *names);
    static const char *const first[] = {".q_proj.weight", ".left_proj.weight", ".left_gate.weight"};
    static const char *const fname[] = {".qkv_proj.weight", ".left_right_proj.weight",
                                        ".left_right_gate.weight"};
    static const int parts[] = {3, 2, 2};
    size_t n = 0, used = 0;
    for (size_t i = 0; i < nt; i++) {
        const char *nm = tab[i].name;
        size_t len = strlen(nm);
        int kind = -1;
        for (int k = 0; k < 3; k++)
            if (len > strlen(first[k]) && !strcmp(nm + len - strlen(first[k]), first[k])) kind = k;
        int skip = 0; /* the later parts of a fused tensor: written with the first */
        static const char *const later[] = {".k_proj.weight", ".v_proj.weight",
                                            ".right_proj.weight", ".right_gate.weight"};
        for (int k = 0; k < 4; k++)
            if (len > strlen(later[k]) && !strcmp(nm + len - strlen(later[k]), later[k])) skip = 1;
        if (skip) continue;
        o[n].dtype = TF_ST_F32;
        o[n].ndim = tab[i].ndim;
        o[n].shape[0] = tab[i].shape[0];
        o[n].shape[1] = tab[i].shape[1];
        o[n].data = p + tab[i].offset;
        if (kind >= 0) { /* the parts follow each other in the table */
            snprintf(names[n], sizeof names[n], "%s%.*s%s", prefix,
                     (int)(len - strlen(first[kind])), nm, fname[kind]);
            o[n].shape[0] *= parts[kind];
            float *dst = fused + used;
            for (int k = 0; k < parts[kind]; k++)
                memcpy(dst + k * tab[i].count, p + tab[i + (size_t)k].offset,
                       tab[i].count * sizeof(float));
            o[n].data = dst;
            used += parts[kind] * tab[i].count;
        } else {
            snprintf(names[n], sizeof names[n], "%s%s", prefix, nm);
        }
        o[n].name = names[n];
        n++;
    }
    if (extra) { /* a copy of the first msa_dim x msa_dim tensor */
        size_t k = 0;
        while (o[k].ndim != 2 || o[k].shape[0] != c->msa_dim || o[k].shape[1] != c->msa_dim)
            k++;
        o[n] = o[k];
        o[n++].name = extra;
    }
    const char *meta[] = {"format", "pt"};
    char err[512] = "";
    assert_int_equal(tf_st_write(path, o, n, meta, 1, err, sizeof err), TF_OK);
    free(names);
    free(o);
    free(fused);
    free(p);
    free(tab);
}

static void test_fused_and_prefixed_names(void **state) {
    (void)state;
    tf_config c = tiny(5);
    tf_trainer *src = make(&c);
    snap s = take_snap(src);
    const char *p = io_path("v2.safetensors");
    char err[512] = "";
    static const char *const prefixes[] = {"", "module.", "_orig_mod."};
    for (int k = 0; k < 3; k++) {
        write_fused(p, src, prefixes[k], NULL);
        tf_config pc;
        long gs = -1;
        assert_int_equal(tf_checkpoint_peek_config(p, &pc, &gs, err, sizeof err), TF_OK);
        assert_int_equal(pc.n_blocks, 1);
        assert_int_equal(pc.msa_dim, 8);
        assert_int_equal(pc.outer_dim, 4);
        tf_trainer *t = make(&c);
        assert_int_equal(tf_checkpoint_load(t, p, 0, &gs, err, sizeof err), TF_OK);
        snap r = take_snap(t);
        assert_memory_equal(r.p, s.p, s.nf * sizeof(float)); /* split back bit for bit */
        free(r.p);
        /* weights only: nothing to resume */
        LOAD_FAILS(t, p, 1, "no optimizer state", "--load");
        tf_trainer_destroy(t);
    }
    tf_trainer *t = make(&c);
    /* a name of no TinyOpenFold state_dict: refused by name, before anything */
    write_fused(p, src, "module.", "module.evoformer_blocks.0.msa_row_attention.wq.weight");
    tf_config pc;
    assert_fails_with(tf_checkpoint_peek_config(p, &pc, NULL, err, sizeof err), TF_ERR_USAGE, err,
                      p, "unknown tensor 'module.evoformer_blocks.0.msa_row_attention.wq.weight'");
    write_fused(p, src, "", "encoder.weight");
    LOAD_FAILS(t, p, 0, "unknown tensor 'encoder.weight'");
    /* both the fused tensor and one of its parts */
    write_fused(p, src, "", "evoformer_blocks.0.msa_row_attention.q_proj.weight");
    LOAD_FAILS(t, p, 0, "'evoformer_blocks.0.msa_row_attention.q_proj.weight' and the fused",
               "qkv_proj.weight' both hold");
    /* a block beyond the model's */
    write_fused(p, src, "", "evoformer_blocks.3.msa_transition.linear1.weight");
    LOAD_FAILS(t, p, 0, "unexpected tensor 'evoformer_blocks.3.msa_transition.linear1.weight'");
    tf_trainer_destroy(t);
    tf_trainer_destroy(src);
    free(s.p);
}

int main(void) {
#define T(f) cmocka_unit_test_setup_teardown(f, io_dir_setup, io_dir_teardown)
    const struct CMUnitTest tests[] = {
        T(test_file_contents),         T(test_round_trip),
        T(test_resume_bit_for_bit),    T(test_peek_config),
        T(test_wrong_config),          T(test_bad_tensors),
        T(test_reference_params_only), T(test_not_a_checkpoint),
        T(test_failed_save_keeps_old), T(test_gradfile),
        T(test_loss_scale_round_trip), T(test_resume_fp16),
        T(test_bad_loss_scale),        T(test_combined_version1),
        T(test_fused_and_prefixed_names),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
