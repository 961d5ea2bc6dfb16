/* Validation that also hands out what it parsed (config.c). */
#ifndef TF_CONFIG_CONFIG_H
#define TF_CONFIG_CONFIG_H

#include <stddef.h>

#include "backend/backend.h"
#include "tinyfold.h"

/* tf_config_validate, and on TF_OK the options of c's backend (--gpu-plan
 * parsed, tf_backend_opts_from_config) in *bo. */
tf_status tf_config_check(const tf_config *c, tf_backend_opts *bo, char *err, size_t errlen);

#endif
