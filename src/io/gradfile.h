/* Gradient files (safetensors), for comparing gradients with the PyTorch
 * reference: "loss" F32 [1], "pred" F32 [B,N,N,1], "grad.<name>" F32 for every
 * trainable parameter (tf_param_table order and shapes), and in "__metadata__":
 * "format": "tinyfold-grads", "version": "1", "tinyfold_version",
 * "tinyfold_config". */
#ifndef TF_IO_GRADFILE_H
#define TF_IO_GRADFILE_H

#include <stddef.h>

#include "tinyfold.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Gradients are read from the trainer (tf_trainer_get_grads, as left by
 * tf_trainer_grad); pred (required) holds npred = B*N*N floats. Atomic like
 * every safetensors write. */
tf_status tf_gradfile_save(const char *path, tf_trainer *t, float loss, const float *pred,
                           long npred, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
