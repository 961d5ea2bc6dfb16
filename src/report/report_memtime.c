/* The report's memory-over-time panel: the trace's counter track ("ph":"C"
 * events, each numeric argument one series, in MiB) drawn as steps over the
 * traced steps, one chart per run on one time scale. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/report.h"

#define MAX_SERIES 4

typedef struct {
    char name[48];
    double *t, *v; /* us, MiB */
    int n, cap;
    double lo, hi;
} series;

typedef struct {
    series s[MAX_SERIES];
    int ns;
    double t0, t1; /* the window: first to last sample or step edge */
    double steps[64][2];
    char step_names[64][32];
    int nsteps;
} memtrack;

static const char *const series_colors[MAX_SERIES] = {"#4e79a7", "#e15759", "#59a14f", "#b07aa1"};

static int add_sample(series *s, double t, double v) {
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 64;
        double *nt = realloc(s->t, (size_t)cap * sizeof *nt);
        if (!nt) return -1;
        s->t = nt;
        double *nv = realloc(s->v, (size_t)cap * sizeof *nv);
        if (!nv) return -1;
        s->v = nv;
        s->cap = cap;
    }
    if (!s->n || v < s->lo) s->lo = v;
    if (!s->n || v > s->hi) s->hi = v;
    s->t[s->n] = t;
    s->v[s->n++] = v;
    return 0;
}

static void track_free(memtrack *m) {
    for (int i = 0; i < m->ns; i++) free(m->s[i].t), free(m->s[i].v);
}

/* The counters of r's trace; 0 when it has none. */
static int read_track(const rp_run *r, memtrack *m) {
    memset(m, 0, sizeof *m);
    m->t0 = INFINITY;
    m->t1 = -INFINITY;
    const cJSON *e;
    cJSON_ArrayForEach(e, rp_get(r->trace, "traceEvents", NULL)) {
        const cJSON *ph = rp_get(e, "ph", NULL);
        if (!cJSON_IsString(ph)) continue;
        double ts = rp_num(e, "ts", NULL, NAN);
        if (!isfinite(ts)) continue;
        if (!strcmp(ph->valuestring, "X") && rp_num(e, "pid", NULL, -1) == 1 &&
            rp_num(e, "tid", NULL, -1) == 2 && m->nsteps < 64) { /* a step */
            const cJSON *nm = rp_get(e, "name", NULL);
            double te = ts + rp_num(e, "dur", NULL, 0);
            m->steps[m->nsteps][0] = ts;
            m->steps[m->nsteps][1] = te;
            snprintf(m->step_names[m->nsteps], sizeof m->step_names[0], "%s",
                     cJSON_IsString(nm) ? nm->valuestring : "step");
            m->nsteps++;
            m->t0 = fmin(m->t0, ts);
            m->t1 = fmax(m->t1, te);
            continue;
        }
        if (strcmp(ph->valuestring, "C")) continue;
        const cJSON *a;
        cJSON_ArrayForEach(a, rp_get(e, "args", NULL)) {
            if (!cJSON_IsNumber(a) || !a->string) continue;
            int k = 0;
            while (k < m->ns && strcmp(m->s[k].name, a->string)) k++;
            if (k == m->ns) {
                if (m->ns == MAX_SERIES) continue;
                snprintf(m->s[m->ns++].name, sizeof m->s[0].name, "%s", a->string);
            }
            if (add_sample(&m->s[k], ts, a->valuedouble) != 0) return 0;
            m->t0 = fmin(m->t0, ts);
            m->t1 = fmax(m->t1, ts);
        }
    }
    int any = 0;
    for (int k = 0; k < m->ns; k++) any |= m->s[k].n > 0;
    return any && m->t1 > m->t0;
}

