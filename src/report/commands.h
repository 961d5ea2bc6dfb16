/* The report library's two commands, which read what runs and the profiler
 * wrote (run JSON, summary.json, kernel_stats.csv, trace.json) and render
 * it: tables (compare*.c) and an HTML page (report_*.c). */
#ifndef TF_REPORT_COMMANDS_H
#define TF_REPORT_COMMANDS_H

#ifdef __cplusplus
extern "C" {
#endif

/* `tinyfold compare A B ...`; argv[0] is "compare"; returns the exit status. */
int tf_compare_main(int argc, char **argv);
/* `tinyfold report RUN... --out FILE`; argv[0] is "report"; returns the exit status. */
int tf_report_main(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif
