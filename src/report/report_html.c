/* `tinyfold report RUN... --out report.html [--force]`: one self-contained
 * page (inline CSS and SVG: nothing fetched, no script) with the pictures of
 * a profiling comparison: throughput and step time, phases, launches and the
 * kernel mix by module, the planned memory, one step's timeline, the
 * roofline from the analytic op costs under the measured ceilings, and the
 * scaling in N when a `bench --scaling` JSON is given. The page is written
 * to a temporary file beside --out and renamed, so a failure leaves no
 * half-written report. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio/outcheck.h"
#include "fileio/text_escape.h"
#include "report/commands.h"
#include "report/report.h"
#include "tinyfold.h"

#define MIB (1024.0 * 1024.0)

/* One line on stderr (control characters from the input escaped:
 * fileio/text_escape.h), exit status 2. */
__attribute__((format(printf, 1, 2))) static int fail(const char *fmt, ...) {
    char msg[2048], safe[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "tinyfold: report: %s\n", tf_text_escape(safe, sizeof safe, msg, 0));
    return 2;
}

static const char *const phase_keys[4] = {"data_ms", "forward_ms", "backward_ms", "optimizer_ms"};
static const char *const phase_names[4] = {"data", "forward", "backward", "optimizer"};
static const char *const phase_colors[4] = {"#bab0ac", "#4e79a7", "#f28e2b", "#59a14f"};

static const char *cfg_str(const rp_run *r, const char *k, char *buf, size_t n) {
    const cJSON *v = rp_get(r->run, "config", k);
    if (cJSON_IsString(v)) snprintf(buf, n, "%s", v->valuestring);
    else if (cJSON_IsNumber(v)) snprintf(buf, n, "%g", v->valuedouble);
    else if (cJSON_IsBool(v)) snprintf(buf, n, "%s", cJSON_IsTrue(v) ? "on" : "off");
    else snprintf(buf, n, "-");
    return buf;
}

/* The module a region path belongs to: forward_pass/block_0/<module>/...,
 * forward_pass/<module> outside the blocks, the phase itself otherwise. */
static void module_of(const char *path, char *out, size_t n) {
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s", path);
    char *save = NULL, *c0 = strtok_r(tmp, "/", &save), *c1 = strtok_r(NULL, "/", &save);
    if (c1 && strncmp(c1, "block_", 6) == 0) c1 = strtok_r(NULL, "/", &save);
    snprintf(out, n, "%s", c1 ? c1 : c0 ? c0 : "(none)");
}

static void css(FILE *f) {
    fputs("<style>\n"
          "body{font-family:system-ui,-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;"
          "color:#222;margin:24px auto;max-width:1180px;padding:0 16px;line-height:1.4}\n"
          "h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 6px;"
          "border-bottom:2px solid #4e79a7;padding-bottom:3px}\n"
          "p.note{color:#555;font-size:13px;margin:4px 0 10px}\n"
          ".row{display:flex;flex-wrap:wrap;gap:24px;align-items:flex-start}\n"
          "table{border-collapse:collapse;font-size:12.5px;margin:6px 0}\n"
          "th,td{padding:2px 8px;border-bottom:1px solid #e4e4e4;text-align:right}\n"
          "th:first-child,td:first-child{text-align:left}th{background:#f3f5f8}\n"
          "td.name{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:11.5px;"
          "max-width:420px;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}\n"
          "svg{font-size:11px;display:block}svg text.lab{fill:#333}svg text.val{fill:#333}"
          "svg tspan.ratio{fill:#b03a2e;font-weight:bold}\n"
          "svg text.ax{fill:#666;font-size:10px}svg .grid{stroke:#eee}\n"
          "p.warn{color:#7a1f16;background:#fdecea;border-left:4px solid #b03a2e;"
          "font-size:13px;padding:4px 8px;margin:4px 0 8px}\n"
          ".legend{font-size:11.5px;margin:4px 0}.legend span{margin-right:12px;"
          "white-space:nowrap}.legend i{display:inline-block;width:10px;height:10px;"
          "margin-right:4px;vertical-align:-1px}\n"
          ""
          "@media print{body{margin:0;max-width:none}section{break-inside:avoid}"
          "h2{break-after:avoid}}\n"
          "</style>\n",
          f);
}

/* ---- overview ---- */
static void sec_overview(FILE *f, const rp_run *r, int n) {
    fputs("<section id=\"runs\"><h2>Runs</h2><table><tr><th>run</th><th>backend</th><th>impl</th>"
          "<th>precision</th><th>graph</th><th>batch</th><th>N</th><th>S</th><th>blocks</th>"
          "<th>steps</th><th>device / BLAS</th></tr>\n",
          f);
    for (int i = 0; i < n; i++) {
        char b[11][96];
        fputs("<tr><td>", f);
        rp_esc(f, r[i].label);
        if (!r[i].run) {
            fputs("</td><td colspan=\"10\" style=\"text-align:left\">", f);
            fputs(r[i].from_csv ? "a kernel_stats.csv: its kernels only, no configuration"
                                : "a profile without its run configuration",
                  f);
            fputs("</td></tr>\n", f);
            continue;
        }
        const char *keys[9] = {"backend", "impl",   "precision", "graph",    "batch",
                               "seq_len", "n_seqs", "n_blocks",  "num_steps"};
        for (int k = 0; k < 9; k++) {
            fputs("</td><td>", f);
            rp_esc(f, cfg_str(&r[i], keys[k], b[k], sizeof b[k]));
        }
        fputs("</td><td>", f);
        const cJSON *dev = rp_get(r[i].run, "device", "name");
        const cJSON *blas = rp_get(r[i].run, "build", "blas");
        if (cJSON_IsString(dev)) rp_esc(f, dev->valuestring);
        else if (cJSON_IsString(blas)) { /* "OpenBLAS 0.3.21 NO_LAPACKE ...": name and version */
            char sh[64];
            const char *sp = strchr(blas->valuestring, ' ');
            sp = sp ? strchr(sp + 1, ' ') : NULL;
            snprintf(sh, sizeof sh, "%.*s", sp ? (int)(sp - blas->valuestring) : 63,
                     blas->valuestring);
            rp_esc(f, sh);
        }
        fputs("</td></tr>\n", f);
    }
    fputs("</table></section>\n", f);
}

/* ---- throughput and step time ---- */
static void sec_throughput(FILE *f, const rp_run *r, int n) {
    const char *labels[RP_MAX_RUNS];
    double sps[RP_MAX_RUNS], ms[RP_MAX_RUNS], gf[RP_MAX_RUNS];
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (!r[i].run) continue;
        labels[m] = r[i].label;
        sps[m] = rp_num(r[i].run, "summary", "samples_per_sec", 0);
        ms[m] = rp_num(r[i].run, "summary", "step_ms", 0);
        gf[m] = rp_num(r[i].run, "summary", "gflops", 0);
        m++;
    }
    fputs("<section id=\"throughput\"><h2>Throughput and step time</h2>", f);
    if (!m) {
        fputs("<p class=\"note\">No run JSON among the inputs.</p></section>\n", f);
        return;
    }
    fputs("<p class=\"note\">Timed steps only (warm-up excluded); red: the ratio to the first "
          "run.</p><div class=\"row\"><div><b>samples/s</b>\n",
          f);
    rp_svg_hbars(f, m, labels, sps, "samples/s", 2, "#4e79a7", 1);
    fputs("</div><div><b>step time</b>\n", f);
    rp_svg_hbars(f, m, labels, ms, "ms", 2, "#f28e2b", 1);
    fputs("</div></div><table><tr><th>run</th><th>samples/s</th><th>vs first</th>"
          "<th>ms/step</th><th>vs first</th><th>GFLOP/s (model)</th></tr>\n",
          f);
    for (int i = 0; i < m; i++) {
        fputs("<tr><td>", f);
        rp_esc(f, labels[i]);
        fprintf(f, "</td><td>%.2f</td><td>%.2f\xc3\x97</td><td>%.3f</td><td>%.2f\xc3\x97</td>"
                   "<td>%.2f</td></tr>\n",
                sps[i], sps[0] > 0 ? sps[i] / sps[0] : 0, ms[i], ms[0] > 0 ? ms[i] / ms[0] : 0,
                gf[i]);
    }
    fputs("</table></section>\n", f);
}

