/* One batch of a data file through a checkpoint's model (grad.c): loss,
 * predictions and gradients, no update, written to a gradient file. Its
 * caller parses the options and prints; each phase returns TF_OK or a
 * status with one line in err (errlen 2 * 4096 + 512 holds any). */
#ifndef TF_TRAIN_GRAD_H
#define TF_TRAIN_GRAD_H

#include "io/datafile.h"
#include "tinyfold.h"

typedef struct {
    tf_config cfg;   /* how to compute (level, backend, precision ...); batch if batch_given */
    int batch_given; /* else the data file's samples make the batch */
    const char *load_path, *data_path, *out_path;
} tf_grad_opts;

typedef struct {
    tf_grad_opts o;
    tf_config c; /* the checkpoint's model, computed as the options say */
    tf_datafile *d;
    tf_trainer *t;
    tf_batch b;
    float *pred;
    long npred;
    float loss;
} tf_grad;

/* The phases, in this order; between configure and prepare the caller
 * resolves the backend (configure leaves it as given). */
/* g->c from the checkpoint, the options and the data file; validated.
 * TF_ERR_USAGE on any failure. */
tf_status tf_grad_configure(tf_grad *g, const tf_grad_opts *o, char *err, size_t errlen);
/* The trainer with the checkpoint's weights, and the batch's buffers. */
tf_status tf_grad_prepare(tf_grad *g, char *err, size_t errlen);
/* The forward and backward of the data file's first batch (g->loss). */
tf_status tf_grad_compute(tf_grad *g, char *err, size_t errlen);
/* --out: the gradient file. */
tf_status tf_grad_save(tf_grad *g, char *err, size_t errlen);
/* Frees what the phases made. */
void tf_grad_close(tf_grad *g);

#endif
