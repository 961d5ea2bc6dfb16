/* Renders a compare table as aligned text, markdown or CSV. Every numeric
 * row of run i > 0 is followed by its ratio to the first run. */
#include <string.h>

#include "io/text_escape.h"
#include "prof/compare.h"

/* Cell c of row r: c = 0 is the label, then per run i: value, and for i > 0 ratio. */
static void cell(const cmp_table *t, const cmp_row *r, int col, char *buf, size_t n) {
    if (col == 0) {
        snprintf(buf, n, "%s", r->label);
        return;
    }
    int k = col - 1, run, ratio = 0;
    /* columns: run0, run1, ratio1, run2, ratio2, ... */
    if (k == 0) run = 0;
    else run = 1 + (k - 1) / 2, ratio = (k - 1) % 2;
    if (run >= t->nruns) {
        buf[0] = 0;
        return;
    }
    if (r->text) {
        snprintf(buf, n, "%s", ratio ? "" : r->s[run]);
        return;
    }
    if (!ratio) {
        if (r->has[run]) snprintf(buf, n, "%.*f", r->prec, r->v[run]);
        else snprintf(buf, n, "-");
        return;
    }
    if (r->has[run] && r->has[0] && r->v[0] != 0.0) snprintf(buf, n, "%.2fx", r->v[run] / r->v[0]);
    else snprintf(buf, n, "-");
}

static int ncols(const cmp_table *t) { return 1 + 1 + 2 * (t->nruns - 1); }

static void header(const cmp_table *t, int col, char *buf, size_t n) {
    if (col == 0) {
        snprintf(buf, n, "Metric");
        return;
    }
    int k = col - 1;
    if (k == 0) snprintf(buf, n, "%s", t->labels[0]);
    else if ((k - 1) % 2 == 0) snprintf(buf, n, "%s", t->labels[1 + (k - 1) / 2]);
    else snprintf(buf, n, "vs %s", t->labels[0]);
}

/* Every cell and header as printed: text from the files (names, config
 * strings, paths) with control characters escaped, and '|' in markdown
 * (io/text_escape.h). */
static int esc_flags(cmp_format fmt) { return fmt == CMP_MARKDOWN ? TF_ESC_MARKDOWN : 0; }

static void cell_esc(const cmp_table *t, const cmp_row *r, int col, cmp_format fmt, char *buf,
                     size_t n) {
    char raw[256];
    cell(t, r, col, raw, sizeof raw);
    tf_text_escape(buf, n, raw, esc_flags(fmt));
}

static void header_esc(const cmp_table *t, int col, cmp_format fmt, char *buf, size_t n) {
    char raw[256];
    header(t, col, raw, sizeof raw);
    tf_text_escape(buf, n, raw, esc_flags(fmt));
}

static void csv_field(FILE *out, const char *s) {
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"') fputc('"', out);
        fputc(*s, out);
    }
    fputc('"', out);
}

void cmp_render(const cmp_table *t, cmp_format fmt, FILE *out) {
    int nc = ncols(t);
    char buf[1024];
    if (fmt == CMP_CSV) {
        fputs("\"section\"", out);
        for (int c = 0; c < nc; c++) {
            header_esc(t, c, fmt, buf, sizeof buf);
            fputc(',', out);
            csv_field(out, buf);
        }
        fputc('\n', out);
        for (int s = 0; s < t->nsec; s++)
            for (size_t r = 0; r < t->sec[s].n; r++) {
                csv_field(out, t->sec[s].title);
                for (int c = 0; c < nc; c++) {
                    cell_esc(t, &t->sec[s].rows[r], c, fmt, buf, sizeof buf);
                    fputc(',', out);
                    csv_field(out, buf);
                }
                fputc('\n', out);
            }
        return;
    }
    for (int i = 0; i < t->nruns; i++) {
        char label[4 * sizeof t->labels[i]], path[1024];
        tf_text_escape(label, sizeof label, t->labels[i], esc_flags(fmt));
        tf_text_escape(path, sizeof path, t->paths[i], esc_flags(fmt));
        fprintf(out, "%s%s = %s\n", fmt == CMP_MARKDOWN ? "- " : "", label, path);
    }
    /* one column width for all sections, so the tables line up */
    int w[1 + 2 * CMP_MAX_RUNS] = {0};
    for (int c = 0; c < nc; c++) {
        header_esc(t, c, fmt, buf, sizeof buf);
        w[c] = (int)strlen(buf);
    }
    for (int s = 0; s < t->nsec; s++)
        for (size_t r = 0; r < t->sec[s].n; r++)
            for (int c = 0; c < nc; c++) {
                cell_esc(t, &t->sec[s].rows[r], c, fmt, buf, sizeof buf);
                int l = (int)strlen(buf);
                if (l > w[c]) w[c] = l;
            }
    for (int s = 0; s < t->nsec; s++) {
        if (!t->sec[s].n) continue;
        fputc('\n', out);
        if (fmt == CMP_MARKDOWN) fprintf(out, "### %s\n\n", t->sec[s].title);
        else fprintf(out, "%s\n", t->sec[s].title);
        const char *sep = fmt == CMP_MARKDOWN ? " | " : "  ";
        if (fmt == CMP_MARKDOWN) fputs("| ", out);
        for (int c = 0; c < nc; c++) {
            header_esc(t, c, fmt, buf, sizeof buf);
            fprintf(out, c ? "%s%*s" : "%s%-*s", c ? sep : "", w[c], buf);
        }
        fputs(fmt == CMP_MARKDOWN ? " |\n" : "\n", out);
        if (fmt == CMP_MARKDOWN) {
            fputs("|", out);
            for (int c = 0; c < nc; c++) {
                for (int k = 0; k < w[c] + 1; k++) fputc('-', out);
                fputs(c ? ":|" : "-|", out);
            }
            fputc('\n', out);
        }
        for (size_t r = 0; r < t->sec[s].n; r++) {
            if (fmt == CMP_MARKDOWN) fputs("| ", out);
            for (int c = 0; c < nc; c++) {
                cell_esc(t, &t->sec[s].rows[r], c, fmt, buf, sizeof buf);
                fprintf(out, c ? "%s%*s" : "%s%-*s", c ? sep : "", w[c], buf);
            }
            fputs(fmt == CMP_MARKDOWN ? " |\n" : "\n", out);
        }
    }
}