/* ---- phases ---- */
static void sec_phases(FILE *f, const rp_run *r, int n) {
    const char *labels[RP_MAX_RUNS];
    double v[RP_MAX_RUNS * 4];
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (!r[i].run) continue;
        labels[m] = r[i].label;
        for (int k = 0; k < 4; k++) v[m * 4 + k] = rp_num(r[i].run, "summary", phase_keys[k], 0);
        m++;
    }
    fputs("<section id=\"phases\"><h2>Step phases</h2>", f);
    if (!m) {
        fputs("<p class=\"note\">No run JSON among the inputs.</p></section>\n", f);
        return;
    }
    fputs("<p class=\"note\">Mean wall time per timed step, host clock with the device "
          "synchronised at each phase boundary.</p>\n",
          f);
    rp_svg_legend(f, 4, phase_names, phase_colors);
    rp_svg_stacked(f, m, labels, 4, phase_names, phase_colors, v, "ms", 0);
    fputs("<table><tr><th>run</th>", f);
    for (int k = 0; k < 4; k++) fprintf(f, "<th>%s ms</th><th>%%</th>", phase_names[k]);
    fputs("</tr>\n", f);
    for (int i = 0; i < m; i++) {
        double t = 0;
        for (int k = 0; k < 4; k++) t += v[i * 4 + k];
        fputs("<tr><td>", f);
        rp_esc(f, labels[i]);
        fputs("</td>", f);
        for (int k = 0; k < 4; k++)
            fprintf(f, "<td>%.3f</td><td>%.1f</td>", v[i * 4 + k],
                    t > 0 ? 100 * v[i * 4 + k] / t : 0);
        fputs("</tr>\n", f);
    }
    fputs("</table></section>\n", f);
}

/* ---- launches and the kernel mix ---- */
#define MAX_MODS 24
typedef struct {
    char name[96];
} modname;

static int mod_index(modname *mods, int *nm, const char *name) {
    for (int i = 0; i < *nm; i++)
        if (strcmp(mods[i].name, name) == 0) return i;
    if (*nm == MAX_MODS) return MAX_MODS - 1;
    snprintf(mods[*nm].name, sizeof mods[*nm].name, "%s", name);
    return (*nm)++;
}

/* The op families of the mix, by kernel (op) name prefix. */
#define NFAM 9
static const char *const fam_names[NFAM] = {"GEMM", "attention (fused)", "LayerNorm", "softmax",
                                            "permute / copy", "gating", "elementwise",
                                            "outer product (fused)", "other"};
static const char *const fam_colors[NFAM] = {"#4e79a7", "#b07aa1", "#59a14f", "#edc948",
                                             "#e15759", "#76b7b2", "#f28e2b", "#9c755f",
                                             "#bab0ac"};
static int family(const char *op) {
    static const struct {
        const char *prefix;
        int fam;
    } map[] = {{"sgemm", 0},   {"attn_", 1},   {"layernorm", 2},  {"softmax", 3},
               {"permute", 4}, {"copy", 4},    {"gate", 5},       {"add", 6},
               {"mul", 6},     {"scale", 6},   {"relu", 6},       {"sigmoid", 6},
               {"zero", 6},    {"sum_", 6},    {"opm_", 7}};
    for (size_t k = 0; k < sizeof map / sizeof map[0]; k++)
        if (strncmp(op, map[k].prefix, strlen(map[k].prefix)) == 0) return map[k].fam;
    return NFAM - 1;
}

static void op_mix(FILE *f, const rp_run *r) {
    modname mods[MAX_MODS];
    int nm = 0;
    double v[MAX_MODS][NFAM];
    memset(v, 0, sizeof v);
    double steps = rp_num(r->profile, "op_costs", "steps_collected", 1);
    const cJSON *o;
    cJSON_ArrayForEach(o, rp_get(r->profile, "op_costs", "ops")) {
        const cJSON *pj = rp_get(o, "path", NULL), *nj = rp_get(o, "name", NULL);
        if (!cJSON_IsString(pj) || !cJSON_IsString(nj)) continue;
        char mod[96];
        module_of(pj->valuestring, mod, sizeof mod);
        int k = mod_index(mods, &nm, mod);
        v[k][family(nj->valuestring)] += rp_num(o, "kernel_ns", NULL, 0) / (steps > 0 ? steps : 1) * 1e-6;
    }
    if (!nm) return;
    /* modules by time, largest first */
    int order[MAX_MODS];
    double tot[MAX_MODS];
    for (int k = 0; k < nm; k++) {
        order[k] = k;
        tot[k] = 0;
        for (int j = 0; j < NFAM; j++) tot[k] += v[k][j];
    }
    for (int a = 1; a < nm; a++)
        for (int b = a; b > 0 && tot[order[b]] > tot[order[b - 1]]; b--) {
            int t = order[b];
            order[b] = order[b - 1];
            order[b - 1] = t;
        }
    const char *labels[MAX_MODS];
    double vv[MAX_MODS * NFAM];
    int rows = 0;
    for (int a = 0; a < nm; a++) {
        if (tot[order[a]] <= 0) continue;
        labels[rows] = mods[order[a]].name;
        for (int j = 0; j < NFAM; j++) vv[rows * NFAM + j] = v[order[a]][j];
        rows++;
    }
    fputs("<div><p class=\"note\"><b>", f);
    rp_esc(f, r->label);
    fputs("</b>: each module's time per step by op family (all blocks; the ops as the model "
          "issues them, each with the kernels it launched)</p>\n",
          f);
    rp_svg_legend(f, NFAM, fam_names, fam_colors);
    rp_svg_stacked(f, rows, labels, NFAM, fam_names, fam_colors, vv, "ms", 0);
    fputs("</div>\n", f);
}

