/* A trainer's files (trainer_io.h). */
#include "train/trainer_io.h"

#include "io/checkpoint.h"
#include "io/gradfile.h"

static void get_params(void *t, float *p) { tf_trainer_get_params(t, p); }
static void get_adam(void *t, float *m, float *v, long *step) {
    tf_trainer_get_adam(t, m, v, step);
}
static void get_loss_scale(void *t, float *scale, long *clean_steps, long *skipped) {
    tf_trainer_get_loss_scale(t, scale, clean_steps, skipped);
}
static void get_grads(void *t, float *g) { tf_trainer_get_grads(t, g); }
static void set_params(void *t, const float *p) { tf_trainer_set_params(t, p); }
static void set_adam(void *t, const float *m, const float *v, long step) {
    tf_trainer_set_adam(t, m, v, step);
}
static void set_loss_scale(void *t, float scale, long clean_steps, long skipped) {
    tf_trainer_set_loss_scale(t, scale, clean_steps, skipped);
}

static tf_io_holder holder(tf_trainer *t) {
    return (tf_io_holder){.c = tf_trainer_config(t),
                          .ctx = t,
                          .get_params = get_params,
                          .get_adam = get_adam,
                          .get_loss_scale = get_loss_scale,
                          .get_grads = get_grads,
                          .set_params = set_params,
                          .set_adam = set_adam,
                          .set_loss_scale = set_loss_scale};
}

tf_status tf_checkpoint_save(tf_trainer *t, const char *path, long global_step, char *err,
                             size_t errlen) {
    tf_io_holder h = holder(t);
    return tf_checkpoint_write(&h, path, global_step, err, errlen);
}

tf_status tf_checkpoint_load(tf_trainer *t, const char *path, int with_optimizer, long *global_step,
                             char *err, size_t errlen) {
    tf_io_holder h = holder(t);
    return tf_checkpoint_read(&h, path, with_optimizer, global_step, err, errlen);
}

tf_status tf_gradfile_save(const char *path, tf_trainer *t, float loss, const float *pred,
                           long npred, char *err, size_t errlen) {
    tf_io_holder h = holder(t);
    return tf_gradfile_write(path, &h, loss, pred, npred, err, errlen);
}
