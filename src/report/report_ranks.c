/* The report's rank panel: a profile of several ranks (under mpirun) keeps
 * rank 0's summary.json in DIR and each other rank's in DIR/rank<r>. Per
 * rank: the mean step time, the time in the gradients' all-reduce and the
 * part of it the step waited for; per run: the skew, the slowest rank's step
 * time minus the fastest's. A run of one rank draws nothing. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fileio/io_util.h"
#include "report/report.h"

#define MAX_RANKS 256 /* ranks read per run; a larger count is named, not read */

typedef struct {
    int ok;
    double step_ms, comm_ms, exposed_ms;
    char err[300];
} rk_row;

static int ranks_of(const rp_run *r) {
    if (!r->profile || !r->run) return 1;
    double k = rp_num(r->run, "summary", "ranks", 1);
    return k >= 2 && k < 1e9 ? (int)k : 1;
}

static void row_from_run(rk_row *w, const cJSON *run) {
    w->step_ms = rp_num(run, "summary", "step_ms", NAN);
    w->comm_ms = rp_num(run, "summary", "comm_ms", 0);
    w->exposed_ms = rp_num(run, "summary", "exposed_comm_ms", 0);
    w->ok = isfinite(w->step_ms);
    if (!w->ok) snprintf(w->err, sizeof w->err, "no summary.step_ms");
}

/* rank k's summary.json, in the rank<k> directory beside rank 0's */
static void read_rank(rk_row *w, const rp_run *r, int k) {
    char path[4300];
    snprintf(path, sizeof path, "%s", r->file);
    char *slash = strrchr(path, '/');
    size_t at = slash ? (size_t)(slash + 1 - path) : 0;
    snprintf(path + at, sizeof path - at, "rank%d/summary.json", k);
    unsigned char *bytes = NULL;
    size_t len = 0;
    if (tf_io_read_file(path, &bytes, &len, TF_IO_MAX_TEXT, w->err, sizeof w->err) != 0) return;
    cJSON *doc = cJSON_ParseWithLength((const char *)bytes, len);
    free(bytes);
    const cJSON *run = rp_get(doc, "run", NULL);
    if (!cJSON_IsObject(run)) {
        snprintf(w->err, sizeof w->err, "rank%d/summary.json is not a tinyfold summary.json", k);
    } else {
        row_from_run(w, run);
        if (!w->ok) snprintf(w->err, sizeof w->err, "rank%d/summary.json has no summary.step_ms", k);
    }
    cJSON_Delete(doc);
}

static void one_run(FILE *f, const rp_run *r) {
    int want = ranks_of(r), n = want < MAX_RANKS ? want : MAX_RANKS;
    rk_row *rows = calloc((size_t)n, sizeof *rows);
    double *v = malloc((size_t)n * 2 * sizeof *v);
    char(*names)[32] = malloc((size_t)n * sizeof *names);
    const char **labels = malloc((size_t)n * sizeof *labels);
    if (!rows || !v || !names || !labels) {
        free(rows), free(v), free(names), free(labels);
        return;
    }
    row_from_run(&rows[0], r->run);
    for (int k = 1; k < n; k++) read_rank(&rows[k], r, k);
    int lo = -1, hi = -1, got = 0;
    for (int k = 0; k < n; k++) {
        if (!rows[k].ok) continue;
        got++;
        if (lo < 0 || rows[k].step_ms < rows[lo].step_ms) lo = k;
        if (hi < 0 || rows[k].step_ms > rows[hi].step_ms) hi = k;
    }
    fputs("<div><p class=\"note\"><b>", f);
    rp_esc(f, r->label);
    fprintf(f, "</b>: %d ranks", want);
    if (want > n) fprintf(f, " (the first %d read)", n);
    if (got >= 2)
        fprintf(f, "; skew <span class=\"skew\">%.3f ms</span> (rank %d's step %.3f ms minus "
                   "rank %d's %.3f ms, %.1f%% of the fastest)",
                rows[hi].step_ms - rows[lo].step_ms, hi, rows[hi].step_ms, lo, rows[lo].step_ms,
                rows[lo].step_ms > 0 ? 100 * (rows[hi].step_ms - rows[lo].step_ms) /
                                           rows[lo].step_ms
                                     : 0);
    fputs(".</p>\n<table class=\"ranks\"><tr><th>rank</th><th>step ms</th><th>all-reduce ms"
          "</th><th>exposed ms</th><th>exposed, % of step</th><th>behind the fastest ms</th>"
          "</tr>\n",
          f);
    for (int k = 0; k < n; k++) {
        const rk_row *w = &rows[k];
        if (!w->ok) {
            fprintf(f, "<tr><td>%d</td><td colspan=\"5\" style=\"text-align:left\">", k);
            rp_esc(f, w->err[0] ? w->err : "not read");
            fputs("</td></tr>\n", f);
            continue;
        }
        fprintf(f, "<tr><td>%d</td><td>%.3f</td><td>%.3f</td><td>%.3f</td><td>%.1f</td>"
                   "<td>%.3f</td></tr>\n",
                k, w->step_ms, w->comm_ms, w->exposed_ms,
                w->step_ms > 0 ? 100 * w->exposed_ms / w->step_ms : 0,
                w->step_ms - rows[lo].step_ms);
    }
    fputs("</table>\n", f);
    int m = 0;
    for (int k = 0; k < n; k++) {
        if (!rows[k].ok) continue;
        snprintf(names[m], sizeof names[m], "rank %d", k);
        labels[m] = names[m];
        double x = fmin(fmax(rows[k].exposed_ms, 0), fmax(rows[k].step_ms, 0));
        v[2 * m] = fmax(rows[k].step_ms, 0) - x;
        v[2 * m + 1] = x;
        m++;
    }
    if (m) {
        static const char *const segs[2] = {"step less the exposed all-reduce",
                                            "exposed all-reduce"};
        static const char *const cols[2] = {"#4e79a7", "#e15759"};
        rp_svg_stacked(f, m, labels, 2, segs, cols, v, "ms", 0);
        rp_svg_legend(f, 2, segs, cols);
        for (int k = 0, j = 0; k < n; k++)
            if (rows[k].ok) v[j++] = rows[k].comm_ms;
        fputs("<p class=\"note\">Time in the gradients' all-reduce per step (overlapped "
              "with the backward or not):</p>\n",
              f);
        rp_svg_hbars(f, m, labels, v, "ms", 3, "#f28e2b", 0);
    }
    fputs("</div>\n", f);
    free(rows), free(v), free(names), free(labels);
}

void rp_sec_ranks(FILE *f, const rp_run *r, int n) {
    int any = 0;
    for (int i = 0; i < n; i++) any |= ranks_of(&r[i]) > 1;
    if (!any) return; /* one rank: nothing to compare */
    fputs("<section id=\"ranks\"><h2>Ranks: step time and the gradients' all-reduce</h2>\n"
          "<p class=\"note\">Each rank's means over its timed steps (rank 0 from the profile's "
          "summary.json, rank r from rank&lt;r&gt;/summary.json beside it). All-reduce: the time "
          "in the gradients' all-reduces; exposed: the part of it the step waited for. Skew: "
          "the slowest rank's step time minus the fastest's.</p><div class=\"row\">\n",
          f);
    for (int i = 0; i < n; i++)
        if (ranks_of(&r[i]) > 1) one_run(f, &r[i]);
    fputs("</div></section>\n", f);
}
