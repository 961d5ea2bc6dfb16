/* Data feeding (feed.c): a step's batch from the host into the model's
 * inputs on the backend. The synthetic batch of step t is this rank's slice
 * of a pure function of (seed, t), drawn on the host; where the backend asks
 * for it (caps.prefetch_batches) a thread of its own draws the next step's
 * while the device runs this one, and where it stages batches
 * (caps.stage_batches) that batch is uploaded on the side queue during the
 * backward, then copied device to device at the next step. */
#ifndef TF_TRAIN_FEED_H
#define TF_TRAIN_FEED_H

#include <pthread.h>

#include "backend/ops.h"
#include "tinyfold.h"

typedef struct {
    const tf_ops *ops;
    tf_backend *be;
    uint64_t seed;
    int gbatch, boff; /* this rank draws samples [boff, boff + B) of the global gbatch */
    size_t sz[3];     /* bytes of tokens, pair features, target distances */
    tf_batch in;      /* the model's inputs, on the backend */
    tf_batch host;    /* the host batch of the current step (page-locked on CUDA) */
    /* the prefetch: next is drawn by one worker for the run, started at
     * the first step, with fewer OpenMP threads than the machine has cores */
    int prefetch;
    tf_batch next;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int started, busy, quit; /* busy: the worker is drawing next_step */
    int threads;             /* OpenMP threads the worker draws with */
    int running;             /* a batch was asked for and not yet waited for */
    int have;                /* waited for: next holds next_step */
    long next_step;
    /* staging: next goes to these on the side queue during the backward */
    int stage;
    tf_batch staged;
    long staged_step; /* the step whose batch is in the staging buffers, -1 */
} tf_feed;

/* For c's problem on be: prefetch and stage as the backend asks. No memory
 * yet. */
void tf_feed_init(tf_feed *f, const tf_ops *ops, tf_backend *be, const tf_config *c,
                  const tf_backend_caps *caps);
/* The model's inputs on the backend (0, or 1 without the memory). */
int tf_feed_alloc_inputs(tf_feed *f);
/* The host batches (0, or 1 without the memory), then the staging buffers
 * where the device has the memory (staging is a speed-up only). */
int tf_feed_alloc_host(tf_feed *f);
/* Data parallel: this rank's slice [boff, boff + B) of each global batch. */
void tf_feed_set_slice(tf_feed *f, int gbatch, int boff);

/* The host batch of `step`, from the prefetch when it has it; starts
 * drawing step + 1 there. */
const tf_batch *tf_feed_next(tf_feed *f, long step);
/* b (a host batch) into the model's inputs: copied from the staging buffers
 * when they hold step's batch and b is the feed's own, else uploaded. */
void tf_feed_load(tf_feed *f, const tf_batch *b, long step);
void tf_feed_upload(tf_feed *f, const tf_batch *b);
/* During step's backward: the next step's batch, when drawn, onto the
 * staging buffers on the side queue. */
void tf_feed_stage(tf_feed *f, long step);
/* The model's inputs into host (sized for the batch); the caller waited for
 * the backend. */
void tf_feed_download(tf_feed *f, tf_batch *host);

/* Ends the worker. */
void tf_feed_stop(tf_feed *f);
/* The buffers, once nothing on the backend reads them any more. */
void tf_feed_free(tf_feed *f);

#endif
