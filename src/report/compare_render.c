/* Renders a compare table as aligned text, markdown or CSV. Every numeric
 * row of run i > 0 is followed by its ratio to the first run. CSV carries
 * every label whole; the text and markdown tables show a kernel name longer
 * than their width as its head and tail around "...", the width grown until
 * no two different names look the same, and say so under the tables. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "fileio/text_escape.h"
#include "report/cmp_table.h"

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
 * (fileio/text_escape.h). */
static int esc_flags(cmp_format fmt) { return fmt == CMP_MARKDOWN ? TF_ESC_MARKDOWN : 0; }

/* shown: the label as the table shows it (NULL: r->label) */
static void cell_esc(const cmp_table *t, const cmp_row *r, const char *shown, int col,
                     cmp_format fmt, char *buf, size_t n) {
    if (col == 0) {
        tf_text_escape(buf, n, shown ? shown : r->label, esc_flags(fmt));
        return;
    }
    char raw[256];
    cell(t, r, col, raw, sizeof raw);
    tf_text_escape(buf, n, raw, esc_flags(fmt));
}

static void header_esc(const cmp_table *t, int col, cmp_format fmt, char *buf, size_t n) {
    char raw[256];
    header(t, col, raw, sizeof raw);
    tf_text_escape(buf, n, raw, esc_flags(fmt));
}

/* Moves i back (dir < 0) or forward to the start of a UTF-8 character. */
static size_t char_start(const char *s, size_t i, size_t lo, size_t hi, int dir) {
    while (i > lo && i < hi && ((unsigned char)s[i] & 0xC0) == 0x80) i += dir < 0 ? (size_t)-1 : 1;
    return i;
}

#define CMP_WINDOW 16 /* bytes shown around where clashing names first differ */

/* The label with its kernel name cut to `width` bytes as head...tail, or,
 * when diff is set, head...middle...tail with the middle the CMP_WINDOW
 * bytes from just before byte diff-1 (where the name first differs from a
 * name that would otherwise look the same); cuts at UTF-8 character
 * boundaries. A new heap string, NULL out of memory. */
static char *shorten(const cmp_row *r, size_t width, size_t diff) {
    size_t len = strlen(r->label), nl = r->name_len;
    if (nl <= width || width < 8) return strdup(r->label);
    size_t head = (width - 3) / 2 + (width - 3) % 2;
    size_t tail_at = char_start(r->label, nl - (width - 3 - head), 0, nl, 1);
    head = char_start(r->label, head, 0, nl, -1);
    size_t m0 = 0, m1 = 0; /* the middle window [m0, m1) */
    if (diff) {
        m0 = diff - 1 > 4 ? diff - 1 - 4 : 0;
        if (m0 < head) m0 = head;
        m1 = m0 + CMP_WINDOW < tail_at ? m0 + CMP_WINDOW : tail_at;
        m0 = char_start(r->label, m0, head, tail_at, -1);
        m1 = char_start(r->label, m1, head, tail_at, 1);
        if (m0 <= head) m0 = head;
    }
    size_t mid = m1 > m0 ? m1 - m0 : 0;
    char *o = malloc(head + 3 + mid + 3 + (len - tail_at) + 1), *w = o;
    if (!o) return NULL;
    memcpy(w, r->label, head);
    w += head;
    memcpy(w, "...", 3);
    w += 3;
    if (mid) {
        memcpy(w, r->label + m0, mid);
        w += mid;
        if (m1 < tail_at) {
            memcpy(w, "...", 3);
            w += 3;
        }
    }
    memcpy(w, r->label + tail_at, len - tail_at + 1);
    return o;
}

typedef struct {
    const char *shown;
    const cmp_row *row;
    size_t k;
} shown_pair;

static int by_shown(const void *a, const void *b) {
    return strcmp(((const shown_pair *)a)->shown, ((const shown_pair *)b)->shown);
}

