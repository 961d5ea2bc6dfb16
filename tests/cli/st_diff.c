/* The CLI tests' checkpoint comparison: the largest absolute difference
 * between the model weights (tensors not under "optimizer.") of two
 * safetensors files, and the largest weight, on one line:
 *   max_abs_diff D max_abs W tensors K
 * Exit 2 when a file cannot be read or the two hold different tensors. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "io/safetensors.h"

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: st_diff A.safetensors B.safetensors\n");
        return 2;
    }
    char err[512];
    tf_st_file *a = NULL, *b = NULL;
    if (tf_st_open(&a, argv[1], err, sizeof err) || tf_st_open(&b, argv[2], err, sizeof err)) {
        fprintf(stderr, "st_diff: %s\n", err);
        return 2;
    }
    double dmax = 0, wmax = 0;
    size_t k = 0;
    for (size_t i = 0; i < tf_st_count(a); i++) {
        const tf_st_tensor *ta = tf_st_at(a, i);
        if (strncmp(ta->name, "optimizer.", 10) == 0 || ta->dtype != TF_ST_F32) continue;
        const tf_st_tensor *tb = tf_st_find(b, ta->name);
        if (!tb || tb->dtype != TF_ST_F32 || tb->numel != ta->numel) {
            fprintf(stderr, "st_diff: %s: not in both files with the same shape\n", ta->name);
            return 2;
        }
        for (uint64_t j = 0; j < ta->numel; j++) {
            float x, y;
            memcpy(&x, (const char *)ta->data + 4 * j, 4);
            memcpy(&y, (const char *)tb->data + 4 * j, 4);
            double d = fabs((double)x - (double)y);
            if (!(d <= dmax)) dmax = d; /* a NaN is kept */
            if (fabs((double)x) > wmax) wmax = fabs((double)x);
        }
        k++;
    }
    printf("max_abs_diff %.9g max_abs %.9g tensors %zu\n", dmax, wmax, k);
    tf_st_close(a);
    tf_st_close(b);
    return 0;
}
