/* Reading what `tinyfold report` is given: profile directories (summary.json
 * with trace.json beside it), run JSON files, rocprofv3-style
 * kernel_stats.csv files, and `bench --scaling` JSON. Every malformed input
 * is one line in err. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fileio/io_util.h"
#include "fileio/outcheck.h"
#include "report/compare_rocprof.h"
#include "report/report.h"

static const char *const knobs[] = {"batch",     "seq_len",     "n_seqs",       "n_blocks",
                                    "msa_dim",   "pair_dim",    "n_heads_msa",  "n_heads_pair",
                                    "outer_dim", "precision",   "num_steps"};

/* The whole file must be one JSON value (a truncated or padded file is not). */
static cJSON *parse_json(const char *path, char *err, size_t errlen) {
    size_t len = 0;
    unsigned char *bytes = NULL;
    if (tf_io_read_file(path, &bytes, &len, TF_IO_MAX_TEXT, err, errlen) != 0) return NULL;
    char *text = (char *)bytes;
    const char *end = NULL;
    cJSON *doc = cJSON_ParseWithOpts(text, &end, 0);
    if (doc && end) {
        while (*end == ' ' || *end == '\n' || *end == '\r' || *end == '\t') end++;
        if (*end || (size_t)(end - text) != len) {
            cJSON_Delete(doc);
            doc = NULL;
        }
    }
    free(text);
    if (!doc) snprintf(err, errlen, "'%s' is not valid JSON (truncated or malformed)", path);
    return doc;
}

const cJSON *rp_get(const cJSON *o, const char *a, const char *b) {
    const cJSON *x = o ? cJSON_GetObjectItemCaseSensitive(o, a) : NULL;
    return b && x ? cJSON_GetObjectItemCaseSensitive(x, b) : x;
}

double rp_num(const cJSON *o, const char *a, const char *b, double dflt) {
    const cJSON *x = rp_get(o, a, b);
    return cJSON_IsNumber(x) ? x->valuedouble : dflt;
}
int rp_int(const cJSON *o, const char *a, const char *b, int dflt) {
    const double v = rp_num(o, a, b, (double)dflt);
    if (v != v) return dflt;
    return v <= (double)INT_MIN ? INT_MIN : v >= (double)INT_MAX ? INT_MAX : (int)v;
}

static int by_total(const void *a, const void *b) {
    double x = ((const rp_kernel *)a)->total_ns, y = ((const rp_kernel *)b)->total_ns;
    return x < y ? 1 : x > y ? -1 : 0;
}

static int kernels_from_json(rp_run *r, const cJSON *arr) {
    int n = cJSON_GetArraySize(arr);
    r->kernels = calloc(n > 0 ? (size_t)n : 1, sizeof *r->kernels);
    if (!r->kernels) return -1;
    const cJSON *k;
    cJSON_ArrayForEach(k, arr) {
        const cJSON *name = rp_get(k, "name", NULL);
        if (!cJSON_IsString(name)) continue;
        rp_kernel *o = &r->kernels[r->nkernels++];
        snprintf(o->name, sizeof o->name, "%s", name->valuestring);
        o->calls = rp_num(k, "calls", NULL, 0);
        o->total_ns = rp_num(k, "total_ns", NULL, 0);
    }
    qsort(r->kernels, r->nkernels, sizeof *r->kernels, by_total);
    return 0;
}

/* One CSV field (quoted or not) from *s; advances past the comma. */
static int csv_field(const char **s, char *out, size_t n) {
    const char *p = *s;
    size_t k = 0;
    if (*p == '"') {
        p++;
        for (;;) {
            if (!*p) return -1;
            if (*p == '"') {
                if (p[1] == '"') p++;
                else break;
            }
            if (k + 1 < n) out[k++] = *p;
            p++;
        }
        p++;
    } else {
        while (*p && *p != ',' && *p != '\n' && *p != '\r') {
            if (k + 1 < n) out[k++] = *p;
            p++;
        }
    }
    out[k] = 0;
    if (*p == ',') p++;
    *s = p;
    return 0;
}

static const char csv_header[] =
    "\"Name\",\"Calls\",\"TotalDurationNs\",\"AverageNs\",\"Percentage\",\"MinNs\",\"MaxNs\","
    "\"StdDev\"";

