/* The weight-gradient lane (ops.h wgrad_*): weight-gradient GEMMs on a queue
 * of their own, so that they overlap the rest of their module's backward.
 *
 * A weight gradient is read by nothing but the optimizer, so it is off the
 * backward's critical path; on one queue it still waits for, and holds up,
 * everything around it, split-K reduce included. Here each such GEMM waits
 * for the main queue's work issued before it (an event, wfork) and runs on
 * wstream at low priority, and the model makes the main queue wait for it
 * before anything overwrites what it reads (tf_x_wgrad_wait, tf_bwd_release).
 * Under graph capture the same events fork the lane off the captured queue
 * and join it back, so the graph holds two branches.
 *
 * While one runs, the backend's per-queue resources are swapped for the
 * lane's: queue, cuBLAS handle, workspace (cuBLAS, cuBLASLt and our split-K
 * partials), scratch and split-K counters: the main queue's GEMMs, LayerNorm
 * backwards and attention backwards use theirs at the same time. */
#include "cuda_common.h"

template <typename T> static void swap_(T &a, T &b)
{
    T t = a;
    a = b;
    b = t;
}

static void swap_lane(tf_backend *be)
{
    swap_(be->stream, be->wstream);
    swap_(be->blas, be->wblas);
    swap_(be->workspace, be->wworkspace);
    swap_(be->scratch, be->wscratch);
    swap_(be->mma_count, be->wmma_count);
    be->on_lane = !be->on_lane;
}

/* The plan's lane=off: no lane, every GEMM on the main queue in order (the
 * waits have nothing to wait for). */
extern "C" int tf_cu_wgrad_enable(tf_backend *be)
{
    if (be->wstream || be->plan.lane == TF_GPU_LANE_OFF) return 0;
    int least = 0, greatest = 0;
    if (tf_cu_queue_alloc(be, &be->wworkspace, &be->wscratch, &be->wmma_count))
        return 1; /* what was allocated goes with the backend */
    TF_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    TF_CUDA_CHECK(cudaStreamCreateWithPriority(&be->wstream, cudaStreamNonBlocking, least));
    TF_CUDA_CHECK(cudaEventCreateWithFlags(&be->wfork, cudaEventDisableTiming));
    for (int i = 0; i < TF_CU_WGRAD_EVENTS; ++i)
        TF_CUDA_CHECK(cudaEventCreateWithFlags(&be->wdone[i], cudaEventDisableTiming));
    TF_CUBLAS_CHECK(cublasCreate(&be->wblas));
    TF_CUBLAS_CHECK(tf_cu_blas_bind(be, be->wblas, be->wstream, be->wworkspace));
    TF_CUDA_CHECK(cudaMemsetAsync(be->wmma_count, 0, TF_CU_MMA_COUNTERS * sizeof(int),
                                  be->wstream));
    TF_CUDA_CHECK(cudaStreamSynchronize(be->wstream));
    return 0;
}

extern "C" long tf_cu_wgrad_mark(tf_backend *be) { return be->wgrad_n; }

extern "C" void tf_cu_wgrad_wait(tf_backend *be, long upto)
{
    if (!be->wstream) return;
    if (upto < 0 || upto > be->wgrad_n) upto = be->wgrad_n;
    /* the main queue runs in order: a wait it already made covers this one */
    if (upto <= be->wgrad_waited) return;
    /* a slot recorded again since holds a later point: waiting for it is
     * waiting for more, never less */
    TF_CUDA_CHECK(cudaStreamWaitEvent(be->stream, be->wdone[(upto - 1) % TF_CU_WGRAD_EVENTS], 0));
    be->wgrad_waited = upto;
}

/* The same slot as tf_cu_wgrad_wait's, waited for by another queue; the
 * main queue's own waits (wgrad_waited) are not affected. */
extern "C" void tf_cu_wgrad_wait_queue(tf_backend *be, void *queue, long upto)
{
    if (!be->wstream || upto < 1) return;
    if (upto > be->wgrad_n) upto = be->wgrad_n;
    TF_CUDA_CHECK(cudaStreamWaitEvent((cudaStream_t)queue,
                                      be->wdone[(upto - 1) % TF_CU_WGRAD_EVENTS], 0));
}

extern "C" void tf_cu_wgrad_enter(tf_backend *be)
{
    TF_CUDA_CHECK(cudaEventRecord(be->wfork, be->stream));
    TF_CUDA_CHECK(cudaStreamWaitEvent(be->wstream, be->wfork, 0));
    if (be->plan.wgrad_delay_us > 0) /* tests: a missing wait then changes the result */
        tf_cu_hold(be->wstream, 1000ull * (unsigned long long)be->plan.wgrad_delay_us);
    swap_lane(be);
}

extern "C" void tf_cu_wgrad_leave(tf_backend *be)
{
    swap_lane(be);
    TF_CUDA_CHECK(cudaEventRecord(be->wdone[be->wgrad_n % TF_CU_WGRAD_EVENTS], be->wstream));
    be->wgrad_n++;
}

extern "C" void tf_cu_wgrad_destroy(tf_backend *be)
{
    if (!be->wstream) return;
    (void)cudaStreamSynchronize(be->wstream);
    if (be->wblas) (void)cublasDestroy(be->wblas);
    if (be->wfork) (void)cudaEventDestroy(be->wfork);
    for (int i = 0; i < TF_CU_WGRAD_EVENTS; ++i)
        if (be->wdone[i]) (void)cudaEventDestroy(be->wdone[i]);
    (void)cudaStreamDestroy(be->wstream);
    be->wstream = NULL;
}
