/* The backend table (src/backend/registry.h): its order, lookups by kind
 * and by name, the words of its messages, and what a build without a
 * backend says about it; and a config's backend options (backend.h). No
 * device is needed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "backend/registry.h"
#include "tinyfold.h"

static void test_order(void **state) {
    (void)state;
    static const char *const names[] = {"cpu", "cuda", "hip"};
    static const tf_backend_kind kinds[] = {TF_BACKEND_CPU, TF_BACKEND_CUDA, TF_BACKEND_HIP};
    size_t n = 0;
    for (const tf_backend_entry *e; (e = tf_backend_at(n)); n++) {
        assert_true(n < 3);
        assert_string_equal(e->name, names[n]);
        assert_int_equal(e->kind, kinds[n]);
        assert_int_equal(e->gpu, n > 0);
        assert_non_null(e->title);
        assert_non_null(e->built);
        assert_non_null(e->available);
        assert_non_null(e->brief);
        assert_non_null(e->create);
        assert_non_null(e->describe);
        assert_non_null(e->destroy);
        if (e->gpu) {
            assert_non_null(e->detect);
            assert_non_null(e->device);
            assert_non_null(e->absent);
            assert_non_null(e->configure);
            assert_non_null(e->found);
            assert_non_null(e->details);
            assert_non_null(e->events);
            if (!e->cupti) { /* the profiler's words for an events-only GPU */
                assert_non_null(e->counters);
                assert_non_null(e->records);
            }
        }
    }
    assert_int_equal(n, 3);
    assert_null(tf_backend_at(3));
    assert_true(tf_backend_at(0)->built()); /* every build has the CPU */
}

static void test_find(void **state) {
    (void)state;
    for (size_t i = 0; tf_backend_at(i); i++) {
        const tf_backend_entry *e = tf_backend_at(i);
        assert_ptr_equal(tf_backend_find(e->kind), e);
        assert_string_equal(tf_backend_kind_name(e->kind), e->name);
    }
    assert_null(tf_backend_find(TF_BACKEND_AUTO));
    assert_null(tf_backend_find((tf_backend_kind)42));
    assert_string_equal(tf_backend_kind_name(TF_BACKEND_AUTO), "auto");
    assert_string_equal(tf_backend_kind_name((tf_backend_kind)42), "?");
}

static void test_parse_name(void **state) {
    (void)state;
    tf_backend_kind k = (tf_backend_kind)42;
    char err[256] = "";
    assert_int_equal(tf_backend_parse_name("cpu", &k, err, sizeof err), 0);
    assert_int_equal(k, TF_BACKEND_CPU);
    assert_int_equal(tf_backend_parse_name("cuda", &k, err, sizeof err), 0);
    assert_int_equal(k, TF_BACKEND_CUDA);
    assert_int_equal(tf_backend_parse_name("hip", &k, err, sizeof err), 0);
    assert_int_equal(k, TF_BACKEND_HIP);
    assert_int_equal(tf_backend_parse_name("auto", &k, err, sizeof err), 0);
    assert_int_equal(k, TF_BACKEND_AUTO);
    assert_string_equal(err, "");

    /* unknown: refused with the word and every accepted one, k untouched */
    k = TF_BACKEND_HIP;
    assert_int_equal(tf_backend_parse_name("metal", &k, err, sizeof err), 1);
    assert_int_equal(k, TF_BACKEND_HIP);
    assert_string_equal(err, "backend 'metal' is not known: expected cpu, cuda, hip or auto");
    assert_int_equal(tf_backend_parse_name("CPU", &k, err, sizeof err), 1); /* exact words */
    assert_int_equal(tf_backend_parse_name("", &k, err, sizeof err), 1);
    assert_int_equal(tf_backend_parse_name(NULL, &k, err, sizeof err), 1);
    assert_int_equal(tf_backend_parse_name("x", &k, NULL, 0), 1);

    char names[128];
    tf_backend_names(names, sizeof names);
    assert_string_equal(names, "cpu, cuda, hip or auto");
    char tiny[8];
    tf_backend_names(tiny, sizeof tiny); /* cut, terminated */
    assert_string_equal(tiny, "cpu, cu");
    tf_backend_words(names, sizeof names, "|"); /* --backend's in help */
    assert_string_equal(names, "cpu|cuda|hip|auto");
    tf_backend_words(tiny, sizeof tiny, "|");
    assert_string_equal(tiny, "cpu|cud");
}

/* What the build has: the CPU first, at most one GPU backend, and the
 * words of tf_backend_usable and tf_backend_brief for a row it lacks. */
