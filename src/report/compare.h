/* `tinyfold compare` over texts in memory (commands.h has the command). */
#ifndef TF_REPORT_COMPARE_H
#define TF_REPORT_COMPARE_H

#include <stddef.h>
#include <stdio.h>

/* compare over inputs in memory (texts[i] of lens[i] bytes, NUL-terminated,
 * named labels[i]; JSON or a kernel_stats.csv, told apart as for files):
 * what `tinyfold compare` does after reading its files, for tests and the
 * fuzz target. format is a cmp_format (cmp_table.h). Returns the exit
 * status (errors: one line on stderr). */
int tf_compare_texts(int n, const char *const *labels, const char *const *texts,
                     const size_t *lens, int force, int format, FILE *out);

#endif
