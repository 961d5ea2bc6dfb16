/* `tinyfold compare`: side-by-side table of profiler summaries and run JSON
 * files, refusal of runs at different problems, corrupt-file handling. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <sys/stat.h>

#include "report/commands.h"
#include "test_prof_util.h"

static char tmpdir[256];

static void path_of(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", tmpdir, name); }

/* A profile of the synthetic workload with `run` embedded, in tmpdir/<sub>. */
static void make_profile(const char *sub, cJSON *run, int nsteps) {
    char dir[400], err[256];
    path_of(dir, sizeof dir, sub);
    tf_prof_opts o = {.out_dir = dir};
    tf_prof *p = tf_prof_create(&o, err, sizeof err);
    assert_non_null(p);
    for (int s = 0; s < nsteps; s++) tp_step(p, NULL, s, 0, 1, TP_ALL);
    assert_int_equal(tf_prof_finish(p, run, err, sizeof err), 0);
    tf_prof_destroy(p);
}

static void write_json(const char *name, cJSON *j) {
    char path[400];
    path_of(path, sizeof path, name);
    char *s = cJSON_Print(j);
    assert_int_equal(tp_write(path, s), 0);
    cJSON_free(s);
}

static int setup(void **state) {
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tf_test_compare_XXXXXX");
    if (!mkdtemp(tmpdir)) return -1;
    cJSON *a = tp_run_json(4, 64, 100.0, 40.0), *b = tp_run_json(4, 64, 200.0, 20.0);
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(b, "config"), "impl", cJSON_CreateString("v1"));
    make_profile("v2", a, 2);
    make_profile("v1", b, 4);
    write_json("a.json", a);
    write_json("b.json", b);
    cJSON *c = tp_run_json(4, 128, 50.0, 80.0); /* a different problem */
    write_json("c.json", c);
    cJSON *d = tp_run_json(4, 64, 50.0, 80.0);
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(d, "config"), "precision", cJSON_CreateString("tf32"));
    write_json("d.json", d);
    /* mixed precision: bf16, and fp16 with its loss scaler's figures */
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(d, "config"), "precision", cJSON_CreateString("bf16"));
    write_json("h.json", d);
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(d, "config"), "precision", cJSON_CreateString("fp16"));
    cJSON_AddNumberToObject(cJSON_GetObjectItem(d, "summary"), "skipped_steps", 3);
    cJSON_AddNumberToObject(cJSON_GetObjectItem(d, "summary"), "loss_scale", 16384);
    write_json("g.json", d);
    /* a data parallel run: its communication and the exposed part */
    cJSON *e = tp_run_json(4, 64, 90.0, 44.0);
    cJSON_AddNumberToObject(cJSON_GetObjectItem(e, "summary"), "comm_ms", 12.5);
    cJSON_AddNumberToObject(cJSON_GetObjectItem(e, "summary"), "exposed_comm_ms", 3.25);
    write_json("e.json", e);
    cJSON_Delete(e);
    cJSON_Delete(a);
    cJSON_Delete(b);
    cJSON_Delete(c);
    cJSON_Delete(d);
    char path[400];
    path_of(path, sizeof path, "trunc.json");
    tp_write(path, "{\"config\": {\"batch\": 4, \"seq_len\"");
    path_of(path, sizeof path, "array.json");
    tp_write(path, "[1, 2, 3]");
    path_of(path, sizeof path, "noconfig.json");
    tp_write(path, "{\"summary\": {\"step_ms\": 3}}");
    path_of(path, sizeof path, "empty.json");
    tp_write(path, "");
    return 0;
}

static int teardown(void **state) {
    (void)state;
    static const char *const files[] = {"v1/kernel_stats.csv", "v1/kernel_trace.csv",
                                        "v1/summary.json",     "v1/trace.json",
                                        "v2/kernel_stats.csv", "v2/kernel_trace.csv",
                                        "v2/summary.json",     "v2/trace.json",
                                        "a.json",              "b.json",
                                        "c.json",              "d.json",
                                        "e.json",              "g.json",
                                        "h.json",              "trunc.json",          "array.json",
                                        "noconfig.json",       "empty.json",
                                        "out.txt",             "err.txt"};
    char path[400];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        path_of(path, sizeof path, files[i]);
        unlink(path);
    }
    path_of(path, sizeof path, "v1");
    rmdir(path);
    path_of(path, sizeof path, "v2");
    rmdir(path);
    rmdir(tmpdir);
    return 0;
}

