/* NVTX3 injection library for tests/gpu/check_nvtx.sh: proves that tinyfold's
 * profiling regions reach NVTX (what Nsight Systems records) without nsys.
 *
 * An NVTX3 client dlopen()s the library named by NVTX_INJECTION64_PATH at its
 * first NVTX call and calls InitializeInjectionNvtx2 below, which installs our
 * handlers for domain creation, domain range push/pop and the plain
 * (non-domain) nvtxRangePushA/Pop. Every event is appended, one line each, to
 * the file named by NVTX_PROBE_OUT:
 *   push <domain> <name>      (domain "-" for the non-domain API)
 *   pop <domain>
 * The file is opened with O_APPEND and written with one write(2) per event, so
 * nothing is lost if the process exits without flushing.
 *
 * Build: cc -shared -fPIC -O2 -Wall -Wextra -I<cuda>/include nvtx_probe.c */
#define _POSIX_C_SOURCE 200809L
#define NVTX_NO_IMPL /* we are the tool: declarations and types only */
#include <nvtx3/nvToolsExt.h> /* also brings nvtxDetail/nvtxTypes.h: the injection types */

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROBE_MAX_DOMAINS 64

/* Our domain handles point into this table; each entry holds the name. */
struct probe_domain {
    char name[128];
};
static struct probe_domain domains[PROBE_MAX_DOMAINS];
static int ndomains;
static int out_fd = -1;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void emit(const char *line, size_t n) {
    if (out_fd < 0) return;
    while (n > 0) {
        ssize_t w = write(out_fd, line, n);
        if (w <= 0) return;
        line += w;
        n -= (size_t)w;
    }
}

static const char *domain_name(nvtxDomainHandle_t d) {
    const struct probe_domain *p = (const struct probe_domain *)(const void *)d;
    if (p >= domains && p < domains + PROBE_MAX_DOMAINS) return p->name;
    return "?";
}

static void record_push(const char *domain, const char *name) {
    char buf[512];
    int n = snprintf(buf, sizeof buf, "push %s %s\n", domain, name ? name : "(null)");
    if (n < 0) return;
    if ((size_t)n >= sizeof buf) n = (int)sizeof buf - 1, buf[n - 1] = '\n';
    pthread_mutex_lock(&lock);
    emit(buf, (size_t)n);
    pthread_mutex_unlock(&lock);
}

static void record_pop(const char *domain) {
    char buf[192];
    int n = snprintf(buf, sizeof buf, "pop %s\n", domain);
    if (n < 0) return;
    if ((size_t)n >= sizeof buf) n = (int)sizeof buf - 1, buf[n - 1] = '\n';
    pthread_mutex_lock(&lock);
    emit(buf, (size_t)n);
    pthread_mutex_unlock(&lock);
}

static const char *attr_message(const nvtxEventAttributes_t *a) {
    if (!a) return "(noattr)";
    if (a->messageType == NVTX_MESSAGE_TYPE_ASCII) return a->message.ascii;
    return "(non-ascii)";
}

/* ---- handlers ---- */

static nvtxDomainHandle_t NVTX_API probe_domain_create_a(const char *name) {
    nvtxDomainHandle_t h = NULL;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < ndomains; i++)
        if (strcmp(domains[i].name, name ? name : "") == 0) {
            h = (nvtxDomainHandle_t)(void *)&domains[i];
            break;
        }
    if (!h && ndomains < PROBE_MAX_DOMAINS) {
        struct probe_domain *d = &domains[ndomains++];
        snprintf(d->name, sizeof d->name, "%s", name ? name : "");
        for (char *c = d->name; *c; c++)
            if (*c == ' ' || *c == '\n') *c = '_';
        h = (nvtxDomainHandle_t)(void *)d;
    }
    pthread_mutex_unlock(&lock);
    return h;
}

static int NVTX_API probe_domain_push_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
    record_push(domain_name(d), attr_message(a));
    return 0;
}

static int NVTX_API probe_domain_pop(nvtxDomainHandle_t d) {
    record_pop(domain_name(d));
    return 0;
}

static int NVTX_API probe_push_a(const char *msg) {
    record_push("-", msg);
    return 0;
}

static int NVTX_API probe_push_ex(const nvtxEventAttributes_t *a) {
    record_push("-", attr_message(a));
    return 0;
}

static int NVTX_API probe_pop(void) {
    record_pop("-");
    return 0;
}

/* Installs fn at slot id of a module's table; 0 if the slot does not exist. */
static int install(const NvtxExportTableCallbacks *cb, NvtxCallbackModule mod, unsigned id,
                   NvtxFunctionPointer fn) {
    NvtxFunctionTable table = NULL;
    unsigned int size = 0;
    if (!cb->GetModuleFunctionTable(mod, &table, &size) || !table) return 0;
    if (id >= size + 1 || !table[id]) return 0; /* size excludes the unused slot 0 */
    *table[id] = fn;
    return 1;
}

/* Casting between function pointer types is the NVTX tool interface. */
#define FN(f) ((NvtxFunctionPointer)(void (*)(void))(f))

int NVTX_API InitializeInjectionNvtx2(NvtxGetExportTableFunc_t getExportTable);
int NVTX_API InitializeInjectionNvtx2(NvtxGetExportTableFunc_t getExportTable) {
    const NvtxExportTableCallbacks *cb =
        (const NvtxExportTableCallbacks *)getExportTable(NVTX_ETID_CALLBACKS);
    if (!cb || cb->struct_size < sizeof *cb) return 0;
    const char *path = getenv("NVTX_PROBE_OUT");
    if (path && *path) out_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    int ok = 1;
    ok &= install(cb, NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainCreateA, FN(probe_domain_create_a));
    ok &= install(cb, NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangePushEx, FN(probe_domain_push_ex));
    ok &= install(cb, NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangePop, FN(probe_domain_pop));
    ok &= install(cb, NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePushA, FN(probe_push_a));
    ok &= install(cb, NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePushEx, FN(probe_push_ex));
    ok &= install(cb, NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePop, FN(probe_pop));
    if (!ok) {
        static const char msg[] = "nvtx_probe: could not install the NVTX handlers\n";
        if (write(2, msg, sizeof msg - 1) < 0) return 0;
        return 0;
    }
    return 1;
}
