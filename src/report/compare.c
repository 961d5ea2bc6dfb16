/* `tinyfold compare A B [C ...] [--format table|markdown|csv|json] [--force]`
 *
 * Reads profiler summaries (summary.json, the run JSON under "run"; a
 * profile directory stands for its summary.json), run JSON files
 * (`train --json`) or kernel tables (a profile's kernel_stats.csv, or
 * rocprofv3's `--stats` *_kernel_stats.csv, the AMD external route; its
 * other summaries are refused: compare_rocprof.c) and prints them side by side,
 * with ratios vs the first run. Runs are only comparable at the same problem:
 * a differing knob (batch, seq_len, ...) is refused with exit 2 unless
 * --force; a kernel_stats.csv carries no configuration and is not checked
 * (its kernels are set beside the others'). Any unreadable or malformed file
 * is one line and exit 2. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cJSON.h>

#include "fileio/io_util.h"
#include "fileio/text_escape.h"
#include "report/cmp_table.h"
#include "report/commands.h"
#include "report/compare.h"
#include "report/compare_rocprof.h"

/* The knobs that define the problem (docs/model.md section 1, and the
 * article's "fix batch size, sequence length, MSA depth, block count, AMP mode
 * and step count"). */
static const char *const knobs[] = {"batch",      "seq_len",      "n_seqs",       "n_blocks",
                                    "msa_dim",    "pair_dim",     "n_heads_msa",  "n_heads_pair",
                                    "outer_dim",  "precision",    "num_steps"};

typedef struct {
    cJSON *doc;
    const cJSON *run;     /* the run JSON: doc, or doc["run"] */
    const cJSON *profile; /* doc when it is a profiler summary, else NULL */
    int external;         /* a rocprofv3 kernel_stats.csv: kernels only */
} cmp_run;

/* One line "tinyfold: compare: ..." on stderr (control characters from the
 * input escaped: fileio/text_escape.h), exit status 2. */