/* Sorts pr by shown label; 1 if two different labels are shown the same. */
static int clashes(shown_pair *pr, size_t n) {
    qsort(pr, n, sizeof *pr, by_shown);
    for (size_t i = 1; i < n; i++)
        if (!strcmp(pr[i].shown, pr[i - 1].shown) && strcmp(pr[i].row->label, pr[i - 1].row->label))
            return 1;
    return 0;
}

static size_t common_prefix(const char *a, const char *b, size_t n) {
    size_t i = 0;
    while (i < n && a[i] && a[i] == b[i]) i++;
    return i;
}

/* Every row's label as the table shows it, in row order over the sections:
 * names cut at CMP_NAME_WIDTH, a name that would look like another one with
 * the window where they differ; if labels still clash, the width grows in
 * steps of 16. *cut: 1 if a name was shortened. NULL out of memory (the
 * caller prints labels whole). */
static char **shown_labels(const cmp_table *t, size_t nrows, int *cut) {
    char **sh = calloc(nrows ? nrows : 1, sizeof *sh);
    shown_pair *pr = malloc((nrows ? nrows : 1) * sizeof *pr);
    size_t *diff = calloc(nrows ? nrows : 1, sizeof *diff);
    size_t longest = 0;
    for (int s = 0; s < t->nsec; s++)
        for (size_t r = 0; r < t->sec[s].n; r++)
            if (t->sec[s].rows[r].name_len > longest) longest = t->sec[s].rows[r].name_len;
    int ok = sh && pr && diff;
    for (size_t width = CMP_NAME_WIDTH; ok; width += 16) {
        for (int pass = 0; pass < 2 && ok; pass++) {
            size_t k = 0;
            *cut = 0;
            for (int s = 0; s < t->nsec && ok; s++)
                for (size_t r = 0; r < t->sec[s].n && ok; r++, k++) {
                    const cmp_row *row = &t->sec[s].rows[r];
                    free(sh[k]);
                    sh[k] = shorten(row, width, diff[k]);
                    ok = sh[k] != NULL;
                    *cut |= row->name_len > width;
                    pr[k] = (shown_pair){sh[k], row, k};
                }
            if (!ok) break;
            if (!*cut || width >= longest || !clashes(pr, nrows)) {
                free(pr);
                free(diff);
                return sh;
            }
            /* each run of equal shown labels: where each name first differs
             * from the others of the run */
            for (size_t i = 0; i < nrows && pass == 0;) {
                size_t j = i + 1;
                while (j < nrows && !strcmp(pr[j].shown, pr[i].shown)) j++;
                for (size_t a = i; a < j && j - i > 1; a++)
                    for (size_t b = i; b < j; b++) {
                        if (a == b || !strcmp(pr[a].row->label, pr[b].row->label)) continue;
                        size_t p = common_prefix(pr[a].row->label, pr[b].row->label,
                                                 pr[a].row->name_len);
                        if (p + 1 > diff[pr[a].k]) diff[pr[a].k] = p + 1;
                    }
                i = j;
            }
        }
    }
    if (sh)
        for (size_t k = 0; k < nrows; k++) free(sh[k]);
    free(sh);
    free(pr);
    free(diff);
    *cut = 0;
    return NULL;
}

static void render_csv(const cmp_table *t, FILE *out, char *buf, size_t bufn) {
    int nc = ncols(t);
    fputs("\"section\"", out);
    for (int c = 0; c < nc; c++) {
        header_esc(t, c, CMP_CSV, buf, bufn);
        fputc(',', out);
        tf_csv_str(out, buf);
    }
    fputc('\n', out);
    for (int s = 0; s < t->nsec; s++)
        for (size_t r = 0; r < t->sec[s].n; r++) {
            tf_csv_str(out, t->sec[s].title);
            for (int c = 0; c < nc; c++) {
                cell_esc(t, &t->sec[s].rows[r], NULL, c, CMP_CSV, buf, bufn);
                fputc(',', out);
                tf_csv_str(out, buf);
            }
            fputc('\n', out);
        }
}