static void sec_kernels(FILE *f, const rp_run *r, int n) {
    fputs("<section id=\"kernels\"><h2>Launches and the kernel mix</h2>\n", f);
    const char *labels[RP_MAX_RUNS];
    double lps[RP_MAX_RUNS];
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (!r[i].profile) continue;
        labels[m] = r[i].label;
        lps[m++] = rp_num(r[i].profile, "launches_per_step", NULL, 0);
    }
    if (m) {
        fputs("<div class=\"row\"><div><b>kernel launches per step</b>\n", f);
        rp_svg_hbars(f, m, labels, lps, "", 0, "#76b7b2", 1);
        fputs("</div></div>\n", f);
    }
    /* kernel time per module (forward + backward), ms per step */
    modname mods[MAX_MODS];
    int nm = 0;
    double v[RP_MAX_RUNS * MAX_MODS];
    memset(v, 0, sizeof v);
    m = 0;
    for (int i = 0; i < n; i++) {
        if (!r[i].profile) continue;
        double steps = rp_num(r[i].profile, "steps_collected", NULL, 1);
        const cJSON *mj = rp_get(r[i].profile, "modules", NULL), *o;
        cJSON_ArrayForEach(o, mj) {
            const cJSON *nmj = rp_get(o, "name", NULL);
            if (!cJSON_IsString(nmj)) continue;
            int k = mod_index(mods, &nm, nmj->valuestring);
            v[m * MAX_MODS + k] += rp_num(o, "total_ns", NULL, 0) / (steps > 0 ? steps : 1) * 1e-6;
        }
        labels[m++] = r[i].label;
    }
    if (m && nm) {
        const char *names[MAX_MODS], *cols[MAX_MODS];
        double vv[RP_MAX_RUNS * MAX_MODS];
        for (int k = 0; k < nm; k++) {
            names[k] = mods[k].name;
            cols[k] = rp_module_color(mods[k].name);
        }
        for (int i = 0; i < m; i++)
            for (int k = 0; k < nm; k++) vv[i * nm + k] = v[i * MAX_MODS + k];
        fputs("<p class=\"note\">Time per module per step, all blocks, forward and backward "
              "(kernel time on a GPU, host time around the ops on the CPU).</p>\n",
              f);
        rp_svg_legend(f, nm, names, cols);
        rp_svg_stacked(f, m, labels, nm, names, cols, vv, "ms", 0);
    }
    /* the op mix of each module: time per step by op family */
    for (int i = 0; i < n; i++)
        if (r[i].profile && rp_get(r[i].profile, "op_costs", "ops")) op_mix(f, &r[i]);
    /* the top kernels of each run */
    fputs("<div class=\"row\">\n", f);
    for (int i = 0; i < n; i++) {
        if (!r[i].nkernels) continue;
        double tot = 0, steps = r[i].profile ? rp_num(r[i].profile, "steps_collected", NULL, 1) : 1;
        for (size_t k = 0; k < r[i].nkernels; k++) tot += r[i].kernels[k].total_ns;
        fputs("<div><b>", f);
        rp_esc(f, r[i].label);
        fprintf(f, "</b>: top kernels of %zu%s<table><tr><th>kernel</th><th>calls%s</th>"
                   "<th>ms%s</th><th>%%</th></tr>\n",
                r[i].nkernels, r[i].from_csv ? " (kernel_stats.csv)" : "",
                r[i].profile ? "/step" : "", r[i].profile ? "/step" : "");
        for (size_t k = 0; k < r[i].nkernels && k < 12; k++) {
            const rp_kernel *kk = &r[i].kernels[k];
            fputs("<tr><td class=\"name\" title=\"", f);
            rp_esc(f, kk->name);
            fputs("\">", f);
            rp_esc(f, kk->name);
            fprintf(f, "</td><td>%.0f</td><td>%.3f</td><td>%.1f</td></tr>\n", kk->calls / steps,
                    kk->total_ns / steps * 1e-6, tot > 0 ? 100 * kk->total_ns / tot : 0);
        }
        fputs("</table></div>\n", f);
    }
    fputs("</div></section>\n", f);
}

/* ---- memory ---- */
/* Segments: parameters, gradients, optimizer state, each module's saved
 * activations (memory.arena of the profile: the forward modules' kept
 * bytes over all blocks), the backward's working set above them, the rest
 * of the measured peak. Without memory.arena the arena is one segment. */
#define MEM_FIXED 3
static void sec_memory(FILE *f, const rp_run *r, int n) {
    static const char *const fixed[MEM_FIXED] = {"parameters", "gradients",
                                                 "optimizer state (Adam m, v)"};
    static const char *const fixed_cols[MEM_FIXED] = {"#2f4b7c", "#5f7fb0", "#8fa9d6"};
    modname mods[MAX_MODS];
    int nm = 0;
    enum { SEGS = MEM_FIXED + MAX_MODS + 3 };
    const char *labels[RP_MAX_RUNS];
    double v[RP_MAX_RUNS][SEGS], peak[RP_MAX_RUNS], arena_b[RP_MAX_RUNS];
    int m = 0, acts_any = 0;
    memset(v, 0, sizeof v);
    for (int i = 0; i < n; i++) {
        if (!r[i].run) continue;
        double P = rp_num(r[i].run, "parameters", NULL, 0) * 4.0 / MIB;
        double arena = rp_num(r[i].run, "summary", "arena_bytes", 0) / MIB;
        double pk = rp_num(r[i].run, "summary", "peak_memory_bytes", 0) / MIB;
        double *row = v[m];
        row[0] = P, row[1] = P, row[2] = 2 * P;
        const cJSON *regs = rp_get(rp_get(r[i].profile, "memory", "arena"), "regions", NULL), *o;
        double acts = 0, bwd = 0;
        cJSON_ArrayForEach(o, regs) {
            const cJSON *pj = rp_get(o, "path", NULL);
            if (!cJSON_IsString(pj)) continue;
            const char *path = pj->valuestring;
            if (strcmp(path, "backward_pass") == 0) bwd = rp_num(o, "peak_bytes", NULL, 0) / MIB;
            if (strncmp(path, "forward_pass/", 13) != 0) continue;
            const char *rest = path + 13;
            if (strncmp(rest, "block_", 6) == 0) { /* forward_pass/block_N/module */
                rest = strchr(rest, '/');
                if (!rest) continue;
                rest++;
            }
            if (strchr(rest, '/')) continue; /* deeper: counted in its module */
            double kept = rp_num(o, "kept_bytes", NULL, 0) / MIB;
            if (kept <= 0) continue;
            row[MEM_FIXED + mod_index(mods, &nm, rest)] += kept;
            acts += kept;
        }
        if (acts > 0) {
            acts_any = 1;
            row[MEM_FIXED + MAX_MODS] = bwd;
            /* what the regions leave of the arena (0 up to rounding) */
            double rest = arena - acts - bwd;
            row[MEM_FIXED + MAX_MODS + 1] = rest > 1e-6 * arena ? rest : 0;
        } else {
            row[MEM_FIXED + MAX_MODS + 1] = arena;
        }
        double known = 4 * P + arena;
        row[MEM_FIXED + MAX_MODS + 2] = pk > known ? pk - known : 0;
        peak[m] = pk;
        arena_b[m] = arena;
        labels[m++] = r[i].label;
    }
    fputs("<section id=\"memory\"><h2>Memory: the planned peak</h2>", f);
    if (!m) {
        fputs("<p class=\"note\">No run JSON among the inputs.</p></section>\n", f);
        return;
    }
    fputs("<p class=\"note\">Parameters, their gradients and Adam's two moments are fp32 "
          "copies of the parameter count. The activation arena is planned before the first "
          "step: each module's activations saved for the backward (forward, all blocks; what a "
          "block keeps outside its modules beside them), then "
          "the backward's working set above them (its temporaries and the gradients in "
          "flight). The rest of the measured backend peak is the batch buffers and the "
          "libraries' own.</p>\n",
          f);
    /* the segments in use, in a fixed order */
    const char *names[SEGS], *cols[SEGS];
    double vv[RP_MAX_RUNS * SEGS];
    int idx[SEGS], ns = 0;
    for (int k = 0; k < SEGS; k++) {
        int used = 0;
        for (int i = 0; i < m; i++) used |= v[i][k] > 0;
        if (!used) continue;
        idx[ns] = k;
        if (k < MEM_FIXED) {
            names[ns] = fixed[k];
            cols[ns] = fixed_cols[k];
        } else if (k < MEM_FIXED + MAX_MODS) {
            names[ns] = mods[k - MEM_FIXED].name;
            cols[ns] = rp_module_color(mods[k - MEM_FIXED].name);
        } else if (k == MEM_FIXED + MAX_MODS) {
            names[ns] = "backward working set";
            cols[ns] = "#6b6b6b";
        } else if (k == MEM_FIXED + MAX_MODS + 1) {
            names[ns] = acts_any ? "forward, between the modules" : "arena (not split)";
            cols[ns] = "#9d9d9d";
        } else {
            names[ns] = "other (batch, libraries)";
            cols[ns] = "#d4d4d4";
        }
        ns++;
    }
    for (int i = 0; i < m; i++)
        for (int k = 0; k < ns; k++) vv[i * ns + k] = v[i][idx[k]];
    rp_svg_legend(f, ns, names, cols);
    fputs("<div class=\"row\"><div>", f);
    rp_svg_stacked(f, m, labels, ns, names, cols, vv, "MiB", 0);
    /* one row per segment, one column per run */
    fputs("</div><table><tr><th>MiB</th>", f);
    for (int i = 0; i < m; i++) {
        fputs("<th>", f);
        rp_esc(f, labels[i]);
        fputs("</th>", f);
    }
    fputs("</tr>\n", f);
    for (int k = 0; k < ns; k++) {
        fputs("<tr><td>", f);
        rp_esc(f, names[k]);
        fputs("</td>", f);
        for (int i = 0; i < m; i++) fprintf(f, "<td>%.2f</td>", vv[i * ns + k]);
        fputs("</tr>\n", f);
    }
    fputs("<tr><td>arena (planned)</td>", f);
    for (int i = 0; i < m; i++) fprintf(f, "<td>%.2f</td>", arena_b[i]);
    fputs("</tr><tr><td><b>peak</b></td>", f);
    for (int i = 0; i < m; i++) fprintf(f, "<td><b>%.2f</b></td>", peak[i]);
    fputs("</tr><tr><td>peak vs first</td>", f);
    for (int i = 0; i < m; i++)
        fprintf(f, "<td>%.2f\xc3\x97</td>", peak[0] > 0 ? peak[i] / peak[0] : 0);
    fputs("</tr></table></div>\n", f);
    fputs("</section>\n", f);
}

