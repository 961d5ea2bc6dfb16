/* User data files (safetensors): "msa_tokens" [n,S,N] I32 or I64 with every
 * value in [0,21), "pair_features" [n,N,N,65] F32 and "target_distances"
 * [n,N,N,1] (or [n,N,N]) F32, all finite; n >= 1 the same in all three.
 * The file is read into memory at open and every value checked there;
 * batches are copied out of that image on demand, so a file changed or
 * truncated on disk during a run is never seen. */
#ifndef TF_IO_DATAFILE_H
#define TF_IO_DATAFILE_H

#include <stddef.h>

#include "tinyfold.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TF_DATA_VOCAB 21
#define TF_DATA_PAIR_DIM 65

typedef struct tf_datafile tf_datafile;

tf_status tf_datafile_open(const char *path, tf_datafile **d, char *err, size_t errlen);
/* The same checks over an image in memory (borrowed: it must outlive *d);
 * label names it in messages. */
tf_status tf_datafile_parse(const void *buf, size_t len, const char *label, tf_datafile **d,
                            char *err, size_t errlen);
int tf_datafile_count(const tf_datafile *d);
int tf_datafile_S(const tf_datafile *d);
int tf_datafile_N(const tf_datafile *d);
/* Fills b (allocated by the caller with b->S, b->N equal to the file's, b->B
 * set): sample j of step = (step*B + j) mod count. */
void tf_datafile_batch(const tf_datafile *d, long step, tf_batch *b);
void tf_datafile_close(tf_datafile *d);

#ifdef __cplusplus
}
#endif
#endif
