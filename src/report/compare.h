/* compare: the table model shared by compare.c (reading runs, building rows),
 * compare_render.c (table, markdown, csv) and compare_json.c (json). */
#ifndef TF_REPORT_COMPARE_H
#define TF_REPORT_COMPARE_H

#include <stddef.h>
#include <stdio.h>

#define CMP_MAX_RUNS 16

typedef enum { CMP_TABLE = 0, CMP_MARKDOWN = 1, CMP_CSV = 2, CMP_JSON = 3 } cmp_format;

/* One row: a numeric value per run (with ratios vs the first run) or text.
 * label is whole (a kernel's name is never cut here); on kernel rows its
 * first name_len bytes are the kernel's name and the rest, after a space,
 * what the row holds ("ms", "calls", a counter's metric). */
typedef struct {
    char *label;              /* heap, owned by the row */
    size_t name_len;          /* 0: not a kernel row */
    int text;                 /* 1: s[] holds text cells, no ratios */
    double v[CMP_MAX_RUNS];
    int has[CMP_MAX_RUNS];
    char s[CMP_MAX_RUNS][48];
    int prec;                 /* decimals of numeric cells */
} cmp_row;

typedef struct {
    char title[64];
    cmp_row *rows;
    size_t n, cap;
} cmp_section;

typedef struct {
    int nruns;
    char labels[CMP_MAX_RUNS][64];
    const char *paths[CMP_MAX_RUNS];
    cmp_section sec[4];
    int nsec;
} cmp_table;

void cmp_render(const cmp_table *t, cmp_format fmt, FILE *out);
/* 0, or -1 out of memory (nothing printed) */
int cmp_render_json(const cmp_table *t, FILE *out);

/* The width at which the text and markdown tables start shortening kernel
 * names (head...tail): they widen it until distinct names stay distinct. */
#define CMP_NAME_WIDTH 72

/* compare over inputs in memory (texts[i] of lens[i] bytes, NUL-terminated,
 * named labels[i]; JSON or a kernel_stats.csv, told apart as for files):
 * what `tinyfold compare` does after reading its files, for
 * tests and the fuzz target. format is a cmp_format. Returns the exit status
 * (errors: one line on stderr). */
int tf_compare_texts(int n, const char *const *labels, const char *const *texts,
                     const size_t *lens, int force, int format, FILE *out);

/* rocprofv3 --stats summaries that are not kernel_stats.csv: what one holds
 * ("memory copy", "HIP API", ...) by its file name; or by its rows, read in
 * order: the kind all rows so far share (sofar, the previous call's result)
 * with row `name` added (first: it is the first row), NULL once a row may be
 * a kernel. NULL where it may be a kernel table (compare_rocprof.c). */
const char *tf_cmp_stats_kind_of_path(const char *path);
const char *tf_cmp_stats_kind_of_rows(const char *sofar, const char *name, int first);

#endif
