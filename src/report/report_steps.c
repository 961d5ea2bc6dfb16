/* The report's per-step panel: each step's time (warm-up marked, outliers
 * red) with its loss on a second axis, from the run JSON's steps[], and the
 * spread of the timed steps (median, min, max, standard deviation, the
 * outliers by step). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/report.h"

#define MAX_DRAWN 4000 /* steps drawn per run; the statistics take them all */

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median_of(double *v, int n) { /* sorts v */
    qsort(v, (size_t)n, sizeof *v, by_value);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void rp_step_stats(const double *ms, const int *timed, int n, rp_step_stats_t *s) {
    memset(s, 0, sizeof *s);
    double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    if (!v) return;
    double sum = 0, sq = 0;
    s->min = INFINITY;
    s->max = -INFINITY;
    for (int i = 0; i < n; i++) {
        if (!timed[i]) continue;
        v[s->n++] = ms[i];
        sum += ms[i];
        sq += ms[i] * ms[i];
        s->min = fmin(s->min, ms[i]);
        s->max = fmax(s->max, ms[i]);
    }
    if (s->n) {
        s->mean = sum / s->n;
        double var = s->n > 1 ? (sq - s->n * s->mean * s->mean) / (s->n - 1) : 0;
        s->sd = var > 0 ? sqrt(var) : 0;
        s->median = median_of(v, s->n);
        for (int i = 0; i < s->n; i++) v[i] = fabs(v[i] - s->median);
        s->mad = median_of(v, s->n);
        /* an outlier lies further from the median than three scaled MADs
         * (a standard deviation for normal data) and than 10% of it */
        s->threshold = fmax(3 * 1.4826 * s->mad, 0.1 * s->median);
    } else {
        s->min = s->max = 0;
    }
    free(v);
}

int rp_step_outlier(const rp_step_stats_t *s, double ms) {
    return s->n >= 3 && fabs(ms - s->median) > s->threshold;
}

typedef struct {
    double step, ms, loss;
    int warm, replay, has_loss;
} step_row;

static int read_steps(const cJSON *arr, step_row **out) {
    int n = cJSON_GetArraySize(arr), k = 0;
    step_row *s = calloc((size_t)(n > 0 ? n : 1), sizeof *s);
    if (!s) return -1;
    const cJSON *o;
    cJSON_ArrayForEach(o, arr) {
        const cJSON *ms = rp_get(o, "step_ms", NULL), *loss = rp_get(o, "loss", NULL);
        if (!cJSON_IsNumber(ms)) continue;
        s[k].step = rp_num(o, "step", NULL, k);
        s[k].ms = ms->valuedouble;
        s[k].warm = cJSON_IsTrue(rp_get(o, "warmup", NULL));
        s[k].replay = cJSON_IsTrue(rp_get(o, "counter_replay", NULL));
        s[k].has_loss = cJSON_IsNumber(loss) && isfinite(loss->valuedouble);
        s[k].loss = s[k].has_loss ? loss->valuedouble : 0;
        k++;
    }
    *out = s;
    return k;
}

static void chart(FILE *f, const step_row *s, int n, const rp_step_stats_t *st) {
    const int W = 560, H = 230, L = 52, R = 56, T = 14, PW = W - L - R, PH = H - T - 34;
    int nd = n < MAX_DRAWN ? n : MAX_DRAWN;
    double ymax = 0, lmin = INFINITY, lmax = -INFINITY;
    for (int i = 0; i < nd; i++) {
        ymax = fmax(ymax, s[i].ms);
        if (s[i].has_loss) lmin = fmin(lmin, s[i].loss), lmax = fmax(lmax, s[i].loss);
    }
    if (ymax <= 0) ymax = 1;
    ymax *= 1.08;
    if (lmax > lmin) {
        double pad = 0.08 * (lmax - lmin);
        lmin -= pad, lmax += pad;
    } else if (isfinite(lmin)) {
        lmin -= 0.5, lmax += 0.5;
    }
    fprintf(f, "<svg class=\"chart steps\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n", W,
            H, W, H);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#fbfbfd\" "
               "stroke=\"#ccc\"/>\n",
            L, T, PW, PH);
    for (int k = 0; k <= 4; k++) { /* ms gridlines, left axis; loss, right axis */
        double y = T + PH - k * PH / 4.0;
        fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>"
                   "<text x=\"%d\" y=\"%.1f\" class=\"ax\" text-anchor=\"end\">%.3g</text>\n",
                L, L + PW, y, y, L - 4, y + 3, ymax * k / 4);
        if (isfinite(lmin))
            fprintf(f, "<text x=\"%d\" y=\"%.1f\" class=\"ax\" style=\"fill:#7b3294\">%.4g</text>\n",
                    L + PW + 4, y + 3, lmin + (lmax - lmin) * k / 4);
    }
    fprintf(f, "<text x=\"%d\" y=\"10\" class=\"ax\">ms/step</text><text x=\"%d\" y=\"10\" "
               "class=\"ax\" text-anchor=\"end\" style=\"fill:#7b3294\">loss</text>\n",
            L, W - 4);
    double bw = (double)PW / nd;
    for (int i = 0; i < nd; i++) {
        int out = !s[i].warm && !s[i].replay && rp_step_outlier(st, s[i].ms);
        const char *col = s[i].warm ? "#c7c7c7" : s[i].replay ? "#e2d3b0" : out ? "#d62728"
                                                                             : "#f28e2b";
        double h = s[i].ms / ymax * PH;
        fprintf(f, "<rect class=\"%s\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" "
                   "fill=\"%s\"><title>step %.0f%s: %.3f ms",
                s[i].warm ? "warmup" : out ? "outlier" : "timed", L + i * bw + bw * 0.1,
                T + PH - h, bw * 0.8 > 0.5 ? bw * 0.8 : 0.5, h, col, s[i].step,
                s[i].warm ? " (warm-up)" : s[i].replay ? " (counter replay)" : out ? " (outlier)"
                                                                                    : "",
                s[i].ms);
        if (s[i].has_loss) fprintf(f, ", loss %.5g", s[i].loss);
        fputs("</title></rect>\n", f);
    }
    if (st->n) { /* the timed steps' median */
        double y = T + PH - st->median / ymax * PH;
        fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#333\" "
                   "stroke-dasharray=\"4,3\"><title>median of the timed steps: %.3f ms</title>"
                   "</line>\n",
                L, L + PW, y, y, st->median);
    }
    if (isfinite(lmin)) {
        fputs("<polyline class=\"loss\" fill=\"none\" stroke=\"#7b3294\" stroke-width=\"1.5\" "
              "points=\"",
              f);
        for (int i = 0; i < nd; i++)
            if (s[i].has_loss)
                fprintf(f, "%.1f,%.1f ", L + (i + 0.5) * bw,
                        T + PH - (s[i].loss - lmin) / (lmax - lmin) * PH);
        fputs("\"/>\n", f);
    }
    int every = nd > 20 ? (nd + 9) / 10 : 1;
    for (int i = 0; i < nd; i += every)
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" class=\"ax\" text-anchor=\"middle\">%.0f</text>\n",
                L + (i + 0.5) * bw, T + PH + 13, s[i].step);
    fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"ax\" text-anchor=\"middle\">step</text>\n",
            L + PW / 2, H - 4);
    fputs("</svg>\n", f);
}

void rp_sec_steps(FILE *f, const rp_run *r, int n) {
    fputs("<section id=\"steps\"><h2>Step time and loss per step</h2>\n", f);
    int any = 0;
    for (int i = 0; i < n; i++) any |= r[i].run && cJSON_GetArraySize(rp_get(r[i].run, "steps", NULL)) > 0;
    if (!any) {
        fputs("<p class=\"note\">No run JSON with steps among the inputs.</p></section>\n", f);
        return;
    }
    static const char *const names[] = {"warm-up", "timed", "outlier", "loss"};
    static const char *const cols[] = {"#c7c7c7", "#f28e2b", "#d62728", "#7b3294"};
    fputs("<p class=\"note\">Every step the run took (the run JSON's <code>steps[]</code>), "
          "warm-up included: bars its wall time, the line its loss (right axis), dashed the "
          "median of the timed steps. An outlier is a timed step further from that median than "
          "three scaled median absolute deviations and than 10% of it.</p>\n",
          f);
    rp_svg_legend(f, 4, names, cols);
    fputs("<div class=\"row\">\n", f);
    rp_step_stats_t st[RP_MAX_RUNS];
    int has[RP_MAX_RUNS] = {0};
    char outl[RP_MAX_RUNS][256];
    double warm_ms[RP_MAX_RUNS], loss0[RP_MAX_RUNS], loss1[RP_MAX_RUNS];
    int nwarm[RP_MAX_RUNS];
    for (int i = 0; i < n; i++) {
        step_row *s = NULL;
        int m = r[i].run ? read_steps(rp_get(r[i].run, "steps", NULL), &s) : 0;
        if (m <= 0) {
            free(s);
            continue;
        }
        double *ms = malloc((size_t)m * sizeof *ms);
        int *timed = malloc((size_t)m * sizeof *timed);
        if (!ms || !timed) {
            free(ms), free(timed), free(s);
            continue;
        }
        warm_ms[i] = 0, nwarm[i] = 0, loss0[i] = loss1[i] = NAN;
        for (int k = 0; k < m; k++) {
            ms[k] = s[k].ms;
            timed[k] = !s[k].warm && !s[k].replay;
            if (s[k].warm) warm_ms[i] += s[k].ms, nwarm[i]++;
            if (s[k].has_loss) {
                if (isnan(loss0[i])) loss0[i] = s[k].loss;
                loss1[i] = s[k].loss;
            }
        }
        rp_step_stats(ms, timed, m, &st[i]);
        size_t used = 0;
        outl[i][0] = 0;
        for (int k = 0; k < m; k++)
            if (timed[k] && rp_step_outlier(&st[i], s[k].ms) && used + 40 < sizeof outl[i])
                used += (size_t)snprintf(outl[i] + used, sizeof outl[i] - used, "%s%.0f (%.1f ms)",
                                         used ? ", " : "", s[k].step, s[k].ms);
        has[i] = 1;
        fputs("<div><b>", f);
        rp_esc(f, r[i].label);
        fprintf(f, "</b>: %d step%s%s\n", m, m == 1 ? "" : "s",
                m > MAX_DRAWN ? " (the first 4000 drawn)" : "");
        chart(f, s, m, &st[i]);
        fputs("</div>\n", f);
        free(ms), free(timed), free(s);
    }
    fputs("</div><table class=\"steps\"><tr><th>run</th><th>timed steps</th><th>mean ms</th>"
          "<th>median</th><th>min</th><th>max</th><th>std dev</th><th>CV %</th>"
          "<th>warm-up ms (mean)</th><th>loss first \xe2\x86\x92 last</th><th>outliers</th></tr>\n",
          f);
    for (int i = 0; i < n; i++) {
        if (!has[i]) continue;
        fputs("<tr><td>", f);
        rp_esc(f, r[i].label);
        fprintf(f, "</td><td>%d</td><td>%.3f</td><td>%.3f</td><td>%.3f</td><td>%.3f</td>"
                   "<td>%.3f</td><td>%.1f</td><td>",
                st[i].n, st[i].mean, st[i].median, st[i].min, st[i].max, st[i].sd,
                st[i].mean > 0 ? 100 * st[i].sd / st[i].mean : 0);
        if (nwarm[i]) fprintf(f, "%.3f", warm_ms[i] / nwarm[i]);
        else fputs("-", f);
        fputs("</td><td>", f);
        if (!isnan(loss0[i])) fprintf(f, "%.4f \xe2\x86\x92 %.4f", loss0[i], loss1[i]);
        else fputs("-", f);
        fputs("</td><td class=\"outliers\" style=\"text-align:left\">", f);
        rp_esc(f, outl[i][0] ? outl[i] : st[i].n < 3 ? "(fewer than 3 timed steps)" : "none");
        fputs("</td></tr>\n", f);
    }
    fputs("</table></section>\n", f);
}