__attribute__((format(printf, 1, 2))) static int fail(const char *fmt, ...) {
    char msg[1024], safe[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fflush(stdout);
    fprintf(stderr, "tinyfold: compare: %s\n", tf_text_escape(safe, sizeof safe, msg, 0));
    return 2;
}

/* A path or name from the input for a message: printable, short. */
static const char *q(char *buf, size_t n, const char *s) {
    size_t j = 0;
    for (size_t i = 0; s[i] && j + 4 < n; i++) {
        if (i == 64) {
            memcpy(buf + j, "...", 3);
            j += 3;
            break;
        }
        unsigned char c = (unsigned char)s[i];
        buf[j++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    buf[j] = 0;
    return buf;
}

/* One field of a CSV line at *s (quotes and doubled quotes as RFC 4180);
 * advances past its comma. 0 at the end of the line. */
static int csv_field(const char **s, char *out, size_t n) {
    const char *p = *s;
    size_t k = 0;
    if (!*p || *p == '\n' || *p == '\r') return 0;
    if (*p == '"') {
        for (++p; *p; ++p) {
            if (*p == '"' && p[1] == '"') ++p;
            else if (*p == '"') { ++p; break; }
            if (k + 1 < n) out[k++] = *p;
        }
    } else {
        for (; *p && *p != ',' && *p != '\n' && *p != '\r'; ++p)
            if (k + 1 < n) out[k++] = *p;
    }
    out[k] = 0;
    if (*p == ',') ++p;
    else if (*p && *p != '\n' && *p != '\r') return -1; /* text after a closing quote */
    *s = p;
    return 1;
}

/* A rocprofv3 summary of something else than kernels (told by `by`). */
static int not_kernels(const char *path, const char *kind, const char *by) {
    return fail("'%s' is rocprofv3's %s statistics (by %s), not kernels: compare reads "
                "rocprofv3's kernel_stats.csv, a profile's summary.json or its directory, "
                "or a run JSON",
                path, kind, by);
}

/* rocprofv3 --stats kernel summary: "Name","Calls","TotalDurationNs",... one
 * row per kernel; as a profile with only "kernels" (name, calls, total_ns). */
static int load_kernel_stats(const char *path, const char *text, cmp_run *r) {
    char field[4096];
    int col_name = -1, col_calls = -1, col_total = -1, ncol = 0, f;
    const char *s = text;
    while ((f = csv_field(&s, field, sizeof field)) == 1) {
        if (!strcmp(field, "Name") || !strcmp(field, "KernelName")) col_name = ncol;
        if (!strcmp(field, "Calls")) col_calls = ncol;
        if (!strcmp(field, "TotalDurationNs")) col_total = ncol;
        ncol++;
    }
    if (f < 0 || col_name < 0 || col_calls < 0 || col_total < 0)
        return fail("'%s' is not a rocprofv3 kernel_stats.csv (expected the columns "
                    "\"Name\",\"Calls\",\"TotalDurationNs\")", path);
    const char *kind = tf_cmp_stats_kind_of_path(path);
    if (kind) return not_kernels(path, kind, "its name");
    r->doc = cJSON_CreateObject();
    cJSON *ks = r->doc ? cJSON_AddArrayToObject(r->doc, "kernels") : NULL;
    if (!ks) return fail("out of memory");
    for (int line = 2;; line++) {
        while (*s == '\r' || *s == '\n') s++;
        if (!*s) break;
        char name[4096] = "";
        double calls = -1, total = -1;
        for (int c = 0; (f = csv_field(&s, field, sizeof field)) == 1; c++) {
            char *end = NULL;
            if (c == col_name) snprintf(name, sizeof name, "%s", field);
            if (c == col_calls || c == col_total) {
                errno = 0;
                const double v = strtod(field, &end);
                if (end == field || *end || errno || v < 0)
                    return fail("'%s' line %d: '%s' is not a count (expected a number >= 0)",
                                path, line, field);
                *(c == col_calls ? &calls : &total) = v;
            }
        }
        if (f < 0 || !name[0] || calls < 0 || total < 0)
            return fail("'%s' line %d: a row needs a name, calls and TotalDurationNs", path, line);
        kind = tf_cmp_stats_kind_of_rows(kind, name, line == 2);
        cJSON *k = cJSON_CreateObject();
        if (!k || !cJSON_AddStringToObject(k, "name", name) ||
            !cJSON_AddNumberToObject(k, "calls", calls) ||
            !cJSON_AddNumberToObject(k, "total_ns", total)) {
            cJSON_Delete(k);
            return fail("out of memory");
        }
        cJSON_AddItemToArray(ks, k);
    }
    if (kind) return not_kernels(path, kind, "its rows");
    r->profile = r->doc;
    r->run = NULL;
    r->external = 1;
    return 0;
}

/* Parses one input (text of len bytes, NUL-terminated) named path. */
static int load_text(const char *path, const char *text, size_t len, cmp_run *r) {
    char qp[80];
    q(qp, sizeof qp, path);
    if (strlen(text) != len) return fail("'%s' is not valid JSON: it holds a NUL byte", qp);
    const char *end = NULL;
    r->doc = cJSON_ParseWithOpts(text, &end, 0);
    if (!r->doc) {
        size_t at = end && end >= text ? (size_t)(end - text) : 0;
        return fail("'%s' is not valid JSON (at byte %zu of %zu)", qp, at, len);
    }
    while (end && (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r'))
        end++;
    if (end && *end)
        return fail("'%s' is not valid JSON: data after the document at byte %zu of %zu", qp,
                    (size_t)(end - text), len);
    if (!cJSON_IsObject(r->doc))
        return fail("'%s' is not a tinyfold summary.json or run JSON", qp);
    const cJSON *run = cJSON_GetObjectItemCaseSensitive(r->doc, "run");
    if (cJSON_IsObject(run) || cJSON_GetObjectItemCaseSensitive(r->doc, "kernels")) {
        r->profile = r->doc;
        r->run = cJSON_IsObject(run) ? run : NULL;
    } else {
        r->run = r->doc;
    }
    if (r->run && !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(r->run, "config")))
        return fail("'%s' has no \"config\" object: not a tinyfold run JSON", qp);
    if (!r->run && !r->profile)
        return fail("'%s' is not a tinyfold summary.json or run JSON", qp);
    return 0;
}

/* A file's text: a kernel_stats.csv or a JSON document. */
static int load_any(const char *path, const char *text, size_t len, cmp_run *r) {
    return text[0] == '"' || !strncmp(text, "Name,", 5) /* a CSV, not JSON */
               ? load_kernel_stats(path, text, r)
               : load_text(path, text, len, r);
}

static int load(const char *path, cmp_run *r) {
    size_t len = 0;
    unsigned char *bytes = NULL;
    char err[512];
    if (tf_io_read_file(path, &bytes, &len, TF_IO_MAX_TEXT, err, sizeof err) != 0)
        return fail("%s", err);
    int rc = load_any(path, (const char *)bytes, len, r);
    free(bytes);
    return rc;
}

static const cJSON *get(const cJSON *o, const char *a, const char *b) {
    const cJSON *x = o ? cJSON_GetObjectItemCaseSensitive(o, a) : NULL;
    return b && x ? cJSON_GetObjectItemCaseSensitive(x, b) : x;
}

static void knob_text(const cJSON *v, char *buf, size_t n) {
    if (!v) snprintf(buf, n, "(missing)");
    else if (cJSON_IsString(v)) snprintf(buf, n, "%s", v->valuestring);
    else if (cJSON_IsNumber(v)) snprintf(buf, n, "%.15g", v->valuedouble);
    else if (cJSON_IsBool(v)) snprintf(buf, n, "%s", cJSON_IsTrue(v) ? "true" : "false");
    else snprintf(buf, n, "(?)");
}

/* 0 if every knob agrees; else prints the refusal and returns 2. */
static int check_knobs(cmp_run *r, int n, const char *const *paths) {
    int first = 0;
    while (first < n && r[first].external) first++; /* kernel_stats.csv: no knobs */
    for (int i = first + 1; i < n; i++) {
        if (r[i].external) continue;
        for (size_t k = 0; k < sizeof knobs / sizeof knobs[0]; k++) {
            const cJSON *a = get(r[first].run, "config", knobs[k]);
            const cJSON *b = get(r[i].run, "config", knobs[k]);
            char ta[64], tb[64];
            knob_text(a, ta, sizeof ta);
            knob_text(b, tb, sizeof tb);
            if (!a && !b) continue;
            if (strcmp(ta, tb) == 0) continue;
            char q0[80], qi[80];
            return fail("runs differ in %s: %s (%s) vs %s (%s); use --force to compare anyway",
                        knobs[k], ta, q(q0, sizeof q0, paths[first]), tb, q(qi, sizeof qi, paths[i]));
        }
    }
    return 0;
}

/* "name what" in a new heap string (name whole), or NULL out of memory. */
static char *join_label(const char *name, const char *what) {
    size_t a = strlen(name), b = strlen(what);
    char *l = malloc(a + 1 + b + 1);
    if (!l) return NULL;
    memcpy(l, name, a);
    l[a] = ' ';
    memcpy(l + a + 1, what, b + 1);
    return l;
}

/* A row labelled `label` (taken: freed here on failure), of kernel `name_len`
 * bytes at its start when a kernel row. */
static cmp_row *add_row_owned(cmp_section *s, char *label, size_t name_len, int prec) {
    if (!label) return NULL;
    if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 16;
        cmp_row *q = realloc(s->rows, nc * sizeof *q);
        if (!q) {
            free(label);
            return NULL;
        }
        s->rows = q;
        s->cap = nc;
    }
    cmp_row *r = &s->rows[s->n++];
    memset(r, 0, sizeof *r);
    r->label = label;
    r->name_len = name_len;
    r->prec = prec;
    return r;
}

static cmp_row *add_row(cmp_section *s, const char *label, int prec) {
    return add_row_owned(s, strdup(label), 0, prec);
}

/* A kernel row: "name what", the name whole. */
static cmp_row *add_kernel_row(cmp_section *s, const char *name, const char *what, int prec) {
    return add_row_owned(s, join_label(name, what), strlen(name), prec);
}

/* A numeric row from run.summary.<key> (scaled), skipped when no run has it. */
static void metric_row(cmp_section *s, const cmp_run *r, int n, const char *label, const char *key,
                       double scale, int prec) {
    cmp_row tmp;
    memset(&tmp, 0, sizeof tmp);
    int any = 0;
    for (int i = 0; i < n; i++) {
        const cJSON *v = get(r[i].run, "summary", key);
        if (!cJSON_IsNumber(v) && r[i].profile) {
            /* a profiler summary carries some figures itself */
            /* the GPU event timer counts ops (one or more kernels each): not kernel launches */
            const cJSON *unit = get(r[i].profile, "launch_unit", NULL);
            if (!strcmp(key, "launches_per_step") &&
                !(cJSON_IsString(unit) && !strcmp(unit->valuestring, "op")))
                v = get(r[i].profile, "launches_per_step", NULL);
            if (!strcmp(key, "peak_memory_bytes")) v = get(r[i].profile, "memory", "peak_backend_bytes");
            if (!strcmp(key, "host_peak_rss_bytes"))
                v = get(r[i].profile, "memory", "peak_host_rss_bytes");
        }
        if (cJSON_IsNumber(v)) {
            tmp.v[i] = v->valuedouble * scale;
            tmp.has[i] = 1;
            any = 1;
        }
    }
    if (!any) return;
    cmp_row *row = add_row(s, label, prec);
    if (!row) return;
    memcpy(row->v, tmp.v, sizeof tmp.v);
    memcpy(row->has, tmp.has, sizeof tmp.has);
}

/* Does some run's config.precision read p? */
static int any_precision(const cmp_run *r, int n, const char *p) {
    for (int i = 0; i < n; i++) {
        const cJSON *v = get(r[i].run, "config", "precision");
        if (cJSON_IsString(v) && !strcmp(v->valuestring, p)) return 1;
    }
    return 0;
}

static void text_row(cmp_section *s, const cmp_run *r, int n, const char *label, const char *a,
                     const char *b) {
    int any = 0;
    for (int i = 0; i < n; i++) any |= get(get(r[i].run, "config", NULL), a, b) != NULL;
    if (!any) return;
    cmp_row *row = add_row(s, label, 0);
    if (!row) return;
    row->text = 1;
    for (int i = 0; i < n; i++) {
        const cJSON *v = get(get(r[i].run, "config", NULL), a, b);
        if (v) knob_text(v, row->s[i], sizeof row->s[i]);
        else snprintf(row->s[i], sizeof row->s[i], "-");
    }
}

/* A run's kernels (or counters.kernels) sorted by name, for lookups in
 * O(log n): compare stays linear-logarithmic in the kernel count. */
typedef struct {
    const cJSON **k;
    size_t n;
} name_index;

static const char *name_of(const cJSON *k) {
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(k, "name");
    return cJSON_IsString(nm) ? nm->valuestring : NULL;
}

static int by_name(const void *a, const void *b) {
    return strcmp(name_of(*(const cJSON *const *)a), name_of(*(const cJSON *const *)b));
}

static int index_build(name_index *ix, const cJSON *arr) {
    ix->k = NULL;
    ix->n = 0;
    if (!cJSON_IsArray(arr)) return 0;
    size_t cap = (size_t)cJSON_GetArraySize(arr);
    if (!cap) return 0;
    ix->k = malloc(cap * sizeof *ix->k);
    if (!ix->k) return -1;
    const cJSON *k;
    cJSON_ArrayForEach(k, arr) {
        if (name_of(k) && ix->n < cap) ix->k[ix->n++] = k;
    }
    qsort(ix->k, ix->n, sizeof *ix->k, by_name);
    return 0;
}

static const cJSON *index_find(const name_index *ix, const char *name) {
    size_t lo = 0, hi = ix->n;
    while (lo < hi) { /* the first of equal names, as a linear scan would find */
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(name_of(ix->k[mid]), name) < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo < ix->n && !strcmp(name_of(ix->k[lo]), name) ? ix->k[lo] : NULL;
}

/* A set of strings (row labels already made), open addressing. */
typedef struct {
    const char **slot;
    size_t cap;
} str_set;

static size_t str_hash(const char *s) {
    size_t h = 1469598103934665603u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

/* 1 if s was added, 0 if present, -1 out of memory. s must outlive the set. */
static int set_add(str_set *st, size_t *count, const char *s) {
    if (2 * (*count + 1) > st->cap) {
        size_t nc = st->cap ? 2 * st->cap : 64;
        const char **ns = calloc(nc, sizeof *ns);
        if (!ns) return -1;
        for (size_t i = 0; i < st->cap; i++)
            if (st->slot[i]) {
                size_t h = str_hash(st->slot[i]) & (nc - 1);
                while (ns[h]) h = (h + 1) & (nc - 1);
                ns[h] = st->slot[i];
            }
        free(st->slot);
        st->slot = ns;
        st->cap = nc;
    }
    size_t h = str_hash(s) & (st->cap - 1);
    for (; st->slot[h]; h = (h + 1) & (st->cap - 1))
        if (!strcmp(st->slot[h], s)) return 0;
    st->slot[h] = s;
    (*count)++;
    return 1;
}

/* Union of the top 10 kernels (by total_ns) of each run: two rows each. */
static void kernel_rows(cmp_section *s, const cmp_run *r, int n) {
    const char *names[CMP_MAX_RUNS * 10];
    int nn = 0;
    for (int i = 0; i < n; i++) {
        /* one pass keeping the 10 largest (the file is sorted, but do not rely
         * on it); ties keep the earlier kernel */
        const cJSON *top[10];
        double tv[10];
        int nt = 0;
        const cJSON *k;
        cJSON_ArrayForEach(k, get(r[i].profile, "kernels", NULL)) {
            const cJSON *t = get(k, "total_ns", NULL);
            double v = cJSON_IsNumber(t) ? t->valuedouble : 0;
            if (!(v == v)) v = 0;
            if (nt == 10 && !(v > tv[9])) continue;
            int at = nt < 10 ? nt++ : 9;
            while (at > 0 && v > tv[at - 1]) {
                top[at] = top[at - 1];
                tv[at] = tv[at - 1];
                at--;
            }
            top[at] = k;
            tv[at] = v;
        }
        for (int t = 0; t < nt; t++) {
            const char *nm = name_of(top[t]);
            if (!nm) continue;
            int dup = 0;
            for (int u = 0; u < nn; u++) dup |= !strcmp(names[u], nm);
            if (!dup) names[nn++] = nm;
        }
    }
    name_index ix[CMP_MAX_RUNS];
    for (int i = 0; i < n; i++)
        if (index_build(&ix[i], get(r[i].profile, "kernels", NULL)) != 0) ix[i].n = 0;
    for (int k = 0; k < nn; k++) {
        cmp_row *ms = add_kernel_row(s, names[k], "ms", 3);
        cmp_row *calls = ms ? add_kernel_row(s, names[k], "calls", 0) : NULL;
        if (!ms || !calls) break;
        ms = &s->rows[s->n - 2]; /* add_row may have moved the array */
        for (int i = 0; i < n; i++) {
            const cJSON *e = index_find(&ix[i], names[k]);
            const cJSON *t = get(e, "total_ns", NULL), *c = get(e, "calls", NULL);
            if (cJSON_IsNumber(t)) ms->has[i] = 1, ms->v[i] = t->valuedouble / 1e6;
            if (cJSON_IsNumber(c)) calls->has[i] = 1, calls->v[i] = c->valuedouble;
        }
    }
    for (int i = 0; i < n; i++) free(ix[i].k);
}

/* counters.kernels[].metrics of each run, one row per (kernel, metric). */
static void counter_rows(cmp_section *s, const cmp_run *r, int n) {
    name_index ix[CMP_MAX_RUNS];
    for (int i = 0; i < n; i++)
        if (index_build(&ix[i], get(get(r[i].profile, "counters", NULL), "kernels", NULL)) != 0)
            ix[i].n = 0;
    str_set seen = {0};
    size_t nseen = 0;
    /* the set points at the rows' labels: they move when rows grow, so it
     * holds copies */
    char **copies = NULL;
    size_t ncopies = 0, capcopies = 0;
    int oom = 0;
    for (int i = 0; i < n && !oom; i++) {
        const cJSON *k;
        cJSON_ArrayForEach(k, get(get(r[i].profile, "counters", NULL), "kernels", NULL)) {
            const char *nm = name_of(k);
            const cJSON *m;
            if (!nm) continue;
            cJSON_ArrayForEach(m, get(k, "metrics", NULL)) {
                if (!cJSON_IsNumber(m) || !m->string) continue;
                if (ncopies == capcopies) {
                    size_t nc = capcopies ? 2 * capcopies : 64;
                    char **q2 = realloc(copies, nc * sizeof *q2);
                    if (!q2) {
                        oom = 1;
                        break;
                    }
                    copies = q2;
                    capcopies = nc;
                }
                char *cp = join_label(nm, m->string);
                int added = cp ? set_add(&seen, &nseen, cp) : -1;
                if (added != 1) {
                    free(cp);
                    if (added < 0) oom = 1;
                    if (oom) break;
                    continue;
                }
                copies[ncopies++] = cp;
                cmp_row *row = add_kernel_row(s, nm, m->string, 3);
                if (!row) {
                    oom = 1;
                    break;
                }
                for (int j = 0; j < n; j++) {
                    const cJSON *kj = index_find(&ix[j], nm);
                    const cJSON *v = get(get(kj, "metrics", NULL), m->string, NULL);
                    if (cJSON_IsNumber(v)) row->has[j] = 1, row->v[j] = v->valuedouble;
                }
            }
            if (oom) break;
        }
    }
    for (size_t i = 0; i < ncopies; i++) free(copies[i]);
    free(copies);
    free(seen.slot);
    for (int i = 0; i < n; i++) free(ix[i].k);
}

static void make_label(const char *path, char *out, size_t n) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (!strcmp(base, "summary.json") && base > path) {
        /* the profile directory names the run */
        const char *end = base - 1, *start = end;
        while (start > path && start[-1] != '/') start--;
        snprintf(out, n, "%.*s", (int)(end - start), start);
        if (out[0]) return;
    }
    snprintf(out, n, "%s", base);
    size_t l = strlen(out);
    if (l > 5 && !strcmp(out + l - 5, ".json")) out[l - 5] = 0;
    if (l > 4 && !strcmp(out + l - 4, ".csv")) out[l - 4] = 0;
}

#define USAGE "tinyfold compare A B [C ...] [--format table|markdown|csv|json] [--force]"

static int compare_runs(cmp_run *runs, const char *const *paths, int n, int force, cmp_format fmt,
                        FILE *out);

int tf_compare_main(int argc, char **argv) {
    const char *paths[CMP_MAX_RUNS];
    static char dirbuf[CMP_MAX_RUNS][4200];
    int n = 0, force = 0;
    cmp_format fmt = CMP_TABLE;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = NULL;
        if (!strcmp(a, "--force")) {
            force = 1;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("usage: " USAGE "\n"
                   "  A, B, ...: profile summary.json files (or their directories), run JSON "
                   "files (train --json) or kernel tables (a profile's kernel_stats.csv, "
                   "rocprofv3's *_kernel_stats.csv)\n");
            return 0;
        } else if (!strncmp(a, "--format", 8) && (a[8] == 0 || a[8] == '=')) {
            val = a[8] ? a + 9 : (i + 1 < argc ? argv[++i] : NULL);
            if (!val) return fail("--format needs a value (table, markdown, csv or json)");
            if (!strcmp(val, "table")) fmt = CMP_TABLE;
            else if (!strcmp(val, "markdown") || !strcmp(val, "md")) fmt = CMP_MARKDOWN;
            else if (!strcmp(val, "csv")) fmt = CMP_CSV;
            else if (!strcmp(val, "json")) fmt = CMP_JSON;
            else {
                char qv[80];
                return fail("--format: '%s' is not accepted: expected table, markdown, csv or json",
                            q(qv, sizeof qv, val));
            }
        } else if (a[0] == '-' && a[1]) {
            char qa[80];
            return fail("unknown option '%s' (usage: " USAGE ")", q(qa, sizeof qa, a));
        } else {
            if (n == CMP_MAX_RUNS) return fail("at most 16 files can be compared");
            /* a profile directory stands for its summary.json */
            struct stat st;
            if (stat(a, &st) == 0 && S_ISDIR(st.st_mode)) {
                size_t l = strlen(a);
                while (l > 1 && a[l - 1] == '/') l--;
                snprintf(dirbuf[n], sizeof dirbuf[n], "%.*s/summary.json", (int)l, a);
                a = dirbuf[n];
            }
            paths[n++] = a;
        }
    }
    if (n < 2) return fail("needs at least two files to compare (usage: " USAGE ")");
    cmp_run runs[CMP_MAX_RUNS];
    memset(runs, 0, sizeof runs);
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) rc = load(paths[i], &runs[i]);
    if (rc == 0) rc = compare_runs(runs, paths, n, force, fmt, stdout);
    for (int i = 0; i < n; i++) cJSON_Delete(runs[i].doc);
    return rc;
}

int tf_compare_texts(int n, const char *const *labels, const char *const *texts,
                     const size_t *lens, int force, int format, FILE *out) {
    if (n < 2 || n > CMP_MAX_RUNS) return fail("needs 2 to %d inputs", CMP_MAX_RUNS);
    cmp_run runs[CMP_MAX_RUNS];
    const char *paths[CMP_MAX_RUNS];
    memset(runs, 0, sizeof runs);
    int rc = 0;
    for (int i = 0; i < n; i++) paths[i] = labels[i];
    for (int i = 0; i < n && rc == 0; i++) rc = load_any(labels[i], texts[i], lens[i], &runs[i]);
    if (rc == 0)
        rc = compare_runs(runs, paths, n, force,
                          format == CMP_CSV        ? CMP_CSV
                          : format == CMP_MARKDOWN ? CMP_MARKDOWN
                          : format == CMP_JSON     ? CMP_JSON
                                                   : CMP_TABLE,
                          out);
    for (int i = 0; i < n; i++) cJSON_Delete(runs[i].doc);
    return rc;
}

/* Checks the runs agree on the problem, then builds and prints the table. */
static int compare_runs(cmp_run *runs, const char *const *paths, int n, int force, cmp_format fmt,
                        FILE *out) {
    cmp_table *t = calloc(1, sizeof *t);
    int rc = t ? 0 : fail("out of memory");
    char qp[80];
    for (int i = 0; i < n && rc == 0 && !force; i++)
        if (!runs[i].run && !runs[i].external)
            rc = fail("'%s' holds no run configuration to check; use --force to compare anyway",
                      q(qp, sizeof qp, paths[i]));
    if (rc == 0 && !force) rc = check_knobs(runs, n, paths);
    if (rc == 0) {
        t->nruns = n;
        for (int i = 0; i < n; i++) {
            t->paths[i] = paths[i];
            make_label(paths[i], t->labels[i], sizeof t->labels[i]);
            for (int j = 0; j < i; j++) /* keep labels distinct */
                if (!strcmp(t->labels[i], t->labels[j])) {
                    snprintf(t->labels[i], sizeof t->labels[i], "run%d", i + 1);
                    break;
                }
        }
        cmp_section *cfg = &t->sec[0], *perf = &t->sec[1], *ker = &t->sec[2], *cnt = &t->sec[3];
        t->nsec = 4;
        snprintf(cfg->title, sizeof cfg->title, "Configuration");
        snprintf(perf->title, sizeof perf->title, "Performance");
        snprintf(ker->title, sizeof ker->title, "Top kernels (union of each run's top 10)");
        snprintf(cnt->title, sizeof cnt->title, "Counters (mean per call)");
        text_row(cfg, runs, n, "impl", "impl", NULL);
        text_row(cfg, runs, n, "backend", "backend", NULL);
        text_row(cfg, runs, n, "precision", "precision", NULL);
        text_row(cfg, runs, n, "graph", "graph", NULL);
        text_row(cfg, runs, n, "threads", "threads", NULL);
        metric_row(perf, runs, n, "samples/s", "samples_per_sec", 1, 2);
        metric_row(perf, runs, n, "ms/step", "step_ms", 1, 3);
        metric_row(perf, runs, n, "data ms", "data_ms", 1, 3);
        metric_row(perf, runs, n, "forward ms", "forward_ms", 1, 3);
        metric_row(perf, runs, n, "backward ms", "backward_ms", 1, 3);
        metric_row(perf, runs, n, "optimizer ms", "optimizer_ms", 1, 3);
        metric_row(perf, runs, n, "comm ms", "comm_ms", 1, 3);
        metric_row(perf, runs, n, "exposed comm ms", "exposed_comm_ms", 1, 3);
        metric_row(perf, runs, n, "launches/step", "launches_per_step", 1, 1);
        metric_row(perf, runs, n, "peak memory MiB", "peak_memory_bytes", 1.0 / 1048576, 1);
        metric_row(perf, runs, n, "host peak RSS MiB", "host_peak_rss_bytes", 1.0 / 1048576, 1);
        metric_row(perf, runs, n, "GFLOP/s", "gflops", 1, 1);
        metric_row(perf, runs, n, "final loss", "final_loss", 1, 6);
        if (any_precision(runs, n, "fp16")) { /* the loss scaler's: 0 and 1 elsewhere */
            metric_row(perf, runs, n, "skipped steps", "skipped_steps", 1, 0);
            metric_row(perf, runs, n, "final loss scale", "loss_scale", 1, 0);
        }
        kernel_rows(ker, runs, n);
        counter_rows(cnt, runs, n);
        if (fmt != CMP_JSON) cmp_render(t, fmt, out);
        else if (cmp_render_json(t, out) != 0) rc = fail("out of memory");
        fflush(out);
    }
    if (t)
        for (int s = 0; s < 4; s++) {
            for (size_t r = 0; r < t->sec[s].n; r++) free(t->sec[s].rows[r].label);
            free(t->sec[s].rows);
        }
    free(t);
    return rc;
}