static void chart(FILE *f, const memtrack *m, double span, double vmax) {
    const int W = 560, H = 220, L = 52, T = 14, PW = W - L - 14, PH = H - T - 34;
    double sx = PW / span;
    fprintf(f, "<svg class=\"chart memtime\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n",
            W, H, W, H);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#fbfbfd\" "
               "stroke=\"#ccc\"/>\n",
            L, T, PW, PH);
    for (int k = 0; k < m->nsteps; k++) { /* the steps, shaded in turn */
        double x0 = L + (m->steps[k][0] - m->t0) * sx, x1 = L + (m->steps[k][1] - m->t0) * sx;
        fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"><title>",
                x0, T, x1 - x0, PH, k % 2 ? "#eef2f7" : "#e3e9f1");
        rp_esc(f, m->step_names[k]);
        fprintf(f, ": %.3f ms</title></rect><text x=\"%.1f\" y=\"%d\" class=\"ax\">",
                (m->steps[k][1] - m->steps[k][0]) * 1e-3, x0 + 2, T + 10);
        rp_esc(f, m->step_names[k]);
        fputs("</text>\n", f);
    }
    for (int k = 0; k <= 4; k++) { /* time ticks */
        double x = L + k * PW / 4.0;
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" class=\"ax\" text-anchor=\"middle\">%.3g</text>\n",
                x, T + PH + 13, span * 1e-3 * k / 4);
    }
    for (int k = 0; k <= 4; k++) {
        double y = T + PH - k * PH / 4.0;
        fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>"
                   "<text x=\"%d\" y=\"%.1f\" class=\"ax\" text-anchor=\"end\">%.3g</text>\n",
                L, L + PW, y, y, L - 4, y + 3, vmax * k / 4);
    }
    for (int k = 0; k < m->ns; k++) { /* a counter holds its value until the next sample */
        const series *s = &m->s[k];
        fputs("<polyline class=\"counter\" fill=\"none\" stroke-width=\"2\" stroke=\"", f);
        fputs(series_colors[k], f);
        fputs("\" points=\"", f);
        for (int i = 0; i < s->n; i++) {
            double x = L + (s->t[i] - m->t0) * sx, y = T + PH - s->v[i] / vmax * PH;
            if (i) fprintf(f, "%.1f,%.1f ", x, T + PH - s->v[i - 1] / vmax * PH);
            fprintf(f, "%.1f,%.1f ", x, y);
        }
        if (s->n)
            fprintf(f, "%.1f,%.1f", L + (m->t1 - m->t0) * sx, T + PH - s->v[s->n - 1] / vmax * PH);
        fputs("\"><title>", f);
        rp_esc(f, s->name);
        fprintf(f, ": %.3f to %.3f</title></polyline>\n", s->lo, s->hi);
    }
    fprintf(f, "<text x=\"%d\" y=\"10\" class=\"ax\">MiB</text>"
               "<text x=\"%d\" y=\"%d\" class=\"ax\" text-anchor=\"middle\">ms from the first "
               "traced step (axis 0 to %.3f ms)</text>\n",
            L, L + PW / 2, H - 4, span * 1e-3);
    fputs("</svg>\n", f);
}

void rp_sec_memtime(FILE *f, const rp_run *r, int n) {
    fputs("<section id=\"memtime\"><h2>Memory over time</h2>\n", f);
    memtrack m[RP_MAX_RUNS];
    memset(m, 0, sizeof m);
    int has[RP_MAX_RUNS] = {0}, any = 0;
    double span = 0, vmax = 0;
    for (int i = 0; i < n; i++) {
        if (!r[i].trace || !read_track(&r[i], &m[i])) continue;
        has[i] = any = 1;
        span = fmax(span, m[i].t1 - m[i].t0);
        for (int k = 0; k < m[i].ns; k++) vmax = fmax(vmax, m[i].s[k].hi);
    }
    if (!any) {
        fputs("<p class=\"note\">No trace.json with a memory counter among the inputs.</p>"
              "</section>\n",
              f);
        for (int i = 0; i < n; i++) track_free(&m[i]);
        return;
    }
    vmax = vmax > 0 ? vmax * 1.1 : 1;
    fputs("<p class=\"note\">The trace's counter track (<code>\"ph\":\"C\"</code>, sampled by "
          "the profiler after each traced step's forward and backward): the backend's bytes in use and the "
          "host's resident set, in MiB, over the traced steps (shaded); every chart on one time "
          "and one memory scale.</p>\n",
          f);
    const char *names[MAX_SERIES];
    int nn = 0;
    for (int i = 0; i < n && !nn; i++)
        if (has[i])
            for (int k = 0; k < m[i].ns; k++) names[nn++] = m[i].s[k].name;
    rp_svg_legend(f, nn, names, series_colors);
    fputs("<div class=\"row\">\n", f);
    for (int i = 0; i < n; i++) {
        if (!has[i]) continue;
        fputs("<div><b>", f);
        rp_esc(f, r[i].label);
        fputs("</b>\n", f);
        chart(f, &m[i], span, vmax);
        fputs("</div>\n", f);
    }
    fputs("</div><table class=\"memtime\"><tr><th>run</th><th>counter</th><th>samples</th>"
          "<th>min MiB</th><th>max MiB</th><th>last MiB</th></tr>\n",
          f);
    for (int i = 0; i < n; i++)
        for (int k = 0; has[i] && k < m[i].ns; k++) {
            const series *s = &m[i].s[k];
            fputs("<tr><td>", f);
            rp_esc(f, r[i].label);
            fputs("</td><td>", f);
            rp_esc(f, s->name);
            fprintf(f, "</td><td>%d</td><td>%.3f</td><td>%.3f</td><td>%.3f</td></tr>\n", s->n,
                    s->lo, s->hi, s->n ? s->v[s->n - 1] : 0);
        }
    fputs("</table></section>\n", f);
    for (int i = 0; i < n; i++) track_free(&m[i]);
}
