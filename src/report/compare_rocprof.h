/* What a rocprofv3 --stats CSV holds (compare_rocprof.c), for compare and
 * report, which read only its kernel table. */
#ifndef TF_REPORT_COMPARE_ROCPROF_H
#define TF_REPORT_COMPARE_ROCPROF_H

/* rocprofv3 --stats summaries that are not kernel_stats.csv: what one holds
 * ("memory copy", "HIP API", ...) by its file name; or by its rows, read in
 * order: the kind all rows so far share (sofar, the previous call's result)
 * with row `name` added (first: it is the first row), NULL once a row may be
 * a kernel. NULL where it may be a kernel table (compare_rocprof.c). */
const char *tf_cmp_stats_kind_of_path(const char *path);
const char *tf_cmp_stats_kind_of_rows(const char *sofar, const char *name, int first);

#endif
