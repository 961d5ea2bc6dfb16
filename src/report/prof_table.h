/* The printed profile of a finished run (prof_table.c): top kernels,
 * launches per step, phase shares, time per module over all blocks, peak
 * memory, trace window, counters, warnings, and where the files went. It
 * reads the profiler's summary (prof/summary.h) and calls nothing of it. */
#ifndef TF_REPORT_PROF_TABLE_H
#define TF_REPORT_PROF_TABLE_H

#include <stdio.h>

#include "prof/summary.h"

void tf_report_prof_table(const tf_prof_summary *s, FILE *out);

#endif