static void test_built(void **state) {
    (void)state;
    char names[128], want[128] = "cpu";
    int gpus = 0;
    for (size_t i = 1; tf_backend_at(i); i++)
        if (tf_backend_at(i)->built()) {
            gpus++;
            snprintf(want + strlen(want), sizeof want - strlen(want), " %s",
                     tf_backend_at(i)->name);
        }
    assert_true(gpus <= 1);
    tf_backend_built_names(names, sizeof names, " ");
    assert_string_equal(names, want);

    const tf_backend_entry *g = tf_backend_gpu();
    assert_non_null(g);
    assert_true(g->gpu);
    if (!gpus) assert_ptr_equal(g, tf_backend_find(TF_BACKEND_CUDA));
    for (size_t i = 1; tf_backend_at(i); i++) {
        const tf_backend_entry *e = tf_backend_at(i);
        if (e->built()) {
            assert_ptr_equal(e, g);
            continue;
        }
        char why[256] = "", brief[128] = "", expect[128];
        assert_int_equal(tf_backend_usable(e, why, sizeof why), 0);
        assert_string_equal(why, e->absent);
        tf_backend_brief(e, brief, sizeof brief);
        snprintf(expect, sizeof expect, "this build has no %s backend", e->title);
        assert_string_equal(brief, expect);
    }
    char why[8] = "x";
    assert_int_equal(tf_backend_usable(tf_backend_find(TF_BACKEND_CPU), why, sizeof why), 1);
    assert_string_equal(why, "");
}

/* auto: a built GPU row that finds a device, else the CPU */
static void test_auto(void **state) {
    (void)state;
    char why[1024] = "";
    const tf_backend_entry *e = tf_backend_auto(why, sizeof why);
    assert_non_null(e);
    assert_true(e->built());
    if (e->gpu)
        assert_ptr_equal(e, tf_backend_gpu());
    else
        assert_int_equal(e->kind, TF_BACKEND_CPU);
}

/* tf_backend_create through the table: an unknown kind is refused in one line */
static void test_create_unknown(void **state) {
    (void)state;
    tf_backend_kind k = (tf_backend_kind)42;
    tf_backend_opts bo = {.threads = 2, .kernel_level = 3};
    tf_backend *be = (tf_backend *)&k;
    const tf_ops *ops = NULL;
    char err[256] = "";
    assert_int_not_equal(tf_backend_create(&k, &bo, &be, &ops, NULL, err, sizeof err), 0);
    assert_null(be);
    assert_null(ops);
    assert_string_equal(err, "--backend: '42' is not accepted: expected cpu, cuda, hip or auto");

    /* and the CPU by its row, as `validate` creates it */
    const tf_backend_entry *cpu = tf_backend_find(TF_BACKEND_CPU);
    assert_int_equal(cpu->create(&be, &ops, &bo, err, sizeof err), 0);
    char desc[512] = "";
    cpu->describe(be, desc, sizeof desc);
    assert_true(desc[0] != '\0');
    assert_string_equal(ops->name, "cpu");
    cpu->destroy(be);
}

/* A config's backend options: --gpu-plan parsed into the plan they carry */
static void test_opts_from_config(void **state) {
    (void)state;
    tf_config c;
    tf_config_default(&c);
    c.threads = 3, c.device = 1, c.impl = TF_IMPL_V2, c.precision = TF_PREC_TF32;
    tf_backend_opts o;
    char err[512] = "";
    assert_int_equal(tf_backend_opts_from_config(&o, &c, err, sizeof err), 0);
    assert_int_equal(o.threads, 3);
    assert_int_equal(o.device, 1);
    assert_int_equal(o.kernel_level, 2);
    assert_int_equal(o.tf32, 1);
    tf_gpu_plan none;
    memset(&none, 0, sizeof none); /* every field AUTO: the device's default */
    assert_memory_equal(&o.gpu_plan, &none, sizeof none);

    snprintf(c.gpu_plan, sizeof c.gpu_plan, "portable,lane=off");
    assert_int_equal(tf_backend_opts_from_config(&o, &c, err, sizeof err), 0);
    tf_gpu_plan want;
    assert_int_equal(tf_gpu_plan_parse(c.gpu_plan, &want, err, sizeof err), 0);
    assert_memory_equal(&o.gpu_plan, &want, sizeof want);
    assert_int_equal(o.gpu_plan.lane, TF_GPU_LANE_OFF);

    snprintf(c.gpu_plan, sizeof c.gpu_plan, "gemm=fast");
    assert_int_equal(tf_backend_opts_from_config(&o, &c, err, sizeof err), 1);
    assert_non_null(strstr(err, "--gpu-plan"));
    assert_null(strchr(err, '\n'));
    memset(c.gpu_plan, 'x', sizeof c.gpu_plan);
    assert_int_equal(tf_backend_opts_from_config(&o, &c, err, sizeof err), 1);
    assert_string_equal(err, "--gpu-plan: the spec is not a terminated string");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order),
        cmocka_unit_test(test_find),
        cmocka_unit_test(test_parse_name),
        cmocka_unit_test(test_built),
        cmocka_unit_test(test_auto),
        cmocka_unit_test(test_create_unknown),
        cmocka_unit_test(test_opts_from_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