/* Runs compare with stdout/stderr captured; returns the exit status. */
static int compare(char **out, char **err, ...) {
    char *argv[16];
    int argc = 0;
    argv[argc++] = "compare";
    va_list ap;
    va_start(ap, err);
    for (char *a; (a = va_arg(ap, char *)) != NULL && argc < 15;) argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;
    char po[400], pe[400];
    path_of(po, sizeof po, "out.txt");
    path_of(pe, sizeof pe, "err.txt");
    fflush(stdout);
    fflush(stderr);
    int so = dup(1), se = dup(2);
    int fo = open(po, O_WRONLY | O_CREAT | O_TRUNC, 0644), fe = open(pe, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(so >= 0 && se >= 0 && fo >= 0 && fe >= 0);
    dup2(fo, 1);
    dup2(fe, 2);
    int rc = tf_compare_main(argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(so, 1);
    dup2(se, 2);
    close(so);
    close(se);
    close(fo);
    close(fe);
    *out = tp_read(po);
    *err = tp_read(pe);
    assert_non_null(*out);
    assert_non_null(*err);
    return rc;
}

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

static char v1[400], v2[400], fa[400], fb[400], fc[400], fd[400];
static void paths(void) {
    path_of(v1, sizeof v1, "v1/summary.json");
    path_of(v2, sizeof v2, "v2/summary.json");
    path_of(fa, sizeof fa, "a.json");
    path_of(fb, sizeof fb, "b.json");
    path_of(fc, sizeof fc, "c.json");
    path_of(fd, sizeof fd, "d.json");
}

static void test_table(void **state) {
    (void)state;
    paths();
    char *out, *err;
    int rc = compare(&out, &err, v2, v1, NULL);
    if (rc) fprintf(stderr, "%s", err);
    assert_int_equal(rc, 0);
    assert_string_equal(err, "");
    if (getenv("TF_TEST_VERBOSE")) fputs(out, stderr);
    /* labels from the profile directories, values and ratios vs the first run */
    assert_non_null(strstr(out, "v2 = "));
    assert_non_null(strstr(out, "v1 = "));
    assert_non_null(strstr(out, "samples/s"));
    assert_non_null(strstr(out, "100.00"));
    assert_non_null(strstr(out, "200.00"));
    assert_non_null(strstr(out, "2.00x"));
    assert_non_null(strstr(out, "0.50x"));
    assert_non_null(strstr(out, "launches/step"));
    assert_non_null(strstr(out, "14.0"));
    assert_non_null(strstr(out, "peak memory MiB"));
    assert_non_null(strstr(out, "512.0"));
    /* kernels: both runs' top kernels, with calls (2 vs 4 steps: 2.00x) */
    assert_non_null(strstr(out, "sgemm_nt ms"));
    const char *row = strstr(out, "sgemm_nt calls");
    assert_non_null(row);
    assert_non_null(strstr(row, "16"));
    assert_non_null(strstr(row, "32"));
    const char *eol = strchr(row, '\n');
    const char *ratio = strstr(row, "2.00x");
    assert_true(ratio && ratio < eol);
    assert_non_null(strstr(out, "impl"));
    free(out);
    free(err);

    /* a profile directory stands for its summary.json */
    char d1[400], d2[400];
    path_of(d1, sizeof d1, "v2/");
    path_of(d2, sizeof d2, "v1");
    assert_int_equal(compare(&out, &err, d1, d2, NULL), 0);
    assert_non_null(strstr(out, "v2 = "));
    assert_non_null(strstr(out, "sgemm_nt calls"));
    free(out);
    free(err);
}

/* comm rows only where a run has them, "-" for the runs that do not */
static void test_comm_rows(void **state) {
    (void)state;
    paths();
    char fe[400], *out, *err;
    path_of(fe, sizeof fe, "e.json");
    assert_int_equal(compare(&out, &err, fa, fb, NULL), 0);
    assert_null(strstr(out, "comm ms"));
    free(out);
    free(err);
    assert_int_equal(compare(&out, &err, fa, fe, NULL), 0);
    const char *row = strstr(out, "\ncomm ms");
    assert_non_null(row);
    const char *eol = strchr(row + 1, '\n');
    const char *v = strstr(row, "12.500");
    assert_true(v && v < eol);
    row = strstr(out, "exposed comm ms");
    assert_non_null(row);
    eol = strchr(row, '\n');
    v = strstr(row, "3.250");
    assert_true(v && v < eol);
    free(out);
    free(err);
}

static void test_csv_markdown(void **state) {
    (void)state;
    paths();
    char *out, *err;
    assert_int_equal(compare(&out, &err, fa, fb, v1, "--format", "csv", NULL), 0);
    char *s = out;
    tp_csv_row r;
    assert_true(tp_csv_next(&s, &r));
    /* section, metric, a, b, b vs a, v1, v1 vs a */
    assert_int_equal(r.n, 7);
    assert_string_equal(r.f[1], "Metric");
    assert_string_equal(r.f[2], "a");
    assert_string_equal(r.f[3], "b");
    assert_string_equal(r.f[4], "vs a");
    assert_string_equal(r.f[5], "v1");
    int found = 0, rows = 0;
    while (tp_csv_next(&s, &r)) {
        assert_int_equal(r.n, 7);
        rows++;
        if (!strcmp(r.f[1], "ms/step")) {
            assert_string_equal(r.f[2], "40.000");
            assert_string_equal(r.f[3], "20.000");
            assert_string_equal(r.f[4], "0.50x");
            assert_string_equal(r.f[6], "0.50x");
            found = 1;
        }
        if (!strcmp(r.f[1], "sgemm_nt calls")) {
            assert_string_equal(r.f[2], "-"); /* run JSON files have no kernels */
            assert_string_equal(r.f[5], "32");
        }
    }
    assert_true(found);
    assert_true(rows > 5);
    free(out);
    free(err);

    assert_int_equal(compare(&out, &err, fa, fb, "--format=markdown", NULL), 0);
    assert_non_null(strstr(out, "### Performance"));
    assert_non_null(strstr(out, "| Metric"));
    assert_non_null(strstr(out, "|--"));
    assert_non_null(strstr(out, "| samples/s"));
    free(out);
    free(err);
}

static void test_refuse_mismatch(void **state) {
    (void)state;
    paths();
    char *out, *err;
    assert_int_equal(compare(&out, &err, fa, fc, NULL), 2);
    assert_string_equal(out, "");
    assert_int_equal(count_lines(err), 1);
    assert_non_null(strstr(err, "seq_len"));
    assert_non_null(strstr(err, "64"));
    assert_non_null(strstr(err, "128"));
    free(out);
    free(err);

    assert_int_equal(compare(&out, &err, v1, fd, NULL), 2);
    assert_int_equal(count_lines(err), 1);
    assert_non_null(strstr(err, "precision"));
    assert_non_null(strstr(err, "fp32"));
    assert_non_null(strstr(err, "tf32"));
    free(out);
    free(err);

    assert_int_equal(compare(&out, &err, fa, "--force", fc, NULL), 0);
    assert_non_null(strstr(out, "samples/s"));
    assert_non_null(strstr(out, "0.50x"));
    free(out);
    free(err);
}

/* Mixed precision is part of the problem: fp32 vs bf16, bf16 vs fp16 are
 * refused naming both; with --force they sit side by side, fp16's loss
 * scaler rows shown only when a run is fp16. */
static void test_refuse_precision(void **state) {
    (void)state;
    paths();
    char fg[400], fh[400], *out, *err;
    path_of(fg, sizeof fg, "g.json");
    path_of(fh, sizeof fh, "h.json");
    const struct {
        const char *x, *y, *tx, *ty;
    } pairs[] = {{fa, fh, "fp32", "bf16"}, {fh, fg, "bf16", "fp16"}, {fa, fg, "fp32", "fp16"},
                 {fd, fh, "tf32", "bf16"}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        assert_int_equal(compare(&out, &err, pairs[i].x, pairs[i].y, NULL), 2);
        assert_string_equal(out, "");
        assert_int_equal(count_lines(err), 1);
        assert_non_null(strstr(err, "precision"));
        assert_non_null(strstr(err, pairs[i].tx));
        assert_non_null(strstr(err, pairs[i].ty));
        assert_non_null(strstr(err, "--force"));
        free(out);
        free(err);
    }
    /* the same precision compares */
    assert_int_equal(compare(&out, &err, fg, fg, NULL), 0);
    free(out);
    free(err);
    assert_int_equal(compare(&out, &err, fh, "--force", fg, NULL), 0);
    const char *row = strstr(out, "precision");
    assert_non_null(row);
    const char *eol = strchr(row, '\n');
    const char *b = strstr(row, "bf16"), *h = strstr(row, "fp16");
    assert_true(b && b < eol && h && h < eol);
    row = strstr(out, "skipped steps");
    assert_non_null(row);
    assert_non_null(strstr(row, "3"));
    assert_non_null(strstr(out, "final loss scale"));
    assert_non_null(strstr(out, "16384"));
    free(out);
    free(err);
    assert_int_equal(compare(&out, &err, fa, "--force", fh, NULL), 0);
    assert_null(strstr(out, "skipped steps"));
    free(out);
    free(err);
}

/* rocprofv3's --stats kernel summary beside a tinyfold profile: its kernels
 * are rows, no configuration is checked; a malformed one is refused */
static void test_rocprof_stats(void **state) {
    (void)state;
    paths();
    char ks[400], bad[400], *out, *err;
    path_of(ks, sizeof ks, "tinyfold_kernel_stats.csv");
    assert_int_equal(tp_write(ks, "\"Name\",\"Calls\",\"TotalDurationNs\",\"AverageNs\","
                                  "\"Percentage\",\"MinNs\",\"MaxNs\",\"StdDev\"\n"
                                  "\"Cijk_Ailk_Bljk_S_MT64x64, \"\"x\"\"\",40,8000000,200000,"
                                  "80.0,1000,300000,10.5\n"
                                  "\"layernorm_fwd_kernel2\",20,2000000,100000,20.0,900,"
                                  "110000,3.0\n"), 0);
    int rc = compare(&out, &err, v2, ks, NULL);
    if (rc) fprintf(stderr, "%s", err);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "tinyfold_kernel_stats = "));
    assert_non_null(strstr(out, "Cijk_Ailk_Bljk_S_MT64x64, \"x\" ms"));
    const char *row = strstr(out, "layernorm_fwd_kernel2 calls");
    assert_non_null(row);
    const char *eol = strchr(row, '\n'), *v = strstr(row, "20");
    assert_true(v && v < eol);
    assert_non_null(strstr(out, "sgemm_nt ms")); /* the profile's own kernels too */
    free(out);
    free(err);
    path_of(bad, sizeof bad, "bad_kernel_stats.csv");
    assert_int_equal(tp_write(bad, "\"Name\",\"Calls\",\"TotalDurationNs\"\n\"k\",x,5\n"), 0);
    assert_int_equal(compare(&out, &err, v2, bad, NULL), 2);
    assert_non_null(strstr(err, "not a count"));
    assert_int_equal(count_lines(err), 1);
    free(out);
    free(err);
    /* rocprofv3's other summaries share the header: refused by name or rows */
    static const struct {
        const char *file, *rows, *kind, *by;
    } other[] = {
        {"1234_memory_copy_stats.csv", "\"k\",1,5\n", "memory copy", "its name"},
        {"1234_hip_api_stats.csv", "\"k\",1,5\n", "HIP API", "its name"},
        {"hsa_api_stats.csv", "\"k\",1,5\n", "HSA API", "its name"},
        {"copies.csv", "\"MEMORY_COPY_HOST_TO_DEVICE\",2,5\n\"MEMORY_COPY_DEVICE_TO_HOST\",1,4\n",
         "memory copy", "its rows"},
        {"api.csv", "\"hipLaunchKernel\",40,5\n\"hipMemcpyAsync\",3,4\n", "HIP API", "its rows"},
    };
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        char p[400], text[512];
        path_of(p, sizeof p, other[i].file);
        snprintf(text, sizeof text, "\"Name\",\"Calls\",\"TotalDurationNs\"\n%s", other[i].rows);
        assert_int_equal(tp_write(p, text), 0);
        assert_int_equal(compare(&out, &err, v2, p, NULL), 2);
        assert_int_equal(count_lines(err), 1);
        assert_non_null(strstr(err, p));
        assert_non_null(strstr(err, other[i].kind));
        assert_non_null(strstr(err, other[i].by));
        assert_non_null(strstr(err, "kernel_stats.csv")); /* what is accepted */
        free(out);
        free(err);
        unlink(p);
    }
    /* a kernel table with one API-like row among kernels is still kernels */
    assert_int_equal(tp_write(bad, "\"Name\",\"Calls\",\"TotalDurationNs\"\n"
                                   "\"hipFooKernel\",1,5\n\"Cijk_x\",2,7\n"), 0);
    assert_int_equal(compare(&out, &err, v2, bad, NULL), 0);
    free(out);
    free(err);
    assert_int_equal(tp_write(bad, "\"Kernel\",\"Count\"\n\"k\",1\n"), 0);
    assert_int_equal(compare(&out, &err, v2, bad, NULL), 2);
    assert_non_null(strstr(err, "not a rocprofv3 kernel_stats.csv"));
    free(out);
    free(err);
}