/* ---- one step's timeline ---- */
typedef struct {
    int pid, tid;
    char name[64];
} track;

/* The last traced step (the steadiest): its start and end in us, its name. */
static int last_step(const rp_run *r, double *t0, double *t1, char *name, size_t n) {
    const cJSON *e;
    *t0 = *t1 = -1;
    cJSON_ArrayForEach(e, rp_get(r->trace, "traceEvents", NULL)) {
        const cJSON *ph = rp_get(e, "ph", NULL), *nm = rp_get(e, "name", NULL);
        if (!cJSON_IsString(ph) || strcmp(ph->valuestring, "X") || rp_num(e, "tid", NULL, -1) != 2 ||
            rp_num(e, "pid", NULL, -1) != 1)
            continue;
        *t0 = rp_num(e, "ts", NULL, 0);
        *t1 = *t0 + rp_num(e, "dur", NULL, 0);
        snprintf(name, n, "%s", cJSON_IsString(nm) ? nm->valuestring : "step");
    }
    return *t0 >= 0 && *t1 > *t0;
}

/* span_us: the time axis's length, one for every timeline on the page (the
 * longest step), so that runs side by side read at one scale */
static void timeline_one(FILE *f, const rp_run *r, double span_us) {
    const cJSON *ev = rp_get(r->trace, "traceEvents", NULL), *e;
    double t0, t1;
    char stepname[64] = "";
    if (!last_step(r, &t0, &t1, stepname, sizeof stepname)) {
        fputs("<p class=\"note\">The trace holds no step.</p>\n", f);
        return;
    }
    track tr[32];
    int nt = 0;
    cJSON_ArrayForEach(e, ev) { /* kernel tracks: the host's cpu ops and every GPU track */
        const cJSON *ph = rp_get(e, "ph", NULL);
        if (!cJSON_IsString(ph) || strcmp(ph->valuestring, "X")) continue;
        int pid = rp_int(e, "pid", NULL, 0), tid = rp_int(e, "tid", NULL, 0);
        if (pid == 1 && tid < 3) continue;
        int k = 0;
        while (k < nt && (tr[k].pid != pid || tr[k].tid != tid)) k++;
        if (k == nt && nt < 32) {
            tr[nt].pid = pid;
            tr[nt].tid = tid;
            snprintf(tr[nt].name, sizeof tr[nt].name, "%s %d", pid == 1 ? "ops" : "stream", tid);
            nt++;
        }
    }
    cJSON_ArrayForEach(e, ev) { /* track names */
        const cJSON *ph = rp_get(e, "ph", NULL), *nm = rp_get(e, "args", "name");
        if (!cJSON_IsString(ph) || strcmp(ph->valuestring, "M") || !cJSON_IsString(nm)) continue;
        int pid = rp_int(e, "pid", NULL, 0), tid = rp_int(e, "tid", NULL, 0);
        for (int k = 0; k < nt; k++)
            if (tr[k].pid == pid && tr[k].tid == tid)
                snprintf(tr[k].name, sizeof tr[k].name, "%s", nm->valuestring);
    }
    const int label_w = 160, w = 1120, plot = w - label_w - 10, band_h = 18, gap = 4;
    const int nbands = 3, top = 16;
    int h = top + nbands * (band_h + 2) + gap + nt * (band_h + 6) + 24;
    if (span_us < t1 - t0) span_us = t1 - t0;
    double scale = plot / span_us;
    fprintf(f, "<p class=\"note\"><b>");
    rp_esc(f, r->label);
    fprintf(f, "</b>, %s: <span class=\"stepms\">%.3f ms</span> on a time axis of "
               "<span class=\"axisms\">%.3f ms</span>. Region bands (phase, block, module) "
               "above the kernel spans, one track per stream or lane; colour: the module. Hover "
               "for names and durations.</p>\n",
            stepname, (t1 - t0) * 1e-3, span_us * 1e-3);
    fprintf(f, "<svg class=\"chart\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n", w, h, w,
            h);
    static const char *const band_names[3] = {"phase", "block", "module"};
    for (int b = 0; b < nbands; b++)
        fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"lab\" text-anchor=\"end\">%s</text>\n",
                label_w - 6, top + b * (band_h + 2) + 13, band_names[b]);
    for (int k = 0; k < nt; k++) {
        fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"lab\" text-anchor=\"end\">", label_w - 6,
                top + nbands * (band_h + 2) + gap + k * (band_h + 6) + 13);
        rp_esc(f, tr[k].name);
        fputs("</text>\n", f);
    }
    /* the time axis: ticks at a round step */
    double span_ms = span_us * 1e-3, tick = pow(10, floor(log10(span_ms)));
    if (span_ms / tick < 3) tick /= 5;
    else if (span_ms / tick < 6) tick /= 2;
    const int nticks = tick > 0 && isfinite(span_ms) ? (int)fmin(span_ms / tick + 1, 100) : 0;
    for (int k = 0; k < nticks; k++) {
        const double t = k * tick;
        double x = label_w + t * 1e3 * scale;
        fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" class=\"grid\"/>"
                   "<text x=\"%.1f\" y=\"10\" class=\"ax\" text-anchor=\"middle\">%g ms</text>\n",
                x, x, top, h - 20, x, t);
    }
    cJSON_ArrayForEach(e, ev) {
        const cJSON *ph = rp_get(e, "ph", NULL), *nm = rp_get(e, "name", NULL);
        if (!cJSON_IsString(ph) || strcmp(ph->valuestring, "X") || !cJSON_IsString(nm)) continue;
        double ts = rp_num(e, "ts", NULL, 0), dur = rp_num(e, "dur", NULL, 0);
        if (ts + dur < t0 || ts > t1) continue;
        int pid = rp_int(e, "pid", NULL, 0), tid = rp_int(e, "tid", NULL, 0);
        int y;
        const char *path;
        const cJSON *pj;
        char mod[96];
        if (pid == 1 && tid == 1) { /* a region */
            pj = rp_get(e, "args", "path");
            path = cJSON_IsString(pj) ? pj->valuestring : nm->valuestring;
            int depth = 0;
            for (const char *c = path; *c; c++) depth += *c == '/';
            int inblock = strstr(path, "/block_") != NULL;
            int band = depth == 0 ? 0 : inblock ? (depth == 1 ? 1 : depth == 2 ? 2 : -1)
                                                : (depth == 1 ? 2 : -1);
            if (band < 0) continue;
            y = top + band * (band_h + 2);
            module_of(path, mod, sizeof mod);
        } else if (pid == 1 && tid < 3) {
            continue;
        } else {
            int k = 0;
            while (k < nt && (tr[k].pid != pid || tr[k].tid != tid)) k++;
            if (k == nt) continue;
            y = top + nbands * (band_h + 2) + gap + k * (band_h + 6);
            pj = rp_get(e, "args", "region");
            path = cJSON_IsString(pj) ? pj->valuestring : "";
            module_of(path, mod, sizeof mod);
        }
        double x0 = ts < t0 ? t0 : ts, x1 = ts + dur > t1 ? t1 : ts + dur;
        double bw = (x1 - x0) * scale;
        const char *col = pid == 1 && tid == 1 && strncmp(nm->valuestring, "block_", 6) == 0
                              ? "#9fb3c8"
                              : rp_module_color(mod);
        if (pid == 1 && tid == 1 && !strchr(path, '/')) {
            static const char *const regions[4] = {"data_loading", "forward_pass",
                                                   "backward_pass", "optimizer_step"};
            for (int k = 0; k < 4; k++)
                if (strcmp(path, regions[k]) == 0) col = phase_colors[k];
        }
        fprintf(f, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\"><title>",
                label_w + (x0 - t0) * scale, y, bw < 0.4 ? 0.4 : bw, band_h, col);
        rp_esc(f, nm->valuestring);
        if (path[0]) {
            fputs(" \xc2\xb7 ", f);
            rp_esc(f, path);
        }
        fprintf(f, ": %.1f us</title></rect>\n", dur);
        if (bw > 60 && pid == 1 && tid == 1) {
            fprintf(f, "<text x=\"%.1f\" y=\"%d\" font-size=\"10\" fill=\"#fff\" "
                       "pointer-events=\"none\">",
                    label_w + (x0 - t0) * scale + 3, y + 13);
            const char *lab = nm->valuestring;
            char cut[64];
            snprintf(cut, sizeof cut, "%.*s", (int)(bw / 6.2), lab);
            rp_esc(f, cut);
            fputs("</text>\n", f);
        }
    }
    /* where the step ends when a longer one sets the axis */
    if (t1 - t0 < span_us * 0.999) {
        double xe = label_w + (t1 - t0) * scale;
        fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#b03a2e\" "
                   "stroke-dasharray=\"4,3\"><title>end of %s: %.3f ms</title></line>"
                   "<text x=\"%.1f\" y=\"%d\" class=\"ax\" style=\"fill:#b03a2e\">end "
                   "%.3f ms</text>\n",
                xe, xe, top, h - 20, stepname, (t1 - t0) * 1e-3, xe + 3, h - 8,
                (t1 - t0) * 1e-3);
    }
    fputs("</svg>\n", f);
}

