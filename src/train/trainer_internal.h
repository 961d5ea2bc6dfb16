/* The trainer's parts, for the files that wire them (trainer.c) and step
 * them (step.c): the plan (the backend, the model's layout and composition,
 * the arena), data feeding, the optimizer and data parallel, each of which
 * knows nothing of the others. */
#ifndef TF_TRAIN_TRAINER_INTERNAL_H
#define TF_TRAIN_TRAINER_INTERNAL_H

#include "train/data_parallel.h"
#include "train/feed.h"
#include "train/optim.h"
#include "train/plan.h"

struct tf_trainer {
    tf_plan plan;
    tf_config pub; /* what tf_trainer_config reports: the global batch */
    float *params, *grads, *loss, *pred;
    void *arena_mem;
    tf_feed feed; /* the batch from the host to the model's inputs */
    tf_optim opt; /* AdamW and fp16's loss scale */
    tf_dp dp;     /* data parallel (tf_trainer_set_dist) */
    tf_prof *prof;
    /* stepping (step.c). caps.pipelined_phases, without the profiler: the
     * step's phases are issued back to back and timed by marks on the
     * device */
    int pipelined;
    /* page-locked: [0] the loss, [1] the gradients' non-finite flag, [2] the
     * loss scale, [16..] the AdamW hyper-parameters (ops.h TF_HYPER_*) */
    float *step_host;
    long cur_step;
    void *graph[3]; /* forward, backward, optimizer (--graph where caps.graphs) */
    int graphs_ready;
    size_t graph_kernels; /* kernel nodes in the three captured graphs */
    /* the last step's loss was not finite and the step stopped after its
     * forward: the weights and the device batch are what that forward read */
    int nonfinite_held;
};

#endif
