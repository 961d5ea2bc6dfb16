/* The trainer on a backend created by the caller (tinyfold.h's
 * tf_trainer_create creates it with tf_backend_create): for tests that wrap a
 * backend's op table. */
#ifndef TF_TRAIN_TRAINER_H
#define TF_TRAIN_TRAINER_H

#include "backend/backend.h"
#include "tinyfold.h"

/* Like tf_trainer_create, on be (c->backend names its kind): the trainer
 * owns the backend from here on, also on failure (ops->destroy). c is not
 * validated again. */
tf_status tf_trainer_create_on(tf_trainer **out, const tf_config *c, tf_backend *be,
                               const tf_ops *ops, const tf_backend_caps *caps, char *err,
                               size_t errlen);

#endif
