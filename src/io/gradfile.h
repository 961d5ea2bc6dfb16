/* Gradient files (safetensors), for comparing gradients with the PyTorch
 * reference: "loss" F32 [1], "pred" F32 [B,N,N,1], "grad.<name>" F32 for every
 * trainable parameter (tf_param_table order and shapes), and in "__metadata__":
 * "format": "tinyfold-grads", "version": "1", "tinyfold_version",
 * "tinyfold_config". */
#ifndef TF_IO_GRADFILE_H
#define TF_IO_GRADFILE_H

#include <stddef.h>

#include "io/holder.h"
#include "tinyfold.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Gradients are read from the holder (h->get_grads; the trainer's as left
 * by tf_trainer_grad); pred (required) holds npred = B*N*N floats. Atomic
 * like every safetensors write. */
tf_status tf_gradfile_write(const char *path, const tf_io_holder *h, float loss, const float *pred,
                            long npred, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
