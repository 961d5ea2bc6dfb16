/* Small helpers of the CLI: the one-line error printer, strict number
 * parsers, formatting, clocks. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "fileio/io_util.h"
#include "io/text_quote.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int error_rank;
void tf_cli_error_rank(int rank) { error_rank = rank; }

void tf_cli_error(const char *fmt, ...)
{
    char msg[3 * 4096]; /* room for two full paths and the reason */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* Messages from libraries may carry a newline: the contract is one line. */
    for (char *p = msg; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    size_t len = strlen(msg);
    while (len && msg[len - 1] == ' ')
        msg[--len] = '\0';
    fflush(stdout); /* keep the order of stdout and stderr on one terminal */
    if (error_rank > 0)
        fprintf(stderr, "tinyfold: rank %d: %s\n", error_rank, msg);
    else
        fprintf(stderr, "tinyfold: %s\n", msg);
}

void tf_cli_quote(char *out, size_t n, const char *s)
{
    tf_text_quote(out, n, s);
}

int tf_cli_reject(const char *flag, const char *text, const char *expected)
{
    char q[64];
    tf_cli_quote(q, sizeof q, text);
    tf_cli_error("%s: '%s' is not accepted: expected %s", flag, q, expected);
    return TF_EXIT_USAGE;
}

/* Digits only, with an optional leading '-': no spaces, '+', hex or junk. */
static int plain_integer(const char *s)
{
    if (*s == '-')
        s++;
    if (!*s)
        return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return 0;
    return 1;
}

int tf_cli_parse_int(int *out, const char *flag, const char *text, long lo, long hi)
{
    char expected[96];
    snprintf(expected, sizeof expected, "an integer in [%ld, %ld]", lo, hi);
    if (!plain_integer(text))
        return tf_cli_reject(flag, text, expected);
    errno = 0;
    long long v = strtoll(text, NULL, 10);
    if (errno == ERANGE || v < lo || v > hi)
        return tf_cli_reject(flag, text, expected);
    *out = (int)v;
    return TF_EXIT_OK;
}

int tf_cli_parse_u64(uint64_t *out, const char *flag, const char *text)
{
    const char *expected = "an integer in [0, 18446744073709551615]";
    if (!plain_integer(text) || text[0] == '-')
        return tf_cli_reject(flag, text, expected);
    errno = 0;
    unsigned long long v = strtoull(text, NULL, 10);
    if (errno == ERANGE)
        return tf_cli_reject(flag, text, expected);
    *out = (uint64_t)v;
    return TF_EXIT_OK;
}

int tf_cli_parse_lr(float *out, const char *flag, const char *text, double hi)
{
    char expected[64];
    snprintf(expected, sizeof expected, "a number in (0, %g]", hi);
    /* strtod also takes " 1", "inf", "nan", hex floats: allow only decimals. */
    if (!*text || !strchr("0123456789.+-", text[0]))
        return tf_cli_reject(flag, text, expected);
    for (const char *p = text; *p; p++)
        if (!strchr("0123456789.eE+-", *p))
            return tf_cli_reject(flag, text, expected);
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    /* Underflow to a tiny value is an ERANGE too: reject it, it is not > 0 in float. */
    if (*end || errno == ERANGE || !isfinite(v) || !(v > 0.0) || v > hi || !((float)v > 0.0f))
        return tf_cli_reject(flag, text, expected);
    *out = (float)v;
    return TF_EXIT_OK;
}

int tf_cli_parse_choice(int *out, const char *flag, const char *text, const char *const *names,
                        const int *vals, int n, const char *expected)
{
    for (int i = 0; i < n; i++)
        if (strcmp(text, names[i]) == 0) {
            *out = vals[i];
            return TF_EXIT_OK;
        }
    return tf_cli_reject(flag, text, expected);
}

void tf_cli_thousands(char *out, size_t n, unsigned long long v)
{
    char digits[32];
    int len = snprintf(digits, sizeof digits, "%llu", v);
    size_t j = 0;
    for (int i = 0; i < len && j + 2 < n; i++) {
        if (i > 0 && (len - i) % 3 == 0)
            out[j++] = ',';
        out[j++] = digits[i];
    }
    if (n)
        out[j < n ? j : n - 1] = '\0';
}

double tf_cli_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

size_t tf_cli_peak_rss_bytes(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (size_t)ru.ru_maxrss * 1024u; /* Linux: kilobytes */
}

const char *tf_cli_impl_name(tf_impl impl)
{
    switch (impl) {
    case TF_IMPL_V1: return "v1";
    case TF_IMPL_V2: return "v2";
    case TF_IMPL_V3: return "v3";
    }
    return "?";
}

const char *tf_cli_impl_desc(tf_impl impl)
{
    switch (impl) {
    case TF_IMPL_V1: return "baseline";
    case TF_IMPL_V2: return "fused";
    case TF_IMPL_V3: return "custom kernels";
    }
    return "?";
}

int tf_cli_exit_for(tf_status s)
{
    switch (s) {
    case TF_OK: return TF_EXIT_OK;
    case TF_ERR_USAGE:
    case TF_ERR_NOMEM:
    case TF_ERR_DEVICE: return TF_EXIT_USAGE;
    default: return TF_EXIT_FAIL;
    }
}

int tf_cli_check_writable(const char *flag, const char *path)
{
    char q[64];
    tf_cli_quote(q, sizeof q, path);
    if (!*path) {
        tf_cli_error("%s: '' is not accepted: expected a file name", flag);
        return TF_EXIT_USAGE;
    }
    char *dir = strdup(path);
    if (!dir) {
        tf_cli_error("out of host memory");
        return TF_EXIT_FAIL;
    }
    char *slash = strrchr(dir, '/');
    const char *d = ".";
    if (slash == dir)
        d = "/";
    else if (slash) {
        *slash = '\0';
        d = dir;
    }
    struct stat st;
    int rc = TF_EXIT_OK;
    if (stat(d, &st) != 0 || !S_ISDIR(st.st_mode)) {
        tf_cli_error("%s: '%s' is not accepted: its directory does not exist", flag, q);
        rc = TF_EXIT_USAGE;
    } else if (access(d, W_OK) != 0) {
        tf_cli_error("%s: '%s' is not accepted: its directory is not writable", flag, q);
        rc = TF_EXIT_USAGE;
    } else if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        tf_cli_error("%s: '%s' is not accepted: it is a directory", flag, q);
        rc = TF_EXIT_USAGE;
    }
    free(dir);
    return rc;
}
