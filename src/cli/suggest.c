/* "Did you mean": the long option nearest to a misspelt one. */
#include "cli.h"

#include <string.h>

/* Edits (insert, delete, substitute, swap two neighbours) that turn a[0..an)
 * into b[0..bn): the optimal-string-alignment form of Damerau-Levenshtein, so
 * "bacth" is one edit from "batch". Names longer than 63 bytes are cut. */
size_t tf_cli_edit_distance(const char *a, size_t an, const char *b, size_t bn)
{
    enum { MAXN = 63 };
    if (an > MAXN) an = MAXN;
    if (bn > MAXN) bn = MAXN;
    size_t d[MAXN + 1][MAXN + 1];
    for (size_t i = 0; i <= an; i++) d[i][0] = i;
    for (size_t j = 0; j <= bn; j++) d[0][j] = j;
    for (size_t i = 1; i <= an; i++) {
        for (size_t j = 1; j <= bn; j++) {
            size_t cost = a[i - 1] != b[j - 1];
            size_t best = d[i - 1][j - 1] + cost;
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    }
    return d[an][bn];
}

/* The nearest of several candidates to name[0..len): the fewest edits, at
 * most a third of the name (at least 1); else the longest shared prefix of 3
 * or more characters (an abbreviation such as "--batch"). */
typedef struct {
    size_t best_d, best_common; /* bounds, exclusive */
    int best, prefixed;         /* candidate indices, -1: none */
} nearest;

static nearest nearest_begin(size_t len)
{
    return (nearest){(len / 3 > 1 ? len / 3 : 1) + 1, 2, -1, -1};
}

static void nearest_try(nearest *s, const char *name, size_t len, const char *cand, int idx)
{
    size_t dist = tf_cli_edit_distance(name, len, cand, strlen(cand));
    if (dist < s->best_d) {
        s->best_d = dist;
        s->best = idx;
    }
    size_t k = 0;
    while (k < len && cand[k] && cand[k] == name[k])
        k++;
    if (k > s->best_common) {
        s->best_common = k;
        s->prefixed = idx;
    }
}

static int nearest_end(const nearest *s) { return s->best >= 0 ? s->best : s->prefixed; }

const tf_cli_optdef *tf_cli_nearest_option(const char *name, size_t len, unsigned cmd)
{
    nearest s = nearest_begin(len);
    for (int i = 0; i < tf_cli_n_optdefs; i++)
        if (tf_cli_optdefs[i].cmds & cmd)
            nearest_try(&s, name, len, tf_cli_optdefs[i].name, i);
    int i = nearest_end(&s);
    return i >= 0 ? &tf_cli_optdefs[i] : NULL;
}

const char *tf_cli_nearest_name(const char *name, const char *const *names, size_t n)
{
    size_t len = strlen(name);
    nearest s = nearest_begin(len);
    for (size_t i = 0; i < n; i++)
        nearest_try(&s, name, len, names[i], (int)i);
    int i = nearest_end(&s);
    return i >= 0 ? names[i] : NULL;
}
