/* tf_config <-> JSON (see config_json.h). */
#include "io/config_json.h"
#include "backend/registry.h"

#include "config/limits.h"

#include <cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *key;
    size_t off;
    int required; /* model shape: must be present when reading */
    int min, max; /* the ranges of config/limits.h: a file is held to what a flag is */
} int_field;

#define F(k, req, mn, mx)                                                                          \
    { #k, offsetof(tf_config, k), req, mn, mx }
static const int_field k_ints[] = {
    F(batch, 0, 1, TF_LIM_BATCH_MAX),
    F(seq_len, 0, 1, TF_LIM_SEQ_LEN_MAX),
    F(n_seqs, 0, 1, TF_LIM_N_SEQS_MAX),
    F(n_blocks, 1, 0, TF_LIM_BLOCKS_MAX),
    F(msa_dim, 1, 1, TF_LIM_DIM_MAX),
    F(pair_dim, 1, 1, TF_LIM_DIM_MAX),
    F(n_heads_msa, 1, 1, TF_LIM_HEADS_MAX),
    F(n_heads_pair, 1, 1, TF_LIM_HEADS_MAX),
    F(outer_dim, 1, 1, TF_LIM_OUTER_MAX),
    F(vocab, 0, TF_LIM_VOCAB_MIN, TF_LIM_VOCAB_MAX),
    F(pair_input_dim, 0, TF_LIM_PAIR_INPUT, TF_LIM_PAIR_INPUT),
    F(num_steps, 0, 0, TF_LIM_STEPS_MAX),
    F(warmup_steps, 0, 0, TF_LIM_WARMUP_MAX),
    F(device, 0, 0, TF_LIM_DEVICE_MAX),
    F(threads, 0, 0, TF_LIM_THREADS_MAX),
};
#undef F
#define N_INTS (sizeof k_ints / sizeof k_ints[0])

static int *int_at(tf_config *c, size_t off) { return (int *)(void *)((char *)c + off); }
static int int_of(const tf_config *c, size_t off) {
    return *(const int *)(const void *)((const char *)c + off);
}

static const char *impl_name(tf_impl i) {
    return i == TF_IMPL_V1 ? "v1" : i == TF_IMPL_V3 ? "v3" : "v2";
}

cJSON *tf_io_config_to_json(const tf_config *c) {
    cJSON *j = cJSON_CreateObject();
    if (!j) return NULL;
    int ok = 1;
    for (size_t i = 0; i < N_INTS; i++)
        ok &= cJSON_AddNumberToObject(j, k_ints[i].key, int_of(c, k_ints[i].off)) != NULL;
    /* a float printed through double is exact and reads back bit for bit */
    ok &= cJSON_AddNumberToObject(j, "learning_rate", (double)c->learning_rate) != NULL;
    if (c->seed < ((uint64_t)1 << 53)) {
        ok &= cJSON_AddNumberToObject(j, "seed", (double)c->seed) != NULL;
    } else {
        char s[32];
        snprintf(s, sizeof s, "%llu", (unsigned long long)c->seed);
        ok &= cJSON_AddStringToObject(j, "seed", s) != NULL;
    }
    ok &= cJSON_AddStringToObject(j, "impl", impl_name(c->impl)) != NULL;
    ok &= cJSON_AddStringToObject(j, "backend", tf_backend_kind_name(c->backend)) != NULL;
    ok &= cJSON_AddStringToObject(j, "precision", tf_precision_name(c->precision)) !=
          NULL;
    ok &= cJSON_AddBoolToObject(j, "graph", c->graph != 0) != NULL;
    cJSON *f = cJSON_AddObjectToObject(j, "fusion");
    ok &= f != NULL;
    if (f) {
        ok &= cJSON_AddBoolToObject(f, "qkv_msa", c->fusion.qkv_msa != 0) != NULL;
        ok &= cJSON_AddBoolToObject(f, "qkv_triangle", c->fusion.qkv_triangle != 0) != NULL;
        ok &= cJSON_AddBoolToObject(f, "flash", c->fusion.flash != 0) != NULL;
        ok &= cJSON_AddBoolToObject(f, "triangle", c->fusion.triangle != 0) != NULL;
    }
    if (!ok) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

char *tf_io_config_to_json_string(const tf_config *c) {
    cJSON *j = tf_io_config_to_json(c);
    if (!j) return NULL;
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return s;
}

static tf_status bad(char *err, size_t errlen, const char *key, const char *what) {
    if (errlen) snprintf(err, errlen, "config key \"%s\": %s", key, what);
    return TF_ERR_USAGE;
}

static tf_status get_bool(const cJSON *o, const char *key, int *v, char *err, size_t errlen) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!x) return TF_OK;
    if (cJSON_IsBool(x))
        *v = cJSON_IsTrue(x);
    else if (cJSON_IsNumber(x) && (x->valuedouble == 0 || x->valuedouble == 1))
        *v = x->valuedouble != 0;
    else
        return bad(err, errlen, key, "expected true or false");
    return TF_OK;
}

static tf_status get_enum(const cJSON *o, const char *key, const char *const *names, int n, int *v,
                          char *err, size_t errlen) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!x) return TF_OK;
    if (cJSON_IsString(x))
        for (int i = 0; i < n; i++)
            if (names[i] && strcmp(x->valuestring, names[i]) == 0) {
                *v = i;
                return TF_OK;
            }
    return bad(err, errlen, key, "unknown value");
}