static void sec_timeline(FILE *f, const rp_run *r, int n) {
    fputs("<section id=\"timeline\"><h2>One step's timeline</h2>\n", f);
    double span = 0, a, b;
    char nm[64];
    for (int i = 0; i < n; i++)
        if (r[i].trace && last_step(&r[i], &a, &b, nm, sizeof nm) && b - a > span) span = b - a;
    if (span > 0)
        fprintf(f, "<p class=\"note\">Every timeline below is drawn on one time scale, "
                   "0 to %.3f ms (the longest of their steps): equal lengths are equal times.</p>\n",
                span * 1e-3);
    int any = 0;
    for (int i = 0; i < n; i++) {
        if (!r[i].trace) continue;
        timeline_one(f, &r[i], span);
        any = 1;
    }
    if (!any) fputs("<p class=\"note\">No trace.json among the inputs.</p>\n", f);
    fputs("</section>\n", f);
}

/* ---- the roofline ---- */
#define MAX_PTS 400
typedef struct {
    char mod[96], op[96];
    double flops, bytes, ns;
} rl_point;

static int by_ns(const void *a, const void *b) {
    double x = ((const rl_point *)a)->ns, y = ((const rl_point *)b)->ns;
    return x < y ? 1 : x > y ? -1 : 0;
}

static double lx(double v, double lo, double hi, double px) {
    return (log10(v) - log10(lo)) / (log10(hi) - log10(lo)) * px;
}

/* the gridlines lo, 10 lo, ... up to hi: how many, 0 where the range is not
 * positive and finite (a file's values can be anything), at most 40 */
static int log_ticks(double lo, double hi) {
    if (!(lo > 0) || !isfinite(lo) || !isfinite(hi) || hi < lo) return 0;
    const double n = floor(log10(hi * 1.001 / lo)) + 1;
    return n < 1 ? 1 : n > 40 ? 40 : (int)n;
}

