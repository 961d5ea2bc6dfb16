/* Renders a compare table as one JSON document (`compare --format json`):
 * the same rows as the other formats, labels and kernel names whole, the
 * numbers unrounded. Fields: docs/cli.md, "compare". */
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "fileio/text_escape.h"
#include "report/cmp_table.h"

/* Text from the files as the other formats print it (control characters and
 * bytes that are not UTF-8 as "\xHH"), so the document is valid UTF-8. */
static cJSON *text(const char *s) {
    size_t n = 4 * strlen(s) + 1;
    char *b = malloc(n);
    if (!b) return NULL;
    cJSON *j = cJSON_CreateString(tf_text_escape(b, n, s, 0));
    free(b);
    return j;
}

static int add(cJSON *o, const char *key, cJSON *v) {
    if (!v) return -1;
    cJSON_AddItemToObject(o, key, v);
    return 0;
}

static cJSON *row_json(const cmp_table *t, const cmp_row *r) {
    cJSON *j = cJSON_CreateObject(), *vals = NULL, *rat = NULL;
    int bad = !j || add(j, "metric", text(r->label));
    if (!bad && r->name_len) {
        char *name = malloc(r->name_len + 1);
        bad = !name;
        if (name) {
            memcpy(name, r->label, r->name_len);
            name[r->name_len] = 0;
            bad = add(j, "kernel", text(name)) || add(j, "quantity", text(r->label + r->name_len + 1));
            free(name);
        }
    }
    bad = bad || !(vals = cJSON_AddArrayToObject(j, "values")) ||
          (!r->text && !(rat = cJSON_AddArrayToObject(j, "ratios")));
    for (int i = 0; i < t->nruns && !bad; i++) {
        cJSON *x = r->text     ? text(r->s[i])
                   : r->has[i] ? cJSON_CreateNumber(r->v[i])
                               : cJSON_CreateNull();
        bad = !x;
        if (x) cJSON_AddItemToArray(vals, x);
        if (r->text || bad) continue;
        /* ratios[i] = values[i] / values[0]; null at i = 0 */
        x = i > 0 && r->has[i] && r->has[0] && r->v[0] != 0.0 ? cJSON_CreateNumber(r->v[i] / r->v[0])
                                                             : cJSON_CreateNull();
        bad = !x;
        if (x) cJSON_AddItemToArray(rat, x);
    }
    if (bad) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

int cmp_render_json(const cmp_table *t, FILE *out) {
    cJSON *doc = cJSON_CreateObject(), *runs = NULL, *secs = NULL;
    int bad = !doc;
    if (!bad) {
        bad |= !cJSON_AddNumberToObject(doc, "schema_version", 1);
        bad |= !cJSON_AddStringToObject(doc, "command", "compare");
        bad |= !(runs = cJSON_AddArrayToObject(doc, "runs"));
        bad |= !(secs = cJSON_AddArrayToObject(doc, "sections"));
    }
    for (int i = 0; i < t->nruns && !bad; i++) {
        cJSON *r = cJSON_CreateObject();
        bad |= !r || add(r, "label", text(t->labels[i])) || add(r, "path", text(t->paths[i]));
        if (r) cJSON_AddItemToArray(runs, r);
    }
    for (int s = 0; s < t->nsec && !bad; s++) {
        cJSON *sec = cJSON_CreateObject(), *rows = NULL;
        bad |= !sec || add(sec, "title", text(t->sec[s].title)) ||
               !(rows = cJSON_AddArrayToObject(sec, "rows"));
        if (sec) cJSON_AddItemToArray(secs, sec);
        for (size_t r = 0; r < t->sec[s].n && !bad; r++) {
            cJSON *row = row_json(t, &t->sec[s].rows[r]);
            bad |= !row;
            if (row) cJSON_AddItemToArray(rows, row);
        }
    }
    char *txt = bad ? NULL : cJSON_Print(doc);
    if (txt) {
        fputs(txt, out);
        fputc('\n', out);
    }
    cJSON_free(txt);
    cJSON_Delete(doc);
    return txt ? 0 : -1;
}
