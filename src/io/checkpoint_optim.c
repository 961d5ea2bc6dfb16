/* The optimizer file beside a checkpoint (see checkpoint.h): its name, the
 * checksum that pairs it with the model file, and finding and checking it
 * before a run resumes. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "io/checkpoint.h"
#include "io/checkpoint_internal.h"

int tf_checkpoint_optim_path(const char *model_path, char *out, size_t n) {
    static const char ext[] = ".safetensors";
    size_t len = strlen(model_path), k = strlen(ext);
    if (len > k && strcmp(model_path + len - k, ext) == 0) len -= k;
    int w = snprintf(out, n, "%.*s.optim%s", (int)len, model_path, ext);
    return w < 0 || (size_t)w >= n ? -1 : 0;
}

void tf_ckpt_checksum(const float *p, size_t n, char out[17]) {
    const unsigned char *b = (const unsigned char *)p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n * sizeof(float); i++)
        h = (h ^ b[i]) * 1099511628211ull;
    snprintf(out, 17, "%016" PRIx64, h);
}

tf_status tf_ckpt_open_optimizer(const tf_st_file *f, int ours, long global_step,
                                 tf_st_file **g, char *err, size_t errlen) {
    const char *path = tf_st_label(f);
    *g = NULL;
    if (!ours)
        return tf_ckpt_failf(err, errlen, TF_ERR_USAGE, path,
                             "has no optimizer state: it holds weights only (no tinyfold "
                             "metadata), so there is no run to continue; start from its weights "
                             "with --load",
                             NULL, NULL);
    const char *ver = tf_st_meta_get(f, "version");
    if (ver && strcmp(ver, CKPT_VERSION_COMBINED) == 0) {
        if (!tf_st_meta_get(f, "adam_step"))
            return tf_ckpt_failf(err, errlen, TF_ERR_USAGE, path,
                                 "has no optimizer state (metadata 'adam_step' missing): load it "
                                 "with --load",
                                 NULL, NULL);
        *g = (tf_st_file *)f; /* the optimizer in the same file */
        return TF_OK;
    }
    char op[4096 + 64];
    if (tf_checkpoint_optim_path(path, op, sizeof op) != 0)
        return tf_ckpt_failf(err, errlen, TF_ERR_USAGE, path,
                             "the name of its optimizer file is too long", NULL, NULL);
    struct stat sb;
    if (stat(op, &sb) != 0 && errno == ENOENT)
        return tf_ckpt_failf(err, errlen, TF_ERR_USAGE, path,
                             "no optimizer state: '%s' does not exist (--save writes it beside "
                             "the checkpoint; a resumed run needs both to continue bit for bit); "
                             "to start from these weights with a fresh optimizer, use --load",
                             op, NULL);
    tf_st_file *o = NULL;
    tf_status st = tf_st_open(&o, op, err, errlen);
    if (st) return st;
    const char *fmt = tf_st_meta_get(o, "format"), *ov = tf_st_meta_get(o, "version");
    const char *gs = tf_st_meta_get(o, "global_step");
    long ogs = -1;
    if (!fmt || strcmp(fmt, OPTIM_FORMAT) != 0 || !ov || strcmp(ov, OPTIM_VERSION) != 0)
        st = tf_ckpt_failf(err, errlen, TF_ERR_USAGE, op,
                           "not a tinyfold optimizer file (metadata 'format' is '%s', expected "
                           "'" OPTIM_FORMAT "' version " OPTIM_VERSION ")",
                           fmt ? fmt : "(missing)", NULL);
    else if (!tf_ckpt_parse_step(gs, &ogs))
        st = tf_ckpt_failf(err, errlen, TF_ERR_USAGE, op,
                           "metadata 'global_step' is '%s', expected " STEP_EXPECTED,
                           gs ? gs : "(missing)", NULL);
    else if (ogs != global_step) {
        char msg[320];
        snprintf(msg, sizeof msg,
                 "is the optimizer state of global step %ld but the checkpoint is of step %ld "
                 "(a save interrupted between the two files?): the two files are not a pair",
                 ogs, global_step);
        st = tf_ckpt_failf(err, errlen, TF_ERR_USAGE, op, "%s", msg, NULL);
    } else if (!tf_st_meta_get(o, META_MODEL_CHECKSUM))
        st = tf_ckpt_failf(err, errlen, TF_ERR_USAGE, op,
                           "metadata '" META_MODEL_CHECKSUM "' is missing", NULL, NULL);
    if (st) {
        tf_st_close(o);
        return st;
    }
    *g = o;
    return TF_OK;
}

tf_status tf_checkpoint_check_resumable(const char *path, char *err, size_t errlen) {
    tf_st_file *f = NULL, *g = NULL;
    tf_status st = tf_st_open(&f, path, err, errlen);
    if (st) return st;
    tf_config c;
    long gs = 0;
    int ours = 0;
    st = tf_ckpt_file_config(f, &c, &gs, &ours, err, errlen);
    if (!st) st = tf_ckpt_open_optimizer(f, ours, gs, &g, err, errlen);
    if (g && g != f) tf_st_close(g);
    tf_st_close(f);
    return st;
}
