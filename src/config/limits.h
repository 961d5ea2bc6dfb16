/* Accepted ranges of every configuration knob: one place, read by the CLI's
 * parser (range errors while parsing) and by tf_config_validate
 * (src/config/config.c), and quoted by --help. The upper bounds are "sensible":
 * far above anything that fits in memory where that is the real limit (the
 * trainer plans its memory and refuses politely), and what 32-bit GEMM row
 * counts allow elsewhere. */
#ifndef TF_CONFIG_LIMITS_H
#define TF_CONFIG_LIMITS_H

#define TF_LIM_BATCH_MAX 256
#define TF_LIM_SEQ_LEN_MAX 4096
#define TF_LIM_N_SEQS_MAX 4096
#define TF_LIM_BLOCKS_MAX 64
#define TF_LIM_DIM_MAX 4096     /* --msa-dim, --pair-dim */
#define TF_LIM_HEADS_MAX 64     /* n_heads_msa, n_heads_pair (no flag) */
#define TF_LIM_OUTER_MAX 256    /* outer_dim (no flag) */
#define TF_LIM_VOCAB_MIN 21     /* synthetic tokens are drawn from [0, 21) */
#define TF_LIM_VOCAB_MAX 65536
#define TF_LIM_PAIR_INPUT 65    /* synthetic pair features have 65 channels */
#define TF_LIM_STEPS_MAX 1000000
#define TF_LIM_WARMUP_MAX 100000
#define TF_LIM_LR_MAX 1.0       /* learning rate in (0, 1] */
#define TF_LIM_DEVICE_MAX 255
#define TF_LIM_DIST_TIMEOUT_MAX 86400 /* --dist-timeout, seconds */
#define TF_LIM_DIST_BUCKET_KB_MAX 1048576 /* --dist-bucket-kb: 1 GiB */
#define TF_LIM_THREADS_MAX 1024
#define TF_LIM_LOG_EVERY_MAX 1000000
#define TF_LIM_TRACE_STEPS_MAX 1000
#define TF_LIM_TOP_MAX 10000
#define TF_LIM_BENCH_STEPS_MAX 1000

/* GEMM row counts (tf_gemm_args.M is an int): B*N*N and B*S*N must fit. */
#define TF_LIM_ROWS_MAX 2147483647L

#endif