static void roofline_one(FILE *f, const rp_run *r) {
    const cJSON *ops = rp_get(r->profile, "op_costs", "ops"), *o;
    double peak = rp_num(r->profile, "ceilings", "compute_flops_per_s", 0);
    double bw = rp_num(r->profile, "ceilings", "memory_bytes_per_s", 0);
    /* a --precision tf32 run is held to the TF32 GEMM's ceiling, a bf16 or
     * fp16 run to the half GEMM's (where measured), fp32's beside it */
    const double tf32 = rp_num(r->profile, "ceilings", "compute_tf32_flops_per_s", 0);
    double second = tf32;
    const double half = rp_num(r->profile, "ceilings", "compute_half_flops_per_s", 0);
    const cJSON *prec = rp_get(r->run, "config", "precision");
    const int is_half_prec = cJSON_IsString(prec) && (!strcmp(prec->valuestring, "bf16") ||
                                                     !strcmp(prec->valuestring, "fp16"));
    int is_tf32 = second > 0 && cJSON_IsString(prec) && strcmp(prec->valuestring, "tf32") == 0;
    const int is_half = half > 0 && is_half_prec;
    if (is_tf32 || is_half) {
        second = peak;
        peak = is_tf32 ? tf32 : half;
    }
    double steps = rp_num(r->profile, "op_costs", "steps_collected", 1);
    if (steps <= 0) steps = 1;
    static rl_point pts[MAX_PTS];
    int np = 0;
    double total_ns = 0;
    cJSON_ArrayForEach(o, ops) {
        const cJSON *pj = rp_get(o, "path", NULL), *nj = rp_get(o, "name", NULL);
        double fl = rp_num(o, "flops", NULL, -1), by = rp_num(o, "bytes", NULL, -1);
        double ns = rp_num(o, "kernel_ns", NULL, 0) / steps;
        if (!cJSON_IsString(pj) || !cJSON_IsString(nj) || fl < 0 || by <= 0 || ns <= 0) continue;
        char mod[96];
        module_of(pj->valuestring, mod, sizeof mod);
        int k = 0;
        while (k < np && (strcmp(pts[k].mod, mod) || strcmp(pts[k].op, nj->valuestring))) k++;
        if (k == np) {
            if (np == MAX_PTS) continue;
            memset(&pts[np], 0, sizeof pts[np]);
            snprintf(pts[np].mod, sizeof pts[np].mod, "%s", mod);
            snprintf(pts[np].op, sizeof pts[np].op, "%s", nj->valuestring);
            np++;
        }
        pts[k].flops += fl;
        pts[k].bytes += by;
        pts[k].ns += ns;
        total_ns += ns;
    }
    fputs("<div><p class=\"note\"><b>", f);
    rp_esc(f, r->label);
    fputs("</b>: ", f);
    if (!np || peak <= 0 || bw <= 0) {
        fputs("this profile has no op costs or no measured ceilings (a profile written before "
              "they were recorded, or a kernel_stats.csv).</p></div>\n",
              f);
        return;
    }
    char a[32], b[32];
    rp_fmt_si(a, sizeof a, peak, "FLOP/s");
    rp_fmt_si(b, sizeof b, bw, "B/s");
    const cJSON *ck = rp_get(r->profile, "ceilings", "compute_kernel");
    const cJSON *mk = rp_get(r->profile, "ceilings", "memory_kernel");
    fprintf(f, "compute ceiling %s (", a);
    if (is_tf32) fputs("the same GEMM on TF32 tensor cores: this run's precision", f);
    else if (is_half) fputs("the same GEMM on bf16 operands with fp32 sums: this run's precision", f);
    else if (cJSON_IsString(ck)) rp_esc(f, ck->valuestring);
    /* no half-precision GEMM ceiling was measured: say what the points are held to */
    if (is_half_prec && !is_half) fprintf(f, "; an fp32 ceiling, this run is %s", prec->valuestring);
    fprintf(f, "), memory ceiling %s (", b);
    if (cJSON_IsString(mk)) rp_esc(f, mk->valuestring);
    fprintf(f, "), measured when the profile started; ridge %.1f FLOP/byte. Each point is one op "
               "of one module over all blocks; area: its share of the op time. A point above the "
               "bandwidth slope ran from cache (its bytes fit there); ops without FLOPs "
               "(permutes, copies) are in the table only.</p>\n",
            peak / bw);
    qsort(pts, (size_t)np, sizeof pts[0], by_ns);
    double xlo = 1e9, xhi = 0, ylo = 1e30, pmax = 0;
    int above = 0; /* ops faster than the compute ceiling */
    const char *above_op = "", *above_mod = "";
    for (int k = 0; k < np; k++) {
        double ai = pts[k].flops > 0 ? pts[k].flops / pts[k].bytes : 0;
        double perf = pts[k].flops / (pts[k].ns * 1e-9);
        if (ai > 0 && ai < xlo) xlo = ai;
        if (ai > xhi) xhi = ai;
        if (perf > 0 && perf < ylo) ylo = perf;
        if (perf > peak) above++;
        if (perf > pmax) {
            pmax = perf;
            above_op = pts[k].op;
            above_mod = pts[k].mod;
        }
    }
    int low = above > 0;
    if (low) {
        /* the ceiling was measured below what the run achieved (a loaded
         * machine when it was measured, or a slower kernel than the run's):
         * the roof is not a bound, and saying so beats points above it */
        char pm[32];
        rp_fmt_si(pm, sizeof pm, pmax, "FLOP/s");
        fprintf(f, "<p class=\"warn\">Compute ceiling measured low: %d op%s ran faster than it "
                   "(best ",
                above, above == 1 ? "" : "s");
        rp_esc(f, above_mod);
        fputs(" \xc2\xb7 ", f);
        rp_esc(f, above_op);
        fprintf(f, ", %s, %.0f%% of the ceiling). The machine was likely busy when the ceiling "
                   "was measured; the roof is drawn dashed and the table's %% of roof overstates.</p>\n",
                pm, 100 * pmax / peak);
    }
    xlo = pow(10, floor(log10(xlo > 0 && xlo < 1e9 ? xlo : 0.01)));
    xhi = pow(10, ceil(log10(fmax(xhi, peak / bw) * 2)));
    double yhi = pow(10, ceil(log10(fmax(fmax(peak, second), pmax) * 1.5)));
    ylo = pow(10, floor(log10(ylo < 1e30 ? ylo : peak / 1e4)));
    if (yhi / ylo > 1e7) ylo = yhi / 1e7;
    const int W = 560, H = 380, L = 60, T = 12, PW = W - L - 16, PH = H - T - 40;
    fprintf(f, "<svg class=\"chart\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n", W, H, W,
            H);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#fbfbfd\" "
               "stroke=\"#ccc\"/>\n",
            L, T, PW, PH);
    double d = xlo;
    for (int k = 0, nt = log_ticks(xlo, xhi); k < nt; k++, d *= 10) {
        double x = L + lx(d, xlo, xhi, PW);
        fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" class=\"grid\"/>"
                   "<text x=\"%.1f\" y=\"%d\" class=\"ax\" text-anchor=\"middle\">%g</text>\n",
                x, x, T, T + PH, x, T + PH + 14, d);
    }
    d = ylo;
    for (int k = 0, nt = log_ticks(ylo, yhi); k < nt; k++, d *= 10) {
        double y = T + PH - lx(d, ylo, yhi, PH);
        char s[32];
        rp_fmt_si(s, sizeof s, d, "");
        fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>"
                   "<text x=\"%d\" y=\"%.1f\" class=\"ax\" text-anchor=\"end\">%s</text>\n",
                L, L + PW, y, y, L - 4, y + 3, s);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"ax\" text-anchor=\"middle\">arithmetic intensity "
               "(FLOP / minimum byte)</text>\n",
            L + PW / 2, H - 6);
    fprintf(f, "<text x=\"12\" y=\"%d\" class=\"ax\" transform=\"rotate(-90 12 %d)\" "
               "text-anchor=\"middle\">achieved FLOP/s</text>\n",
            T + PH / 2, T + PH / 2);
    /* the roof: bandwidth slope up to the ridge, then the compute ceiling */
    double ridge = peak / bw, xa = xlo, ya = xa * bw;
    if (ya < ylo) {
        xa = ylo / bw;
        ya = ylo;
    }
    double yr = T + PH - lx(peak, ylo, yhi, PH), xrg = L + lx(ridge, xlo, xhi, PW);
    fprintf(f, "<polyline fill=\"none\" stroke=\"#333\" stroke-width=\"2\" points=\"%.1f,%.1f "
               "%.1f,%.1f\"><title>bandwidth roof: AI x %s</title></polyline>\n",
            L + lx(xa, xlo, xhi, PW), T + PH - lx(ya, ylo, yhi, PH), xrg, yr, b);
    if (low)
        fprintf(f, "<line class=\"roof-low\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" "
                   "stroke=\"#b03a2e\" stroke-width=\"2\" stroke-dasharray=\"6,4\"><title>compute "
                   "roof %s: measured low (ops ran above it)</title></line>\n"
                   "<text x=\"%d\" y=\"%.1f\" class=\"ax\" style=\"fill:#b03a2e\" "
                   "text-anchor=\"end\">%s (measured low)</text>\n",
                xrg, yr, L + PW, yr, a, L + PW - 4, yr + 12, a);
    else
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#333\" "
                   "stroke-width=\"2\"><title>compute roof: %s</title></line>\n"
                   "<text x=\"%d\" y=\"%.1f\" class=\"ax\" text-anchor=\"end\">%s</text>\n",
                xrg, yr, L + PW, yr, a, L + PW - 4, yr - 4, a);
    if (second > 0 && second < yhi && second > ylo) {
        /* the other GEMM ceiling (CUDA: fp32 beside TF32), dashed, from its ridge on */
        char t[40];
        rp_fmt_si(t, sizeof t, second, is_tf32 || is_half ? "FLOP/s fp32" : "FLOP/s TF32");
        double xr = L + lx(fmax(second / bw, xlo), xlo, xhi, PW);
        double yt = T + PH - lx(second, ylo, yhi, PH);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#333\" "
                   "stroke-dasharray=\"5,3\"><title>%s</title></line>"
                   "<text x=\"%d\" y=\"%.1f\" class=\"ax\" text-anchor=\"end\">%s</text>\n",
                xr, yt, L + PW, yt, t, L + PW - 4, yt - 4, t);
    }
    fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#999\" "
               "stroke-dasharray=\"3,3\"/>\n",
            L + lx(ridge, xlo, xhi, PW), L + lx(ridge, xlo, xhi, PW), T, T + PH);
    for (int k = np - 1; k >= 0; k--) {
        double ai = pts[k].flops / pts[k].bytes, perf = pts[k].flops / (pts[k].ns * 1e-9);
        if (ai <= 0 || perf <= 0) continue;
        double roof = fmin(peak, ai * bw), share = pts[k].ns / total_ns;
        double x = L + lx(fmax(ai, xlo), xlo, xhi, PW);
        double y = T + PH - lx(fmin(fmax(perf, ylo), yhi), ylo, yhi, PH);
        char pf[32];
        rp_fmt_si(pf, sizeof pf, perf, "FLOP/s");
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" fill=\"%s\" fill-opacity=\"0.8\" "
                   "stroke=\"#333\" stroke-width=\"0.5\"><title>",
                x, y, 2.5 + 14 * sqrt(share), rp_module_color(pts[k].mod));
        rp_esc(f, pts[k].mod);
        fputs(" \xc2\xb7 ", f);
        rp_esc(f, pts[k].op);
        fprintf(f, ": %.2f FLOP/B, %s, %.3f ms/step (%.1f%%), %s-bound, %.0f%% of its roof</title>"
                   "</circle>\n",
                ai, pf, pts[k].ns * 1e-6, 100 * share, ai < ridge ? "memory" : "compute",
                100 * perf / roof);
    }
    fputs("</svg>\n<table><tr><th>module \xc2\xb7 op</th><th>GFLOP/step</th><th>MB/step</th>"
          "<th>FLOP/B</th><th>ms/step</th><th>GFLOP/s</th><th>GB/s</th><th>bound</th>"
          "<th>% of roof</th></tr>\n",
          f);
    for (int k = 0; k < np && k < 14; k++) {
        double ai = pts[k].flops / pts[k].bytes, s = pts[k].ns * 1e-9;
        double perf = pts[k].flops / s, roof = fmin(peak, ai * bw);
        /* an op without FLOPs (a permute, a copy) is measured against the
         * bandwidth ceiling alone */
        double pct = pts[k].flops > 0 ? 100 * perf / roof : 100 * pts[k].bytes / s / bw;
        fputs("<tr><td class=\"name\">", f);
        rp_esc(f, pts[k].mod);
        fputs(" \xc2\xb7 ", f);
        rp_esc(f, pts[k].op);
        fprintf(f, "</td><td>%.3f</td><td>%.1f</td><td>%.2f</td><td>%.3f</td><td>%.2f</td>"
                   "<td>%.2f</td><td>%s</td><td>%.0f</td></tr>\n",
                pts[k].flops * 1e-9, pts[k].bytes * 1e-6, ai, s * 1e3, perf * 1e-9,
                pts[k].bytes / s * 1e-9, ai < ridge ? "memory" : "compute", pct);
    }
    fputs("</table></div>\n", f);
}