void cmp_render(const cmp_table *t, cmp_format fmt, FILE *out) {
    int nc = ncols(t);
    /* a label escaped takes at most 4 bytes a byte ("\xHH") */
    size_t longest = 0, nrows = 0;
    for (int s = 0; s < t->nsec; s++)
        for (size_t r = 0; r < t->sec[s].n; r++, nrows++)
            if (strlen(t->sec[s].rows[r].label) > longest) longest = strlen(t->sec[s].rows[r].label);
    size_t bufn = 4 * longest + 1024;
    char *buf = malloc(bufn);
    if (!buf) return;
    if (fmt == CMP_CSV) {
        render_csv(t, out, buf, bufn);
        free(buf);
        return;
    }
    int cut = 0;
    char **sh = shown_labels(t, nrows, &cut);
    for (int i = 0; i < t->nruns; i++) {
        char label[4 * sizeof t->labels[i]], path[1024];
        tf_text_escape(label, sizeof label, t->labels[i], esc_flags(fmt));
        tf_text_escape(path, sizeof path, t->paths[i], esc_flags(fmt));
        fprintf(out, "%s%s = %s\n", fmt == CMP_MARKDOWN ? "- " : "", label, path);
    }
    /* one column width for all sections, so the tables line up */
    int w[1 + 2 * CMP_MAX_RUNS] = {0};
    for (int c = 0; c < nc; c++) {
        header_esc(t, c, fmt, buf, bufn);
        w[c] = (int)strlen(buf);
    }
    size_t k = 0;
    for (int s = 0; s < t->nsec; s++)
        for (size_t r = 0; r < t->sec[s].n; r++, k++)
            for (int c = 0; c < nc; c++) {
                cell_esc(t, &t->sec[s].rows[r], sh ? sh[k] : NULL, c, fmt, buf, bufn);
                int l = (int)strlen(buf);
                if (l > w[c]) w[c] = l;
            }
    k = 0;
    for (int s = 0; s < t->nsec; s++) {
        if (!t->sec[s].n) continue;
        fputc('\n', out);
        if (fmt == CMP_MARKDOWN) fprintf(out, "### %s\n\n", t->sec[s].title);
        else fprintf(out, "%s\n", t->sec[s].title);
        const char *sep = fmt == CMP_MARKDOWN ? " | " : "  ";
        if (fmt == CMP_MARKDOWN) fputs("| ", out);
        for (int c = 0; c < nc; c++) {
            header_esc(t, c, fmt, buf, bufn);
            fprintf(out, c ? "%s%*s" : "%s%-*s", c ? sep : "", w[c], buf);
        }
        fputs(fmt == CMP_MARKDOWN ? " |\n" : "\n", out);
        if (fmt == CMP_MARKDOWN) {
            fputs("|", out);
            for (int c = 0; c < nc; c++) {
                for (int j = 0; j < w[c] + 1; j++) fputc('-', out);
                fputs(c ? ":|" : "-|", out);
            }
            fputc('\n', out);
        }
        for (size_t r = 0; r < t->sec[s].n; r++, k++) {
            if (fmt == CMP_MARKDOWN) fputs("| ", out);
            for (int c = 0; c < nc; c++) {
                cell_esc(t, &t->sec[s].rows[r], sh ? sh[k] : NULL, c, fmt, buf, bufn);
                fprintf(out, c ? "%s%*s" : "%s%-*s", c ? sep : "", w[c], buf);
            }
            fputs(fmt == CMP_MARKDOWN ? " |\n" : "\n", out);
        }
    }
    if (cut)
        fprintf(out, "\n%sLong kernel names are shortened to head...tail (with the part "
                     "where two names differ); --format csv or --format json prints them "
                     "whole.\n",
                fmt == CMP_MARKDOWN ? "Note: " : "");
    if (sh)
        for (size_t j = 0; j < nrows; j++) free(sh[j]);
    free(sh);
    free(buf);
}
