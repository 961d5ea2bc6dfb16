/* tf_config <-> JSON, with the key names of the run JSON's "config" object
 * (plus "vocab" and "pair_input_dim"). Used for the "tinyfold_config"
 * metadata of checkpoints and gradient files. */
#ifndef TF_IO_CONFIG_JSON_H
#define TF_IO_CONFIG_JSON_H

#include <stddef.h>

#include "tinyfold.h"

#ifdef __cplusplus
extern "C" {
#endif

struct cJSON;

/* A new cJSON object (NULL on out of memory). The seed is a number when it is
 * exactly representable as a double (< 2^53), otherwise a decimal string. */
struct cJSON *tf_io_config_to_json(const tf_config *c);
/* Malloc'd unformatted JSON text, NULL on out of memory. */
char *tf_io_config_to_json_string(const tf_config *c);
/* Starts from tf_config_default, then applies the keys present. The model
 * shape keys (msa_dim, pair_dim, n_blocks, n_heads_msa, n_heads_pair,
 * outer_dim) are required; unknown keys are ignored; a key of the wrong type
 * or range is an error naming it (TF_ERR_USAGE). */
tf_status tf_io_config_from_json(tf_config *c, const struct cJSON *j, char *err, size_t errlen);
tf_status tf_io_config_from_json_string(tf_config *c, const char *text, char *err, size_t errlen);

/* The first model-shape field where a and b differ, writing
 * "<field>=<a> but <b>" style names/values into the out args; 0 if none. */
int tf_io_config_model_diff(const tf_config *a, const tf_config *b, const char **field, long *va,
                            long *vb);

#ifdef __cplusplus
}
#endif
#endif