static void sec_roofline(FILE *f, const rp_run *r, int n) {
    fputs("<section id=\"roofline\"><h2>Roofline: the model's own arithmetic</h2>\n"
          "<p class=\"note\">FLOPs and minimum bytes are analytic, from each op's shapes "
          "(src/model/op_cost.h: every operand read once, every result written once); achieved "
          "FLOP/s divides them by the op's measured time. Left of the dashed ridge an op is "
          "memory-bound, right of it compute-bound.</p><div class=\"row\">\n",
          f);
    static const char *const mods[] = {
        "msa_row_attention",     "msa_column_attention",   "msa_transition",
        "outer_product_mean",    "triangle_mult_outgoing", "triangle_mult_incoming",
        "triangle_attn_starting", "triangle_attn_ending",  "pair_transition",
        "embedding",             "structure_module",       "loss", "optimizer_step"};
    const char *cols[13];
    for (int k = 0; k < 13; k++) cols[k] = rp_module_color(mods[k]);
    int any = 0;
    for (int i = 0; i < n; i++) any |= r[i].profile != NULL;
    if (any) rp_svg_legend(f, 13, mods, cols);
    any = 0;
    for (int i = 0; i < n; i++) {
        if (!r[i].profile) continue;
        roofline_one(f, &r[i]);
        any = 1;
    }
    if (!any) fputs("<p class=\"note\">No profile among the inputs.</p>\n", f);
    fputs("</div></section>\n", f);
}

/* ---- scaling in N ---- */
typedef struct {
    double N, peak, ms, flops, gflops;
} sc_point;

static int by_n(const void *a, const void *b) {
    double x = ((const sc_point *)a)->N, y = ((const sc_point *)b)->N;
    return x < y ? -1 : x > y;
}

/* least-squares slope of log y on log x */
static double loglog_slope(const sc_point *p, int n, int which) {
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    int m = 0;
    for (int i = 0; i < n; i++) {
        double y = which ? p[i].peak : p[i].ms;
        if (p[i].N <= 0 || y <= 0) continue;
        double X = log(p[i].N), Y = log(y);
        sx += X, sy += Y, sxx += X * X, sxy += X * Y;
        m++;
    }
    double d = m * sxx - sx * sx;
    return m >= 2 && d != 0 ? (m * sxy - sx * sy) / d : 0;
}

static void scaling_chart(FILE *f, const sc_point *p, int n, int which, const char *title,
                          const char *unit, const char *color) {
    double lo = 1e300, hi = 0, nlo = p[0].N, nhi = p[n - 1].N;
    for (int i = 0; i < n; i++) {
        double y = which ? p[i].peak / MIB : p[i].ms;
        if (y > 0) lo = fmin(lo, y), hi = fmax(hi, y);
    }
    if (hi <= 0) return;
    lo = pow(10, floor(log10(lo)));
    hi = pow(10, ceil(log10(hi)));
    if (hi <= lo) hi = lo * 10;
    if (nhi <= nlo) nhi = nlo * 2;
    const int nt = log_ticks(lo, hi);
    if (nt == 0) return; /* values past double's range: no axis to draw */
    const int W = 420, H = 260, L = 56, T = 20, PW = W - L - 14, PH = H - T - 36;
    fprintf(f, "<div><b>%s</b> (slope %.2f in log-log)\n", title, loglog_slope(p, n, which));
    fprintf(f, "<svg class=\"chart\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n", W, H, W,
            H);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#fbfbfd\" "
               "stroke=\"#ccc\"/>\n",
            L, T, PW, PH);
    double d = lo;
    for (int k = 0; k < nt; k++, d *= 10) {
        double y = T + PH - lx(d, lo, hi, PH);
        fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>"
                   "<text x=\"%d\" y=\"%.1f\" class=\"ax\" text-anchor=\"end\">%g</text>\n",
                L, L + PW, y, y, L - 4, y + 3, d);
    }
    fputs("<polyline fill=\"none\" stroke-width=\"2\" stroke=\"", f);
    fputs(color, f);
    fputs("\" points=\"", f);
    for (int i = 0; i < n; i++) {
        double y = which ? p[i].peak / MIB : p[i].ms;
        if (y <= 0) continue;
        fprintf(f, "%.1f,%.1f ", L + lx(p[i].N, nlo, nhi, PW), T + PH - lx(y, lo, hi, PH));
    }
    fputs("\"/>\n", f);
    for (int i = 0; i < n; i++) {
        double y = which ? p[i].peak / MIB : p[i].ms;
        if (y <= 0) continue;
        double x = L + lx(p[i].N, nlo, nhi, PW);
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"><title>N %g: %.3f %s"
                   "</title></circle><text x=\"%.1f\" y=\"%d\" class=\"ax\" "
                   "text-anchor=\"middle\">%g</text>\n",
                x, T + PH - lx(y, lo, hi, PH), color, p[i].N, y, unit, x, T + PH + 14, p[i].N);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"ax\" text-anchor=\"middle\">N (residues), "
               "log scale</text><text x=\"%d\" y=\"12\" class=\"ax\">%s</text>\n",
            L + PW / 2, H - 4, L, unit);
    fputs("</svg></div>\n", f);
}

