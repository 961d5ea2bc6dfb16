/* Forward FLOP count of TinyOpenFold (2 FLOPs per multiply-add, matrix
 * products only; elementwise work is a rounding error). docs/model.md
 * (section 10) gives ~88.8 GFLOP at the small problem; the training step is
 * ~3x forward. */
#include "tinyfold.h"

double tf_flops_forward(const tf_config *c) {
    const double B = c->batch, N = c->seq_len, S = c->n_seqs;
    const double cm = c->msa_dim, cz = c->pair_dim, co = c->outer_dim;
    const double Hm = c->n_heads_msa, Hz = c->n_heads_pair;
    const double msa_rows = B * S * N, pair_rows = B * N * N;
    double blk = 0;
    /* MSA row attention: q,k,v,o + pair bias + scores and P.V */
    blk += 4 * 2 * msa_rows * cm * cm + 2 * pair_rows * cz * Hm;
    blk += 2 * 2 * B * S * N * N * cm;
    /* MSA column attention */
    blk += 4 * 2 * msa_rows * cm * cm + 2 * 2 * B * N * S * S * cm;
    /* MSA transition */
    blk += 2 * 2 * msa_rows * cm * 4 * cm;
    /* outer product mean: projection, outer product, to pair */
    blk += 2 * msa_rows * cm * co + 2 * B * N * N * co * co * S + 2 * pair_rows * co * co * cz;
    /* two triangle multiplications: 6 linears + the N^3 product */
    blk += 2 * (6 * 2 * pair_rows * cz * cz + 2 * B * cz * N * N * N);
    /* two triangle attentions: 4 linears + scores and P.V */
    blk += 2 * (4 * 2 * pair_rows * cz * cz + 2 * 2 * B * N * N * N * cz);
    /* pair transition */
    blk += 2 * 2 * pair_rows * cz * 4 * cz;
    (void)Hz;
    double total = blk * c->n_blocks;
    total += 2 * pair_rows * c->pair_input_dim * cz; /* pair embedding */
    total += 2 * pair_rows * cz;                     /* distance head */
    return total;
}
