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

/* The option of `cmd` nearest to name[0..len): the fewest edits, at most a
 * third of the name (at least 1); else the longest shared prefix of 3 or more
 * characters (an abbreviation such as "--batch"); else NULL. */
const tf_cli_optdef *tf_cli_nearest_option(const char *name, size_t len, unsigned cmd)
{
    const tf_cli_optdef *best = NULL, *prefixed = NULL;
    size_t best_d = (len / 3 > 1 ? len / 3 : 1) + 1, best_common = 2; /* bounds, exclusive */
    for (int i = 0; i < tf_cli_n_optdefs; i++) {
        const tf_cli_optdef *o = &tf_cli_optdefs[i];
        if (!(o->cmds & cmd))
            continue;
        size_t dist = tf_cli_edit_distance(name, len, o->name, strlen(o->name));
        if (dist < best_d) {
            best_d = dist;
            best = o;
        }
        size_t k = 0;
        while (k < len && o->name[k] && o->name[k] == name[k])
            k++;
        if (k > best_common) {
            best_common = k;
            prefixed = o;
        }
    }
    return best ? best : prefixed;
}
