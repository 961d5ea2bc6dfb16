/* The memory options' values: --memory-budget SIZE and bench --scaling LIST,
 * and applying the budget to a configuration (train/memplan.c plans it). */
#include "cli.h"
#include "config/limits.h"
#include "train/memplan.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int reject_value(const char *flag, const char *text, const char *expected) {
    char q[64];
    tf_cli_quote(q, sizeof q, text);
    tf_cli_error("%s: '%s' is not accepted: expected %s", flag, q, expected);
    return TF_EXIT_USAGE;
}

int tf_cli_parse_size(double *out, const char *flag, const char *text) {
    static const char *expected =
        "a size > 0 such as 24G, 5.1GB, 512MiB or 1000000 (K M G T: 1000^k; KiB..TiB: 1024^k)";
    const char *p = text;
    if (!isdigit((unsigned char)*p) && *p != '.') return reject_value(flag, text, expected);
    while (isdigit((unsigned char)*p) || *p == '.') p++;
    char num[64];
    size_t len = (size_t)(p - text);
    if (len >= sizeof num) return reject_value(flag, text, expected);
    memcpy(num, text, len);
    num[len] = '\0';
    char *end;
    errno = 0;
    double v = strtod(num, &end);
    if (*end || errno || !isfinite(v) || !(v > 0)) return reject_value(flag, text, expected);
    static const char *const units[] = {"",  "B",   "K",   "KB",  "M",   "MB",  "G",  "GB",
                                        "T", "TB",  "KIB", "MIB", "GIB", "TIB"};
    static const double scale[] = {1,    1,    1e3,  1e3,  1e6,  1e6,         1e9,
                                   1e9,  1e12, 1e12, 1024.0, 1048576.0, 1073741824.0,
                                   1099511627776.0};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcasecmp(p, units[i]) == 0) {
            *out = v * scale[i];
            /* a byte count must fit a size_t: refused, not saturated, like an integer flag */
            if (*out >= 18446744073709551616.0)
                return reject_value(flag, text,
                                    "a size below 2^64 bytes (16 EiB): the value overflows");
            return TF_EXIT_OK;
        }
    return reject_value(flag, text, expected);
}

int tf_cli_check_scaling(const char *flag, const char *text) {
    char expected[96];
    snprintf(expected, sizeof expected, "a comma-separated list of N in [1, %d], e.g. 64,128,256",
             TF_LIM_SEQ_LEN_MAX);
    const char *p = text;
    int n = 0;
    for (;;) {
        size_t len = strcspn(p, ",");
        if (len == 0 || len > 4) return reject_value(flag, text, expected);
        long v = 0;
        for (size_t i = 0; i < len; i++) {
            if (!isdigit((unsigned char)p[i])) return reject_value(flag, text, expected);
            v = v * 10 + (p[i] - '0');
        }
        if (v < 1 || v > TF_LIM_SEQ_LEN_MAX || ++n > 64) return reject_value(flag, text, expected);
        if (!p[len]) return TF_EXIT_OK;
        p += len + 1;
    }
}

int tf_cli_apply_memory_budget(tf_config *c, double budget) {
    char err[512], set[64];
    size_t bytes = 0;
    tf_status st = tf_memplan_choose(c, budget, &bytes, err, sizeof err);
    char fb[32], fp[32];
    tf_memplan_fmt(fb, sizeof fb, budget);
    tf_memplan_fmt(fp, sizeof fp, (double)bytes);
    tf_memplan_setting(set, sizeof set, c);
    if (st == TF_ERR_NOMEM) {
        tf_cli_error("--memory-budget: %s does not fit this problem: the least is %s "
                     "(%s); reduce --batch-size, --seq-len, --num-seqs or --num-blocks",
                     fb, fp, set);
        return TF_EXIT_USAGE;
    }
    if (st != TF_OK) {
        tf_cli_error("%s", err);
        return tf_cli_exit_for(st);
    }
    /* the planned figure in MB always, so that a script can compare it */
    fprintf(stderr, "tinyfold: --memory-budget %s: %s (planned %.1f MB)\n", fb, set, bytes / 1e6);
    return TF_EXIT_OK;
}
