/* libFuzzer target over the checkpoint metadata reader
 * (src/io/checkpoint_meta.c): format, version, the stored config JSON (or the
 * model inferred from a foreign state_dict's tensor shapes) and the step
 * counters.
 *
 * Any input must either be refused with one non-empty line naming the input,
 * or give a config inside the accepted ranges (config/limits.h) and a global
 * step in [0, 2^53]: what the trainer and the step loop rely on before they
 * do arithmetic with it.
 *
 * Build and run: tests/fuzz/run.sh [seconds]. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/limits.h"
#include "io/checkpoint.h"

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_checkpoint_meta: invariant failed: %s (line %d)\n", #cond,       \
                    __LINE__);                                                                     \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tf_config c;
    long gs = -1;
    char err[1024];
    err[0] = '\0';
    tf_status st = tf_checkpoint_peek_config_buffer(data, size, "fuzz", &c, &gs, err, sizeof err);
    if (st != TF_OK) {
        CHECK(st == TF_ERR_USAGE || st == TF_ERR_NOMEM);
        CHECK(strncmp(err, "fuzz: ", 6) == 0 && strlen(err) > 6);
        CHECK(strchr(err, '\n') == NULL);
        return 0;
    }
    CHECK(gs >= 0 && gs <= 9007199254740992L);
    CHECK(c.n_blocks >= 0 && c.n_blocks <= INT32_MAX);
    CHECK(c.msa_dim >= 1 && c.pair_dim >= 1 && c.n_heads_msa >= 1 && c.n_heads_pair >= 1);
    CHECK(c.outer_dim >= 1 && c.vocab >= 1 && c.pair_input_dim >= 1);
    if (c.learning_rate > 0) CHECK(c.learning_rate <= TF_LIM_LR_MAX);
    return 0;
}