/* Kernel names longer than any cut: two Tensile-like names differing only at
 * the end, two only in the middle. csv and json carry them whole; the text
 * and markdown tables shorten them but keep them distinct and say where the
 * whole names are. */
#define LONG_HEAD "Cijk_Alik_Bljk_SB_MT128x128x16_MI32x32x1x2_SN_1LDSB0_APM1_ABV0_ACED0_AF0EM2_" \
                  "AF1EM1_AMAS3_ASE_ASGT_ASLT_ASAE01_ASCE01_ASEM2_BL1_BS1_DTLA0_DTLB0_DTVA0"
#define LONG_TAIL "_DTVB0_DVO0_ETSP_EPS1_FL0_GRVW4_GSU1_GSUASB_GLS0_ISA90a_IU1_K1_KLA_LBSPP128_" \
                  "LPA0_LPB8_LDL1_LRVW4_WSGRA0_WSGRB0_WG32_8_1_WGM8"
static const char *const long_names[] = {LONG_HEAD LONG_TAIL "_VW1", LONG_HEAD LONG_TAIL "_VW2",
                                         LONG_HEAD "_MIDA" LONG_TAIL, LONG_HEAD "_MIDB" LONG_TAIL};

/* The first column of each row of the table's section `title`. */
static int table_labels(const char *out, const char *title, char lab[][400], int max) {
    const char *p = strstr(out, title);
    int n = 0;
    if (!p) return 0;
    p = strchr(p, '\n') + 1;
    p = strchr(p, '\n') + 1; /* the header row */
    if (!strncmp(p, "|-", 2)) p = strchr(p, '\n') + 1;
    while (*p && *p != '\n' && n < max) {
        const char *eol = strchr(p, '\n');
        if (*p == '|') p += 2;
        const char *end = strstr(p, "  ");
        if (!end || end > eol) end = eol;
        snprintf(lab[n++], 400, "%.*s", (int)(end - p), p);
        p = eol + 1;
    }
    return n;
}

