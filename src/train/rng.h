/* Small counter-seeded RNG: splitmix64 to derive a stream from (seed, index),
 * xoshiro256** to draw from it. Deterministic on every platform. */
#ifndef TF_RNG_H
#define TF_RNG_H

#include <math.h>
#include <stdint.h>

typedef struct { uint64_t s[4]; } tf_rng;

static inline uint64_t tf_splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A stream for (seed, stream, index): independent streams for data, init, ... */
static inline void tf_rng_init(tf_rng *r, uint64_t seed, uint64_t stream, uint64_t index) {
    uint64_t x = seed ^ (stream * 0xD1B54A32D192ED03ull) ^ (index * 0x8CB92BA72F3D8DD7ull);
    for (int i = 0; i < 4; i++) r->s[i] = tf_splitmix64(&x);
}

static inline uint64_t tf_rng_next(tf_rng *r) {
    uint64_t *s = r->s;
    uint64_t x = s[1] * 5;
    uint64_t result = ((x << 7) | (x >> 57)) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = (s[3] << 45) | (s[3] >> 19);
    return result;
}

/* uniform in [0, 1) with 53 bits */
static inline double tf_rng_uniform(tf_rng *r) {
    return (double)(tf_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* standard normal (Box-Muller, one value per call: simple and deterministic) */
static inline double tf_rng_normal(tf_rng *r) {
    double u1 = tf_rng_uniform(r), u2 = tf_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* two independent standard normals (both Box-Muller outputs) */
static inline double tf_rng_normal2(tf_rng *r, double *second) {
    double u1 = tf_rng_uniform(r), u2 = tf_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    double rad = sqrt(-2.0 * log(u1)), a = 6.283185307179586 * u2;
    *second = rad * sin(a);
    return rad * cos(a);
}

enum { TF_STREAM_DATA = 1, TF_STREAM_STEP = 2, TF_STREAM_INIT = 3 };

#endif