static void sec_scaling(FILE *f, const cJSON *sc) {
    fputs("<section id=\"scaling\"><h2>Scaling in N</h2>\n", f);
    const cJSON *pts = rp_get(sc, "points", NULL), *o;
    sc_point p[64];
    int n = 0;
    cJSON_ArrayForEach(o, pts) {
        if (n == 64) break;
        p[n].N = rp_num(o, "N", NULL, 0);
        p[n].peak = rp_num(o, "peak_bytes", NULL, 0);
        p[n].ms = rp_num(o, "step_ms", NULL, 0);
        p[n].flops = rp_num(o, "flops", NULL, 0);
        p[n].gflops = rp_num(o, "gflops", NULL, 0);
        if (p[n].N > 0) n++;
    }
    if (!n) {
        fputs("<p class=\"note\">The scaling JSON has no points.</p></section>\n", f);
        return;
    }
    qsort(p, (size_t)n, sizeof p[0], by_n);
    fputs("<p class=\"note\">From <code>tinyfold bench --scaling</code>. The pair tensor makes "
          "activation memory grow as N<sup>2</sup>; the triangle products make compute grow as "
          "N<sup>3</sup>: the fitted slopes say which term leads at these sizes.</p>"
          "<div class=\"row\">\n",
          f);
    scaling_chart(f, p, n, 0, "step time", "ms", "#f28e2b");
    scaling_chart(f, p, n, 1, "peak memory", "MiB", "#4e79a7");
    fputs("</div><table><tr><th>N</th><th>ms/step</th><th>peak MiB</th><th>GFLOP/step</th>"
          "<th>GFLOP/s</th></tr>\n",
          f);
    for (int i = 0; i < n; i++)
        fprintf(f, "<tr><td>%g</td><td>%.3f</td><td>%.1f</td><td>%.3f</td><td>%.2f</td></tr>\n",
                p[i].N, p[i].ms, p[i].peak / MIB, p[i].flops * 1e-9, p[i].gflops);
    fputs("</table></section>\n", f);
}

static void page(FILE *f, const rp_run *r, int n, const cJSON *scaling) {
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
          "<title>tinyfold report</title>\n",
          f);
    css(f);
    fputs("</head><body>\n<h1>tinyfold report</h1>\n<p class=\"note\">", f);
    for (int i = 0; i < n; i++) {
        if (i) fputs(" \xc2\xb7 ", f);
        rp_esc(f, r[i].path);
    }
    fprintf(f, "%s(tinyfold %s)</p>\n", n ? " " : "", TF_VERSION);
    sec_overview(f, r, n);
    sec_throughput(f, r, n);
    rp_sec_steps(f, r, n);
    rp_sec_ranks(f, r, n);
    sec_phases(f, r, n);
    sec_kernels(f, r, n);
    rp_sec_kdiff(f, r, n);
    sec_memory(f, r, n);
    rp_sec_memtime(f, r, n);
    sec_timeline(f, r, n);
    sec_roofline(f, r, n);
    if (scaling) sec_scaling(f, scaling);
    fputs("</body></html>\n", f);
}

static int usage(void) {
    return fail("usage: tinyfold report RUN... --out report.html [--force] (RUN: a profile "
                "directory, summary.json, run JSON, kernel_stats.csv, or bench --scaling JSON)");
}

int tf_report_main(int argc, char **argv) {
    const char *out = NULL, *paths[RP_MAX_RUNS + 1];
    int np = 0, force = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--out") == 0) {
            if (++i == argc) return fail("--out needs a file name");
            out = argv[i];
        } else if (strcmp(argv[i], "--force") == 0) {
            force = 1;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: tinyfold report RUN... --out report.html [--force]\n"
                   "  RUN: a profile directory, summary.json, run JSON (train --json),\n"
                   "  kernel_stats.csv, or the JSON of bench --scaling (an array \"points\")\n"
                   "  --force: report runs of different problems together\n");
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return fail("unknown option '%s' (accepted: --out FILE, --force)", argv[i]);
        } else {
            if (np == RP_MAX_RUNS + 1) return fail("at most %d runs and one scaling JSON",
                                                   RP_MAX_RUNS);
            paths[np++] = argv[i];
        }
    }
    if (!np || !out) return usage();
    rp_run runs[RP_MAX_RUNS];
    cJSON *scaling = NULL;
    int n = 0, rc = 0;
    char err[600] = "";
    for (int i = 0; i < np && !rc; i++) {
        cJSON *sc = NULL;
        rp_run r;
        if (rp_load(paths[i], &r, &sc, err, sizeof err) != 0) {
            rp_free(&r);
            rc = fail("%s", err);
        } else if (sc) {
            if (scaling) {
                cJSON_Delete(sc);
                rc = fail("more than one scaling JSON ('%s')", paths[i]);
            }
            else scaling = sc;
        } else if (n == RP_MAX_RUNS) {
            rp_free(&r);
            rc = fail("at most %d runs", RP_MAX_RUNS);
        } else {
            runs[n++] = r;
        }
    }
    if (!rc && !force && rp_check_problem(runs, n, err, sizeof err) != 0) rc = fail("%s", err);
    if (!rc && rp_check_out(out, paths, np, runs, n, err, sizeof err) != 0) rc = fail("%s", err);
    if (!rc) {
        /* a temporary file beside the output, renamed over it when complete */
        size_t len = strlen(out) + 32;
        char *tmp = malloc(len);
        int fd = tmp ? tf_io_tmp_open(out, tmp, len, err, sizeof err) : -1;
        FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
        if (!f) {
            rc = tmp && fd < 0 ? fail("%s", err) : fail("cannot write '%s': %s", out, strerror(errno));
            if (fd >= 0) {
                close(fd);
                unlink(tmp);
            }
        } else {
            page(f, runs, n, scaling);
            int bad = ferror(f) != 0 || fflush(f) != 0 || fsync(fileno(f)) != 0;
            int e = errno;
            if (fclose(f) != 0 && !bad) bad = 1, e = errno;
            if (bad) {
                rc = fail("cannot write '%s': %s", out, strerror(e ? e : EIO));
                unlink(tmp);
            } else if (tf_io_commit(tmp, out, err, sizeof err) != 0) {
                rc = fail("%s", err);
            }
        }
        free(tmp);
    }
    for (int i = 0; i < n; i++) rp_free(&runs[i]);
    cJSON_Delete(scaling);
    if (!rc) printf("report written to %s\n", out);
    return rc;
}