static void test_long_names(void **state) {
    (void)state;
    paths();
    char ks[400], *out, *err, csv[4096] = "\"Name\",\"Calls\",\"TotalDurationNs\"\n";
    for (int i = 0; i < 4; i++)
        snprintf(csv + strlen(csv), sizeof csv - strlen(csv), "\"%s\",%d,%d000000\n",
                 long_names[i], 10 + i, 4 - i);
    path_of(ks, sizeof ks, "long_kernel_stats.csv");
    assert_int_equal(tp_write(ks, csv), 0);
    for (int md = 0; md < 2; md++) {
        int rc = compare(&out, &err, v2, ks, md ? "--format=markdown" : "--format=table", NULL);
        if (rc) fprintf(stderr, "%s", err);
        assert_int_equal(rc, 0);
        if (getenv("TF_TEST_VERBOSE")) fputs(out, stderr);
        char lab[64][400];
        int n = table_labels(out, "Top kernels", lab, 64);
        int longs = 0;
        for (int i = 0; i < n; i++) {
            longs += !strncmp(lab[i], "Cijk", 4);
            assert_true(strlen(lab[i]) < 140); /* shortened */
            for (int j = 0; j < i; j++) assert_string_not_equal(lab[i], lab[j]);
        }
        assert_int_equal(longs, 8); /* ms and calls of each */
        assert_non_null(strstr(out, "..."));
        assert_non_null(strstr(out, "--format csv or --format json prints them whole"));
        free(out);
        free(err);
    }
    /* csv: whole */
    assert_int_equal(compare(&out, &err, v2, ks, "--format", "csv", NULL), 0);
    for (int i = 0; i < 4; i++) {
        char want[400];
        snprintf(want, sizeof want, "\"%s ms\"", long_names[i]);
        assert_non_null(strstr(out, want));
        snprintf(want, sizeof want, "\"%s calls\"", long_names[i]);
        assert_non_null(strstr(out, want));
    }
    assert_null(strstr(out, "..."));
    free(out);
    free(err);
    /* json: the runs, the sections, kernel rows with the whole name */
    assert_int_equal(compare(&out, &err, v2, ks, "--format", "json", NULL), 0);
    cJSON *doc = cJSON_Parse(out);
    assert_non_null(doc);
    assert_int_equal(cJSON_GetObjectItem(doc, "schema_version")->valueint, 1);
    cJSON *runs = cJSON_GetObjectItem(doc, "runs");
    assert_int_equal(cJSON_GetArraySize(runs), 2);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(runs, 1), "label")->valuestring,
                        "long_kernel_stats");
    int seen = 0, perf = 0;
    cJSON *sec, *row;
    cJSON_ArrayForEach(sec, cJSON_GetObjectItem(doc, "sections")) {
        cJSON_ArrayForEach(row, cJSON_GetObjectItem(sec, "rows")) {
            const char *metric = cJSON_GetObjectItem(row, "metric")->valuestring;
            cJSON *k = cJSON_GetObjectItem(row, "kernel"), *vals = cJSON_GetObjectItem(row, "values");
            assert_int_equal(cJSON_GetArraySize(vals), 2);
            if (!strcmp(metric, "samples/s")) {
                perf = 1;
                assert_true(cJSON_GetArrayItem(vals, 0)->valuedouble == 100.0);
                assert_true(cJSON_IsNull(cJSON_GetArrayItem(vals, 1))); /* no run in a csv */
            }
            for (int i = 0; i < 4; i++)
                if (k && !strcmp(k->valuestring, long_names[i]) &&
                    !strcmp(cJSON_GetObjectItem(row, "quantity")->valuestring, "calls")) {
                    seen |= 1 << i;
                    assert_true(cJSON_GetArrayItem(vals, 1)->valuedouble == 10 + i);
                    assert_true(cJSON_IsNull(cJSON_GetArrayItem(vals, 0)));
                    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(row, "ratios")), 2);
                }
        }
    }
    assert_int_equal(seen, 15);
    assert_true(perf);
    cJSON_Delete(doc);
    free(out);
    free(err);
    unlink(ks);
}