tf_status tf_io_config_from_json(tf_config *c, const cJSON *j, char *err, size_t errlen) {
    tf_config_default(c);
    if (!cJSON_IsObject(j)) {
        if (errlen) snprintf(err, errlen, "config is not a JSON object");
        return TF_ERR_USAGE;
    }
    for (size_t i = 0; i < N_INTS; i++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, k_ints[i].key);
        if (!x) {
            if (k_ints[i].required) return bad(err, errlen, k_ints[i].key, "missing");
            continue;
        }
        double d = cJSON_IsNumber(x) ? x->valuedouble : NAN;
        if (!(d >= k_ints[i].min && d <= k_ints[i].max) || floor(d) != d) {
            char w[96];
            snprintf(w, sizeof w, "expected an integer in [%d, %d]", k_ints[i].min,
                     k_ints[i].max);
            return bad(err, errlen, k_ints[i].key, w);
        }
        *int_at(c, k_ints[i].off) = (int)d;
    }
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, "learning_rate");
    if (x) {
        char w[64];
        snprintf(w, sizeof w, "expected a number in (0, %g]", TF_LIM_LR_MAX);
        if (!cJSON_IsNumber(x) || !(x->valuedouble > 0) || x->valuedouble > TF_LIM_LR_MAX ||
            !((float)x->valuedouble > 0.0f))
            return bad(err, errlen, "learning_rate", w);
        c->learning_rate = (float)x->valuedouble;
    }
    x = cJSON_GetObjectItemCaseSensitive(j, "seed");
    if (x) {
        if (cJSON_IsNumber(x) && x->valuedouble >= 0 && x->valuedouble < 9007199254740992.0 &&
            floor(x->valuedouble) == x->valuedouble) {
            c->seed = (uint64_t)x->valuedouble;
        } else if (cJSON_IsString(x) && x->valuestring[0] >= '0' && x->valuestring[0] <= '9') {
            char *end = NULL;
            unsigned long long v = strtoull(x->valuestring, &end, 10);
            if (*end != '\0' || (v == ULLONG_MAX && strcmp(x->valuestring, "18446744073709551615")))
                return bad(err, errlen, "seed", "expected a non-negative 64-bit integer");
            c->seed = (uint64_t)v;
        } else {
            return bad(err, errlen, "seed", "expected a non-negative 64-bit integer");
        }
    }
    if (c->n_heads_msa > 0 && c->msa_dim % c->n_heads_msa != 0)
        return bad(err, errlen, "msa_dim", "expected a multiple of n_heads_msa");
    if (c->n_heads_pair > 0 && c->pair_dim % c->n_heads_pair != 0)
        return bad(err, errlen, "pair_dim", "expected a multiple of n_heads_pair");
    static const char *const impls[] = {NULL, "v1", "v2", "v3"};
    const char *precs[TF_PREC_COUNT];
    for (int i = 0; i < TF_PREC_COUNT; i++)
        precs[i] = tf_precision_name((tf_precision)i);
    int v = (int)c->impl;
    tf_status st = get_enum(j, "impl", impls, 4, &v, err, errlen);
    if (st) return st;
    c->impl = (tf_impl)v;
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(j, "backend");
    if (b && (!cJSON_IsString(b) || tf_backend_parse_name(b->valuestring, &c->backend, NULL, 0)))
        return bad(err, errlen, "backend", "unknown value");
    v = (int)c->precision;
    if ((st = get_enum(j, "precision", precs, TF_PREC_COUNT, &v, err, errlen))) return st;
    c->precision = (tf_precision)v;
    if ((st = get_bool(j, "graph", &c->graph, err, errlen))) return st;
    c->fusion = tf_fusion_for_impl(c->impl);
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, "fusion");
    if (f) {
        if (!cJSON_IsObject(f)) return bad(err, errlen, "fusion", "expected an object");
        if ((st = get_bool(f, "qkv_msa", &c->fusion.qkv_msa, err, errlen)) ||
            (st = get_bool(f, "qkv_triangle", &c->fusion.qkv_triangle, err, errlen)) ||
            (st = get_bool(f, "flash", &c->fusion.flash, err, errlen)) ||
            (st = get_bool(f, "triangle", &c->fusion.triangle, err, errlen)))
            return st;
    }
    return TF_OK;
}

tf_status tf_io_config_from_json_string(tf_config *c, const char *text, char *err, size_t errlen) {
    cJSON *j = cJSON_Parse(text);
    if (!j) {
        tf_config_default(c);
        if (errlen) snprintf(err, errlen, "config is not valid JSON");
        return TF_ERR_USAGE;
    }
    tf_status st = tf_io_config_from_json(c, j, err, errlen);
    cJSON_Delete(j);
    return st;
}

int tf_io_config_model_diff(const tf_config *a, const tf_config *b, const char **field, long *va,
                            long *vb) {
    static const char *const keys[] = {"msa_dim",      "pair_dim",  "n_blocks", "n_heads_msa",
                                       "n_heads_pair", "outer_dim", "vocab",    "pair_input_dim"};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        for (size_t i = 0; i < N_INTS; i++)
            if (strcmp(k_ints[i].key, keys[k]) == 0 &&
                int_of(a, k_ints[i].off) != int_of(b, k_ints[i].off)) {
                *field = keys[k];
                *va = int_of(a, k_ints[i].off);
                *vb = int_of(b, k_ints[i].off);
                return 1;
            }
    return 0;
}
