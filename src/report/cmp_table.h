/* compare's table: the rows that compare.c builds from the runs it read and
 * that compare_render.c (table, markdown, csv) and compare_json.c (json)
 * print. */
#ifndef TF_REPORT_CMP_TABLE_H
#define TF_REPORT_CMP_TABLE_H

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

#endif