static void test_bad_files(void **state) {
    (void)state;
    paths();
    static const char *const bad[] = {"trunc.json", "array.json", "noconfig.json", "empty.json",
                                      "missing.json"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char p[400], *out, *err;
        path_of(p, sizeof p, bad[i]);
        assert_int_equal(compare(&out, &err, fa, p, NULL), 2);
        assert_string_equal(out, "");
        assert_int_equal(count_lines(err), 1);
        assert_non_null(strstr(err, p)); /* names the file */
        free(out);
        free(err);
    }
    char *out, *err;
    assert_int_equal(compare(&out, &err, fa, NULL), 2); /* one file only */
    free(out);
    free(err);
    assert_int_equal(compare(&out, &err, fa, fb, "--format", "xml", NULL), 2);
    assert_int_equal(count_lines(err), 1);
    free(out);
    free(err);
    assert_int_equal(compare(&out, &err, fa, fb, "--bogus", NULL), 2);
    free(out);
    free(err);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_comm_rows),
        cmocka_unit_test(test_csv_markdown),
        cmocka_unit_test(test_refuse_mismatch),
        cmocka_unit_test(test_refuse_precision),
        cmocka_unit_test(test_rocprof_stats),
        cmocka_unit_test(test_long_names),
        cmocka_unit_test(test_bad_files),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
