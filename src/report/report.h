/* `tinyfold report`: the runs it reads (report_load.c), the SVG pieces it
 * draws with (report_svg.c) and the page (report_html.c). */
#ifndef TF_REPORT_REPORT_H
#define TF_REPORT_REPORT_H

#include <stddef.h>
#include <stdio.h>

#include <cJSON.h>

#define RP_MAX_RUNS 8

typedef struct {
    char name[200];
    double calls, total_ns;
} rp_kernel;

typedef struct {
    char label[64];
    const char *path;
    cJSON *doc;            /* summary.json or run JSON; NULL for a kernel_stats.csv */
    const cJSON *run;      /* the run JSON (doc or doc["run"]); NULL when absent */
    const cJSON *profile;  /* doc when a profiler summary */
    cJSON *trace;          /* the profile directory's trace.json, when present */
    rp_kernel *kernels;    /* by total time, descending */
    size_t nkernels;
    int from_csv;          /* the kernels came from a rocprofv3-style kernel_stats.csv */
    char file[4200];       /* the file read for path (a directory's summary.json) */
    char trace_path[4200]; /* the trace.json read beside it, "" when none */
} rp_run;

/* Reads one RUN argument: a profile directory, a summary.json / run JSON,
 * or a kernel_stats.csv. A JSON with a "points" array is a scaling sweep:
 * *scaling takes it (the caller frees) and r stays empty. 0 ok, else one
 * line in err. */
int rp_load(const char *path, rp_run *r, cJSON **scaling, char *err, size_t errlen);
void rp_free(rp_run *r);
const cJSON *rp_get(const cJSON *o, const char *a, const char *b);
double rp_num(const cJSON *o, const char *a, const char *b, double dflt);
/* the same as an int: clamped to int's range, dflt when absent or NaN */
int rp_int(const cJSON *o, const char *a, const char *b, int dflt);
/* The one output check (fileio/outcheck.h) of --out against every file the
 * runs were read from (paths[np]: the arguments, runs[n]: what was read for
 * them). 0 ok, else one line in err. */
int rp_check_out(const char *out, const char *const *paths, int np, const rp_run *runs, int n,
                 char *err, size_t errlen);
/* 0 if the runs are of one problem, else one line in err naming the knob */
int rp_check_problem(const rp_run *r, int n, char *err, size_t errlen);

/* ---- SVG and HTML pieces (report_svg.c) ---- */
void rp_esc(FILE *f, const char *s);               /* HTML/XML text */
const char *rp_module_color(const char *module);   /* fixed colour per module name */
const char *rp_palette(int i);
void rp_fmt_si(char *buf, size_t n, double v, const char *unit); /* 1.23 G{unit} */
/* horizontal bars, one per label, value text and optional ratio at the end */
void rp_svg_hbars(FILE *f, int n, const char *const *labels, const double *v, const char *unit,
                  int prec, const char *color, int ratios);
/* stacked horizontal bars: rows x segs values, seg names and colours */
void rp_svg_stacked(FILE *f, int rows, const char *const *row_labels, int segs,
                    const char *const *seg_names, const char *const *seg_colors,
                    const double *v /* rows * segs */, const char *unit, double scale);
void rp_svg_legend(FILE *f, int n, const char *const *names, const char *const *colors);

/* ---- panels in files of their own ---- */
/* The spread of the timed steps' times (timed[i] != 0), in ms. */
typedef struct {
    int n;
    double mean, median, min, max, sd, mad, threshold;
} rp_step_stats_t;
void rp_step_stats(const double *ms, const int *timed, int n, rp_step_stats_t *s);
/* 1 when ms is an outlier: further from the median than the threshold
 * (three scaled MADs and 10% of the median), given at least 3 timed steps */
int rp_step_outlier(const rp_step_stats_t *s, double ms);
void rp_sec_steps(FILE *f, const rp_run *r, int n);   /* report_steps.c */
void rp_sec_memtime(FILE *f, const rp_run *r, int n); /* report_memtime.c */
/* report_kdiff.c: a kernel's change from a to b (ms), given where it ran:
 * "added", "removed", "faster", "slower" (beyond 5%) or "same" */
const char *rp_kdiff_status(int in_a, int in_b, double a, double b);
void rp_sec_kdiff(FILE *f, const rp_run *r, int n);
/* report_ranks.c: per rank of a profile of several ranks, nothing for one */
void rp_sec_ranks(FILE *f, const rp_run *r, int n);

#endif