static int load_csv(const char *path, rp_run *r, char *err, size_t errlen) {
    size_t len = 0;
    unsigned char *bytes = NULL;
    if (tf_io_read_file(path, &bytes, &len, TF_IO_MAX_TEXT, err, errlen) != 0) return -1;
    char *text = (char *)bytes;
    if (strncmp(text, csv_header, sizeof csv_header - 1) != 0) {
        snprintf(err, errlen,
                 "'%s' is not a kernel_stats.csv (expected the header %s)", path, csv_header);
        free(text);
        return -1;
    }
    const char *kind = tf_cmp_stats_kind_of_path(path); /* the same header, not kernels */
    if (kind) {
        snprintf(err, errlen,
                 "'%s' is rocprofv3's %s statistics (by its name), not kernels: report reads "
                 "rocprofv3's kernel_stats.csv", path, kind);
        free(text);
        return -1;
    }
    size_t lines = 0;
    for (const char *p = text; *p; p++) lines += *p == '\n';
    r->kernels = calloc(lines + 1, sizeof *r->kernels);
    if (!r->kernels) {
        free(text);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    const char *p = strchr(text, '\n');
    long row = 1;
    while (p && *++p) {
        row++;
        char f[8][200];
        const char *q = p;
        int bad = 0;
        for (int i = 0; i < 8 && !bad; i++) bad = csv_field(&q, f[i], sizeof f[i]);
        char *end1, *end2;
        double calls = bad ? 0 : strtod(f[1], &end1);
        double tot = bad ? 0 : strtod(f[2], &end2);
        if (bad || *end1 || *end2 || !f[0][0] || calls < 0 || tot < 0 ||
            (*q && *q != '\n' && *q != '\r')) {
            snprintf(err, errlen, "'%s' line %ld: not a kernel_stats.csv row (truncated?)", path,
                     row);
            free(text);
            return -1;
        }
        kind = tf_cmp_stats_kind_of_rows(kind, f[0], row == 2);
        rp_kernel *k = &r->kernels[r->nkernels++];
        snprintf(k->name, sizeof k->name, "%s", f[0]);
        k->calls = calls;
        k->total_ns = tot;
        p = strchr(q, '\n');
    }
    free(text);
    if (kind) {
        snprintf(err, errlen,
                 "'%s' is rocprofv3's %s statistics (by its rows), not kernels: report reads "
                 "rocprofv3's kernel_stats.csv", path, kind);
        return -1;
    }
    qsort(r->kernels, r->nkernels, sizeof *r->kernels, by_total);
    r->from_csv = 1;
    return 0;
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

static void make_label(const char *path, char *out, size_t n) {
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s", path);
    size_t l = strlen(tmp);
    while (l > 1 && tmp[l - 1] == '/') tmp[--l] = 0;
    static const char *const tails[] = {"/summary.json", "/kernel_stats.csv"};
    for (int i = 0; i < 2; i++)
        if (ends_with(tmp, tails[i]) && l > strlen(tails[i])) tmp[l - strlen(tails[i])] = 0;
    const char *b = strrchr(tmp, '/');
    b = b ? b + 1 : tmp;
    size_t k = strlen(b) < n - 1 ? strlen(b) : n - 1; /* a long name is cut */
    memcpy(out, b, k);
    out[k] = 0;
}

int rp_load(const char *path, rp_run *r, cJSON **scaling, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    r->path = path;
    make_label(path, r->label, sizeof r->label);
    struct stat st;
    if (stat(path, &st) != 0) {
        snprintf(err, errlen, "cannot read '%s': %s", path, strerror(errno));
        return -1;
    }
    char file[4200];
    int dir = S_ISDIR(st.st_mode);
    if (dir) {
        snprintf(file, sizeof file, "%s/summary.json", path);
        if (stat(file, &st) != 0) {
            snprintf(err, errlen,
                     "'%s' is not a profile directory (no summary.json; expected a directory "
                     "written by tinyfold profile, a summary.json, run JSON or kernel_stats.csv)",
                     path);
            return -1;
        }
    } else if (ends_with(path, ".csv")) {
        snprintf(r->file, sizeof r->file, "%s", path);
        return load_csv(path, r, err, errlen);
    } else {
        snprintf(file, sizeof file, "%s", path);
    }
    snprintf(r->file, sizeof r->file, "%s", file);
    cJSON *doc = parse_json(file, err, errlen);
    if (!doc) return -1;
    if (!cJSON_IsObject(doc)) {
        cJSON_Delete(doc);
        snprintf(err, errlen, "'%s' is not a tinyfold summary.json, run JSON or scaling JSON", file);
        return -1;
    }
    if (cJSON_IsArray(rp_get(doc, "points", NULL))) {
        *scaling = doc;
        return 0;
    }
    r->doc = doc;
    const cJSON *run = rp_get(doc, "run", NULL);
    if (cJSON_IsObject(run) || rp_get(doc, "kernels", NULL)) {
        r->profile = doc;
        r->run = cJSON_IsObject(run) ? run : NULL;
    } else {
        r->run = doc;
    }
    if (r->run && !cJSON_IsObject(rp_get(r->run, "config", NULL))) {
        snprintf(err, errlen, "'%s' has no \"config\" object: not a tinyfold run JSON", file);
        return -1;
    }
    if (r->profile && !cJSON_IsArray(rp_get(doc, "kernels", NULL))) {
        snprintf(err, errlen, "'%s' has no \"kernels\" array: not a tinyfold summary.json", file);
        return -1;
    }
    if (r->profile && kernels_from_json(r, rp_get(doc, "kernels", NULL)) != 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    /* the timeline: trace.json beside the summary (optional) */
    char tpath[4200];
    snprintf(tpath, sizeof tpath, "%s", file);
    char *slash = strrchr(tpath, '/');
    if (slash) snprintf(slash + 1, sizeof tpath - (size_t)(slash + 1 - tpath), "trace.json");
    else snprintf(tpath, sizeof tpath, "trace.json");
    if (r->profile && stat(tpath, &st) == 0) {
        snprintf(r->trace_path, sizeof r->trace_path, "%s", tpath);
        r->trace = parse_json(tpath, err, errlen);
        if (!r->trace) return -1;
        if (!cJSON_IsArray(rp_get(r->trace, "traceEvents", NULL))) {
            snprintf(err, errlen, "'%s' has no \"traceEvents\" array: not a tinyfold trace.json",
                     tpath);
            return -1;
        }
    }
    return 0;
}

int rp_check_out(const char *out, const char *const *paths, int np, const rp_run *runs, int n,
                 char *err, size_t errlen) {
    static tf_io_path v[3 * RP_MAX_RUNS + 2]; /* --out, np <= RP_MAX_RUNS + 1, 2 per run */
    int k = 0;
    memset(v, 0, sizeof v);
    v[k++] = (tf_io_path){.flag = "--out", .path = out, .what = "the page", .output = 1};
    for (int i = 0; i < np; i++) /* the arguments (a scaling JSON among them) */
        v[k++] = (tf_io_path){.flag = "RUN", .path = paths[i], .what = "an input of report"};
    for (int i = 0; i < n && k + 2 <= (int)(sizeof v / sizeof v[0]); i++) {
        if (runs[i].file[0])
            v[k++] = (tf_io_path){.flag = "RUN", .path = runs[i].file,
                                  .what = "a file report reads"};
        if (runs[i].trace_path[0])
            v[k++] = (tf_io_path){.flag = "RUN", .path = runs[i].trace_path,
                                  .what = "a trace.json report reads"};
    }
    return tf_io_check_paths(v, k, err, errlen);
}

void rp_free(rp_run *r) {
    cJSON_Delete(r->doc);
    cJSON_Delete(r->trace);
    free(r->kernels);
    memset(r, 0, sizeof *r);
}

static void knob_text(const cJSON *v, char *buf, size_t n) {
    if (!v) snprintf(buf, n, "(missing)");
    else if (cJSON_IsString(v)) snprintf(buf, n, "%s", v->valuestring);
    else if (cJSON_IsNumber(v)) snprintf(buf, n, "%.15g", v->valuedouble);
    else if (cJSON_IsBool(v)) snprintf(buf, n, "%s", cJSON_IsTrue(v) ? "true" : "false");
    else snprintf(buf, n, "(?)");
}

int rp_check_problem(const rp_run *r, int n, char *err, size_t errlen) {
    int first = -1;
    for (int i = 0; i < n; i++) {
        if (!r[i].run) continue; /* a kernel_stats.csv says nothing of its problem */
        if (first < 0) {
            first = i;
            continue;
        }
        for (size_t k = 0; k < sizeof knobs / sizeof knobs[0]; k++) {
            const cJSON *a = rp_get(r[first].run, "config", knobs[k]);
            const cJSON *b = rp_get(r[i].run, "config", knobs[k]);
            char ta[64], tb[64];
            knob_text(a, ta, sizeof ta);
            knob_text(b, tb, sizeof tb);
            if ((!a && !b) || strcmp(ta, tb) == 0) continue;
            snprintf(err, errlen, "runs differ in %s: %s (%s) vs %s (%s); use --force to report "
                                  "them together anyway",
                     knobs[k], ta, r[first].path, tb, r[i].path);
            return -1;
        }
    }
    return 0;
}
