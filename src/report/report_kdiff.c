/* The report's kernel-by-kernel difference: each later run against the
 * first, kernel by kernel (matched by name): added, removed, faster, slower
 * or the same, ordered by the change in total time. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/report.h"

#define MAX_ROWS 30   /* rows shown per pair; the counts take them all */
#define SAME_FRAC 0.05 /* within 5% either way: the same */

typedef struct {
    const char *name;
    double a, b; /* ms (per step when both runs are profiles, else in all) */
    int in_a, in_b;
} kd_row;

static int by_change(const void *x, const void *y) {
    double p = fabs(((const kd_row *)x)->b - ((const kd_row *)x)->a);
    double q = fabs(((const kd_row *)y)->b - ((const kd_row *)y)->a);
    return p < q ? 1 : p > q ? -1 : strcmp(((const kd_row *)x)->name, ((const kd_row *)y)->name);
}

const char *rp_kdiff_status(int in_a, int in_b, double a, double b) {
    if (!in_a) return "added";
    if (!in_b) return "removed";
    if (b < a * (1 - SAME_FRAC)) return "faster";
    if (b > a * (1 + SAME_FRAC)) return "slower";
    return "same";
}

static double per_step(const rp_run *r, int by_step) {
    double s = by_step ? rp_num(r->profile, "steps_collected", NULL, 1) : 1;
    return s > 0 ? s : 1;
}

static void pair(FILE *f, const rp_run *A, const rp_run *B) {
    size_t cap = A->nkernels + B->nkernels;
    kd_row *rows = calloc(cap ? cap : 1, sizeof *rows);
    if (!rows) return;
    int by_step = A->profile && B->profile;
    double sa = per_step(A, by_step), sb = per_step(B, by_step);
    size_t n = 0;
    for (size_t i = 0; i < A->nkernels; i++) {
        rows[n].name = A->kernels[i].name;
        rows[n].a = A->kernels[i].total_ns / sa * 1e-6;
        rows[n++].in_a = 1;
    }
    for (size_t j = 0; j < B->nkernels; j++) {
        size_t k = 0;
        while (k < A->nkernels && strcmp(rows[k].name, B->kernels[j].name)) k++;
        if (k == A->nkernels) {
            k = n++;
            rows[k].name = B->kernels[j].name;
        }
        rows[k].b += B->kernels[j].total_ns / sb * 1e-6;
        rows[k].in_b = 1;
    }
    qsort(rows, n, sizeof *rows, by_change);
    static const char *const kinds[5] = {"added", "removed", "faster", "slower", "same"};
    int count[5] = {0};
    double ta = 0, tb = 0, delta[5] = {0};
    for (size_t k = 0; k < n; k++) {
        const char *st = rp_kdiff_status(rows[k].in_a, rows[k].in_b, rows[k].a, rows[k].b);
        for (int c = 0; c < 5; c++)
            if (!strcmp(st, kinds[c])) count[c]++, delta[c] += rows[k].b - rows[k].a;
        ta += rows[k].a;
        tb += rows[k].b;
    }
    const char *unit = by_step ? "ms/step" : "ms";
    fputs("<div><p class=\"note\"><b>", f);
    rp_esc(f, B->label);
    fputs("</b> against <b>", f);
    rp_esc(f, A->label);
    fprintf(f, "</b>: kernel time %.3f \xe2\x86\x92 %.3f %s (%+.3f, %.2f\xc3\x97).</p>\n", ta, tb,
            unit, tb - ta, ta > 0 ? tb / ta : 0);
    fputs("<table class=\"kdiff-sum\"><tr><th>change</th><th>kernels</th><th>\xce\x94 ", f);
    fputs(unit, f);
    fputs("</th></tr>\n", f);
    for (int c = 0; c < 5; c++)
        fprintf(f, "<tr><td>%s</td><td>%d</td><td>%+.3f</td></tr>\n", kinds[c], count[c],
                delta[c]);
    fprintf(f, "</table><table class=\"kdiff\"><tr><th>kernel</th><th>change</th><th>");
    rp_esc(f, A->label);
    fprintf(f, " %s</th><th>", unit);
    rp_esc(f, B->label);
    fprintf(f, " %s</th><th>\xce\x94 %s</th><th>ratio</th></tr>\n", unit, unit);
    for (size_t k = 0; k < n && k < MAX_ROWS; k++) {
        const kd_row *x = &rows[k];
        const char *st = rp_kdiff_status(x->in_a, x->in_b, x->a, x->b);
        const char *col = !strcmp(st, "faster") || !strcmp(st, "removed") ? "#2e7d32"
                          : !strcmp(st, "same")                           ? "#555"
                                                                          : "#b03a2e";
        fputs("<tr><td class=\"name\" title=\"", f);
        rp_esc(f, x->name);
        fputs("\">", f);
        rp_esc(f, x->name);
        fprintf(f, "</td><td class=\"st\" style=\"color:%s\">%s</td>", col, st);
        if (x->in_a) fprintf(f, "<td>%.3f</td>", x->a);
        else fputs("<td>-</td>", f);
        if (x->in_b) fprintf(f, "<td>%.3f</td>", x->b);
        else fputs("<td>-</td>", f);
        fprintf(f, "<td>%+.3f</td>", x->b - x->a);
        if (x->in_a && x->in_b && x->a > 0) fprintf(f, "<td>%.2f\xc3\x97</td></tr>\n", x->b / x->a);
        else fputs("<td>-</td></tr>\n", f);
    }
    if (n > MAX_ROWS)
        fprintf(f, "<tr><td colspan=\"6\" style=\"text-align:left\">%zu more kernels, each "
                   "changed less</td></tr>\n",
                n - MAX_ROWS);
    fputs("</table></div>\n", f);
    free(rows);
}

void rp_sec_kdiff(FILE *f, const rp_run *r, int n) {
    int first = -1, pairs = 0;
    for (int i = 0; i < n; i++)
        if (r[i].nkernels) {
            if (first < 0) first = i;
            else pairs++;
        }
    if (!pairs) return; /* one run: nothing to difference */
    fputs("<section id=\"kdiff\"><h2>Kernel by kernel: each run against the first</h2>\n"
          "<p class=\"note\">Kernels matched by name; added: only in the later run, removed: "
          "only in the first, faster or slower: more than 5% either way, else the same. Rows "
          "by the change in total time, largest first (per step when both are profiles, else "
          "over the whole file).</p><div class=\"row\">\n",
          f);
    for (int i = first + 1; i < n; i++)
        if (r[i].nkernels) pair(f, &r[first], &r[i]);
    fputs("</div></section>\n", f);
}
