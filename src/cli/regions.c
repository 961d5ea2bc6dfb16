/* The profiling regions a run opens (the trainer's phases, the model's
 * blocks, modules and their steps), for checking --selected-regions and
 * --profile-regions before a run: a name that is none of them would collect
 * nothing. Keep in step with the names src/model and src/train push (the
 * list is docs/cli.md's, under profile). */
#include "cli.h"

#include <stdio.h>
#include <string.h>

static const char *const region_names[] = {
    /* phases (src/train/step.c) */
    "data_loading", "forward_pass", "backward_pass", "optimizer_step", "allreduce",
    /* the model (src/model) */
    "embedding", "loss", "structure_module", "msa_row_attention", "msa_column_attention",
    "msa_transition", "outer_product_mean", "triangle_mult_outgoing", "triangle_mult_incoming",
    "triangle_attn_starting", "triangle_attn_ending", "pair_transition",
    /* the modules' steps */
    "msa_qkv", "pair_bias", "qkv", "attention", "output_proj", "layer_norm", "projections",
    "triangle_product", "gating", "outer_product", "linear1", "linear2",
    /* blocks: block_0 .. block_11, then every further block is block_n */
    "block_0", "block_1", "block_2", "block_3", "block_4", "block_5", "block_6", "block_7",
    "block_8", "block_9", "block_10", "block_11", "block_n"};

static int known(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof region_names / sizeof region_names[0]; i++)
        if (strlen(region_names[i]) == len && strncmp(region_names[i], name, len) == 0)
            return 1;
    return 0;
}

int tf_cli_check_regions(const char *flag, const char *list)
{
    const char *p = list;
    for (;;) {
        size_t len = strcspn(p, ","), next = len;
        while (len && (*p == ' ' || *p == '\t')) /* as the profiler reads them */
            p++, len--, next--;
        while (len && (p[len - 1] == ' ' || p[len - 1] == '\t'))
            len--;
        if (!known(p, len)) {
            char name[64], q[64], near[96] = "";
            snprintf(name, sizeof name, "%.*s", (int)(len < 63 ? len : 63), p);
            tf_cli_quote(q, sizeof q, name);
            const char *n = len ? tf_cli_nearest_name(
                                      name, region_names,
                                      sizeof region_names / sizeof region_names[0])
                                : NULL;
            if (n)
                snprintf(near, sizeof near, " (did you mean %s?)", n);
            tf_cli_error("%s: '%s' is not a region%s (nothing would be collected): expected comma-separated names of "
                         "data_loading, forward_pass, backward_pass, optimizer_step, allreduce, "
                         "embedding, block_0..block_11, block_n (blocks beyond 11), loss, the "
                         "modules (msa_row_attention, msa_column_attention, msa_transition, "
                         "outer_product_mean, triangle_mult_outgoing, triangle_mult_incoming, "
                         "triangle_attn_starting, triangle_attn_ending, pair_transition, "
                         "structure_module) and their steps (msa_qkv, pair_bias, qkv, attention, "
                         "output_proj, layer_norm, projections, triangle_product, gating, "
                         "outer_product, linear1, linear2)",
                         flag, len ? q : "", near);
            return TF_EXIT_USAGE;
        }
        if (!p[next])
            return TF_EXIT_OK;
        p += next + 1;
    }
}
