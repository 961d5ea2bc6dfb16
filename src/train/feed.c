/* Data feeding: the host batches, the prefetch worker and the staging
 * buffers. Every loop over a batch's three arrays runs tokens, pair
 * features, target distances (the order of tf_feed.sz). */
#define _POSIX_C_SOURCE 200809L
#include "train/feed.h"

#include <omp.h>

static void ptrs(const tf_batch *b, void *p[3]) {
    p[0] = b->tokens, p[1] = b->pair, p[2] = b->target;
}

static int batch_alloc(tf_feed *f, tf_batch *b, int on_device) {
    *b = (tf_batch){.B = f->in.B, .S = f->in.S, .N = f->in.N};
    void **p[3] = {(void **)&b->tokens, (void **)&b->pair, (void **)&b->target};
    for (int i = 0; i < 3; i++)
        /* host batches from the backend: page-locked on CUDA, so that the
         * per-step upload runs at the bus' speed */
        if (on_device ? f->ops->alloc(f->be, p[i], f->sz[i])
                      : f->ops->host_alloc(f->be, p[i], f->sz[i]))
            return 1;
    return 0;
}

static void batch_free(tf_feed *f, tf_batch *b, int on_device) {
    void *p[3];
    ptrs(b, p);
    for (int i = 0; i < 3; i++)
        if (p[i]) on_device ? f->ops->free(f->be, p[i]) : f->ops->host_free(f->be, p[i]);
    b->tokens = NULL, b->pair = NULL, b->target = NULL;
}

void tf_feed_init(tf_feed *f, const tf_ops *ops, tf_backend *be, const tf_config *c,
                  const tf_backend_caps *caps) {
    const size_t B = (size_t)c->batch, S = (size_t)c->n_seqs, N = (size_t)c->seq_len;
    *f = (tf_feed){.ops = ops, .be = be, .seed = c->seed, .gbatch = c->batch};
    f->sz[0] = B * S * N * sizeof(int32_t);
    f->sz[1] = B * N * N * 65 * sizeof(float);
    f->sz[2] = B * N * N * sizeof(float);
    f->in = (tf_batch){.B = c->batch, .S = c->n_seqs, .N = c->seq_len};
    f->staged_step = -1;
    f->prefetch = caps->prefetch_batches;
    if (f->prefetch) {
        pthread_mutex_init(&f->mu, NULL);
        pthread_cond_init(&f->cv, NULL);
        /* leave two cores to the main thread and the CUDA driver */
        int n = omp_get_max_threads(), p = omp_get_num_procs() - 2;
        f->threads = n < p ? n : p < 1 ? 1 : p;
    }
    f->stage = f->prefetch && caps->stage_batches;
}

int tf_feed_alloc_inputs(tf_feed *f) { return batch_alloc(f, &f->in, 1); }

int tf_feed_alloc_host(tf_feed *f) {
    if (batch_alloc(f, &f->host, 0) || (f->prefetch && batch_alloc(f, &f->next, 0))) return 1;
    if (f->stage && batch_alloc(f, &f->staged, 1)) f->stage = 0;
    return 0;
}

void tf_feed_set_slice(tf_feed *f, int gbatch, int boff) {
    f->gbatch = gbatch;
    f->boff = boff;
}

static void draw(const tf_feed *f, long step, tf_batch *b) {
    tf_data_batch_slice(f->seed, step, f->gbatch, f->boff, b);
}

/* A thread a step made libgomp build a team a step, and a team as wide as
 * the machine took the cores the main thread needs to feed the GPU. */
static void *worker(void *arg) {
    tf_feed *f = arg;
    omp_set_num_threads(f->threads);
    pthread_mutex_lock(&f->mu);
    for (;;) {
        while (!f->busy && !f->quit)
            pthread_cond_wait(&f->cv, &f->mu);
        if (f->quit) break;
        long step = f->next_step;
        pthread_mutex_unlock(&f->mu);
        draw(f, step, &f->next);
        pthread_mutex_lock(&f->mu);
        f->busy = 0;
        pthread_cond_broadcast(&f->cv);
    }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

static void join(tf_feed *f) {
    if (!f->running) return;
    pthread_mutex_lock(&f->mu);
    while (f->busy)
        pthread_cond_wait(&f->cv, &f->mu);
    pthread_mutex_unlock(&f->mu);
    f->running = 0;
    f->have = 1;
}

const tf_batch *tf_feed_next(tf_feed *f, long step) {
    int have = 0;
    join(f);
    if (f->have && f->next_step == step) {
        tf_batch tmp = f->host;
        f->host = f->next;
        f->next = tmp;
        have = 1;
    }
    f->have = 0;
    if (!have) draw(f, step, &f->host);
    if (f->prefetch && !f->started) f->started = pthread_create(&f->thread, NULL, worker, f) == 0;
    if (f->started) {
        pthread_mutex_lock(&f->mu);
        f->next_step = step + 1;
        f->busy = 1;
        pthread_cond_broadcast(&f->cv);
        pthread_mutex_unlock(&f->mu);
        f->running = 1;
    }
    return &f->host;
}

void tf_feed_upload(tf_feed *f, const tf_batch *b) {
    void *dst[3], *src[3];
    ptrs(&f->in, dst);
    ptrs(b, src);
    for (int i = 0; i < 3; i++)
        f->ops->upload(f->be, dst[i], src[i], f->sz[i]);
}

void tf_feed_load(tf_feed *f, const tf_batch *b, long step) {
    if (f->stage && f->staged_step == step && b == &f->host) {
        void *dst[3], *src[3];
        ptrs(&f->in, dst);
        ptrs(&f->staged, src);
        f->ops->main_wait_side(f->be);
        for (int i = 0; i < 3; i++)
            f->ops->copy(f->be, dst[i], src[i], f->sz[i]);
    } else {
        tf_feed_upload(f, b);
    }
    f->staged_step = -1;
    /* the next staged upload may only overwrite the staging buffers after
     * the copies above */
    if (f->stage) f->ops->side_wait_main(f->be);
}

/* The side queue already waits for this step's copies out of the staging
 * buffers (tf_feed_load). */
void tf_feed_stage(tf_feed *f, long step) {
    if (!f->stage || (!f->running && !f->have)) return;
    join(f);
    if (f->next_step != step + 1) return;
    void *dst[3], *src[3];
    ptrs(&f->staged, dst);
    ptrs(&f->next, src);
    for (int i = 0; i < 3; i++)
        f->ops->side_upload(f->be, dst[i], src[i], f->sz[i]);
    f->staged_step = f->next_step;
}

void tf_feed_download(tf_feed *f, tf_batch *host) {
    void *dst[3], *src[3];
    ptrs(host, dst);
    ptrs(&f->in, src);
    for (int i = 0; i < 3; i++)
        f->ops->download(f->be, dst[i], src[i], f->sz[i]);
}

void tf_feed_stop(tf_feed *f) {
    join(f);
    if (f->started) {
        pthread_mutex_lock(&f->mu);
        f->quit = 1;
        pthread_cond_broadcast(&f->cv);
        pthread_mutex_unlock(&f->mu);
        pthread_join(f->thread, NULL);
        f->started = 0;
    }
    if (f->prefetch) {
        pthread_mutex_destroy(&f->mu);
        pthread_cond_destroy(&f->cv);
        f->prefetch = 0;
    }
}

void tf_feed_free(tf_feed *f) {
    if (!f->be) return;
    batch_free(f, &f->next, 0);
    batch_free(f, &f->host, 0);
    batch_free(f, &f->staged, 1);
    batch_free(f, &f->in, 1);
}
