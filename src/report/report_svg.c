/* The report's drawing pieces: escaping, colours, number formatting, bar
 * charts. Every shape carries a <title> with its numbers (shown on hover). */
#include <math.h>
#include <string.h>

#include "report/report.h"

void rp_esc(FILE *f, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

/* A qualitative palette (colour-blind friendly order first). */
static const char *const pal[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
                                  "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
                                  "#1f77b4", "#8cd17d", "#d37295", "#a0cbe8"};

const char *rp_palette(int i) {
    return pal[(unsigned)i % (sizeof pal / sizeof pal[0])];
}

/* The model's modules keep one colour on every picture of every run. */
const char *rp_module_color(const char *m) {
    static const char *const mods[] = {
        "msa_row_attention",     "msa_column_attention",  "msa_transition",
        "outer_product_mean",    "triangle_mult_outgoing", "triangle_mult_incoming",
        "triangle_attn_starting", "triangle_attn_ending", "pair_transition",
        "embedding",             "structure_module",      "loss"};
    static const char *const cols[] = {"#4e79a7", "#a0cbe8", "#76b7b2", "#b07aa1",
                                       "#f28e2b", "#ffbe7d", "#e15759", "#ff9da7",
                                       "#59a14f", "#9c755f", "#edc948", "#bab0ac"};
    for (size_t i = 0; i < sizeof mods / sizeof mods[0]; i++)
        if (strcmp(m, mods[i]) == 0) return cols[i];
    if (strcmp(m, "optimizer_step") == 0) return "#8cd17d";
    if (strcmp(m, "data_loading") == 0) return "#d7d7d7";
    return "#c9c9c9";
}

void rp_fmt_si(char *buf, size_t n, double v, const char *unit) {
    static const char *const pre[] = {"", "k", "M", "G", "T", "P"};
    int i = 0;
    double a = fabs(v);
    while (a >= 1000.0 && i < 5) {
        a /= 1000.0;
        v /= 1000.0;
        i++;
    }
    snprintf(buf, n, "%.3g %s%s", v, pre[i], unit);
}

#define LABEL_W 130
#define ROW_H 24

void rp_svg_hbars(FILE *f, int n, const char *const *labels, const double *v, const char *unit,
                  int prec, const char *color, int ratios) {
    const int bar_w = 210, w = LABEL_W + bar_w + 150, h = n * ROW_H + 8;
    double mx = 0;
    for (int i = 0; i < n; i++) mx = v[i] > mx ? v[i] : mx;
    fprintf(f, "<svg class=\"chart\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n", w, h, w,
            h);
    for (int i = 0; i < n; i++) {
        double bw = mx > 0 ? v[i] / mx * bar_w : 0;
        int y = 4 + i * ROW_H;
        fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"lab\" text-anchor=\"end\">", LABEL_W - 8,
                y + 15);
        rp_esc(f, labels[i]);
        fprintf(f, "</text><rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\">"
                   "<title>",
                LABEL_W, y + 2, bw, ROW_H - 6, color);
        rp_esc(f, labels[i]);
        fprintf(f, ": %.*f %s</title></rect>", prec, v[i], unit);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" class=\"val\">%.*f %s", LABEL_W + bw + 6, y + 15,
                prec, v[i], unit);
        if (ratios && i > 0 && v[0] > 0)
            fprintf(f, "<tspan class=\"ratio\"> %.2f\xc3\x97</tspan>", v[i] / v[0]);
        fputs("</text>\n", f);
    }
    fputs("</svg>\n", f);
}

void rp_svg_stacked(FILE *f, int rows, const char *const *row_labels, int segs,
                    const char *const *seg_names, const char *const *seg_colors, const double *v,
                    const char *unit, double scale) {
    /* module names are long: a wider label column, thinner rows */
    const int SL = 180, SR = 20; /* module names are long: a wider label column, thinner rows */
    const int bar_w = 440, w = SL + bar_w + 110, h = rows * SR + 8;
    double mx = scale;
    if (mx <= 0) {
        for (int r = 0; r < rows; r++) {
            double t = 0;
            for (int s = 0; s < segs; s++) t += v[r * segs + s];
            mx = t > mx ? t : mx;
        }
    }
    fprintf(f, "<svg class=\"chart\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n", w, h, w,
            h);
    for (int r = 0; r < rows; r++) {
        int y = 4 + r * SR;
        double x = SL, t = 0;
        for (int s = 0; s < segs; s++) t += v[r * segs + s];
        fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"lab\" text-anchor=\"end\">", SL - 8,
                y + 13);
        rp_esc(f, row_labels[r]);
        fputs("</text>", f);
        for (int s = 0; s < segs; s++) {
            double val = v[r * segs + s];
            if (val <= 0 || mx <= 0) continue;
            double bw = val / mx * bar_w;
            fprintf(f, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\" "
                       "stroke=\"#fff\" stroke-width=\"0.5\"><title>",
                    x, y + 2, bw, SR - 6, seg_colors[s]);
            rp_esc(f, row_labels[r]);
            fputs(" \xc2\xb7 ", f);
            rp_esc(f, seg_names[s]);
            fprintf(f, ": %.3f %s (%.1f%%)</title></rect>", val, unit, t > 0 ? 100 * val / t : 0);
            x += bw;
        }
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" class=\"val\">%.2f %s</text>\n", x + 6, y + 13, t,
                unit);
    }
    fputs("</svg>\n", f);
}

void rp_svg_legend(FILE *f, int n, const char *const *names, const char *const *colors) {
    fputs("<div class=\"legend\">", f);
    for (int i = 0; i < n; i++) {
        fprintf(f, "<span><i style=\"background:%s\"></i>", colors[i]);
        rp_esc(f, names[i]);
        fputs("</span>", f);
    }
    fputs("</div>\n", f);
}
