/* --help texts. The option lines are generated from options.c, so whatever
 * parses is documented; the prose around them is here. docs/cli.md says the
 * same at more length. */
#include "cli.h"

#include <getopt.h>
#include <string.h>

#include "report/commands.h"

static const char *const usage_lines =
    "Usage:\n"
    "  tinyfold [train] [options]     train; the default when the first argument is an option\n"
    "  tinyfold validate [options]    check the set-up: backend, BLAS, a 3-step tiny run\n"
    "  tinyfold bench [options]       time problems x levels, next to the machine's sgemm\n"
    "  tinyfold profile [train options] --out DIR [profile options]\n"
    "                                 train with the profiler: kernel table, regions, trace\n"
    "  tinyfold grad --load W --data B --out G [options]\n"
    "                                 loss and gradients of one batch (no update)\n"
    "  tinyfold compare A B ...       compare runs (run JSON or a profile's summary.json)\n"
    "  tinyfold report RUN... --out F one HTML page of pictures: timeline, roofline, memory\n"
    "  tinyfold help [command]        help of a command (also: tinyfold COMMAND --help)\n"
    "  tinyfold --version\n";

static const char *const exit_lines =
    "Exit status: 0 success; 1 failure during a run (non-finite loss, I/O error);\n"
    "2 bad input (flag, value, file, problem too large for memory, device unavailable).\n"
    "Every error is one line on stderr that names the flag, the value and what is accepted.\n";

void tf_cli_help_main(FILE *f)
{
    fprintf(f,
            "tinyfold %s - TinyOpenFold (a small AlphaFold 2 Evoformer) training in C\n\n%s\n"
            "Problems of the article: small = --batch-size 4 --seq-len 64 --num-seqs 16 "
            "--num-blocks 4\n"
            "(the defaults), large = --batch-size 4 --seq-len 128 --num-seqs 32 --num-blocks 4.\n"
            "Levels: --impl v1 (baseline), v2 (fused), v3 (fused + custom kernels).\n\n"
            "Examples:\n"
            "  tinyfold train --num-steps 30                      the small problem\n"
            "  tinyfold --seq-len 128 --num-seqs 32 --impl v2     the large problem, level v2\n"
            "  tinyfold --impl v1 --json v1.json && tinyfold --impl v2 --json v2.json\n"
            "  tinyfold compare v1.json v2.json                   compare the two levels\n"
            "  tinyfold profile --num-steps 10 --out prof_v1 --impl v1 \\\n"
            "      --selected-regions forward_pass,backward_pass\n"
            "  tinyfold bench --problems tiny,small --threads 2\n\n"
            "Run `tinyfold help train` for every training option with its default and range.\n\n"
            "%s",
            TF_VERSION, usage_lines, exit_lines);
}

/* Section headings, keyed by the first option id of each section. */
static const char *section_of(int id)
{
    switch (id) {
    case TF_OPT_BATCH: return "Problem and model";
    case TF_OPT_STEPS: return "Training";
    case TF_OPT_IMPL: return "Implementation level and fusions";
    case TF_OPT_BACKEND: return "Where it runs";
    case TF_OPT_RECOMPUTE: return "Memory";
    case TF_OPT_DATA: return "Files";
    case TF_OPT_MEMPROF: return "Output";
    case TF_OPT_OUT: return "Profiling";
    case TF_OPT_PROBLEMS: return "Benchmark";
    case TF_OPT_HELP: return "Other";
    default: return NULL;
    }
}

/* Help text word-wrapped into [col, width), the first line continuing the
 * option names (or starting below them when they are too long). */
static void print_help_text(FILE *f, const char *help, int col, int first_col)
{
    const int width = 96;
    int at = first_col;
    if (at >= col - 1) {
        fputc('\n', f);
        at = 0;
    }
    fprintf(f, "%*s", col - at, "");
    at = col;
    for (const char *p = help; *p;) {
        while (*p == ' ' || *p == '\n')
            p++;
        int len = (int)strcspn(p, " \n");
        if (!len)
            break;
        if (at > col && at + 1 + len > width) {
            fprintf(f, "\n%*s", col, "");
            at = col;
        } else if (at > col) {
            fputc(' ', f);
            at++;
        }
        fprintf(f, "%.*s", len, p);
        at += len;
        p += len;
    }
    fputc('\n', f);
}

static void print_options(FILE *f, int cmd)
{
    const int col = 32;
    int section_open = 0;
    const char *pending_section = NULL;
    for (int i = 0; i < tf_cli_n_optdefs; i++) {
        const tf_cli_optdef *d = &tf_cli_optdefs[i];
        const char *s = section_of(d->id);
        if (s)
            pending_section = s;
        if (!(d->cmds & (unsigned)cmd) || !d->help)
            continue;
        if (pending_section) {
            fprintf(f, "%s%s:\n", section_open ? "\n" : "", pending_section);
            section_open = 1;
            pending_section = NULL;
        }
        char names[128];
        const char *metavar = tf_cli_metavar(d);
        int n = snprintf(names, sizeof names, "  --%s%s%s", d->name, metavar ? " " : "",
                         metavar ? metavar : "");
        /* An --enable-X followed by its --disable-X twin shares one entry. */
        const tf_cli_optdef *twin = i + 1 < tf_cli_n_optdefs ? &tf_cli_optdefs[i + 1] : NULL;
        if (twin && !twin->help && (twin->cmds & (unsigned)cmd))
            n += snprintf(names + n, sizeof names - (size_t)n, ", --%s", twin->name);
        fputs(names, f);
        print_help_text(f, d->help, col, n);
    }
}

static const char *cmd_intro(int cmd)
{
    switch (cmd) {
    case TF_CMD_TRAIN:
        return "Usage: tinyfold [train] [options]\n\n"
               "Trains TinyOpenFold on synthetic data (or --data): --warmup-steps untimed steps,\n"
               "then --num-steps timed steps. Prints the configuration, a step line every\n"
               "--log-every steps (a live progress line on stderr when it is a terminal) and\n"
               "a summary: averages over the timed steps, peak memory, achieved GFLOP/s.\n\n"
               "Examples:\n"
               "  tinyfold train --batch-size 4 --seq-len 64 --num-seqs 16 --num-blocks 4 "
               "--num-steps 30\n"
               "  tinyfold train --seq-len 128 --num-seqs 32 --impl v1 --json large_v1.json\n"
               "  tinyfold train --impl v2 --disable-flash-attention     (ablation)\n"
               "  tinyfold train --num-steps 100 --save ck.safetensors --save-every 50\n"
               "  tinyfold train --resume ck.safetensors --num-steps 100\n\n";
    case TF_CMD_PROFILE:
        return "Usage: tinyfold profile [train options] --out DIR [profile options]\n\n"
               "Trains like `tinyfold train` (default --num-steps 10) with the built-in\n"
               "profiler: prints the kernel table and region times, and writes\n"
               "DIR/kernel_stats.csv, kernel_trace.csv, summary.json (the run JSON under\n"
               "\"run\") and trace.json (Perfetto / chrome://tracing). Warm-up steps are not\n"
               "collected unless --include-warmup.\n\n"
               "Examples:\n"
               "  tinyfold profile --impl v1 --out prof_v1\n"
               "  tinyfold profile --impl v2 --out prof_v2 --selected-regions "
               "forward_pass,backward_pass\n"
               "  tinyfold compare prof_v1/summary.json prof_v2/summary.json\n\n";
    case TF_CMD_VALIDATE:
        return "Usage: tinyfold validate [options]   (also: tinyfold --validate-setup)\n\n"
               "Prints the build, the backend that would run (and why CUDA is not used when\n"
               "it is not), the BLAS and thread configuration, then trains a tiny problem for\n"
               "3 steps and checks the loss is finite and that the levels agree on it.\n"
               "Ends with \"validation successful\" (exit 0) or one error line.\n\n";
    case TF_CMD_BENCH:
        return "Usage: tinyfold bench [options]\n\n"
               "For each problem and level: 2 warm-up steps, then --steps timed steps; prints\n"
               "the median step time, samples/s, achieved GFLOP/s, peak memory, and on the CPU\n"
               "the machine's own cblas_sgemm GFLOP/s (1024^3 and the model-like 16384x128x128,\n"
               "the fastest call in 150 ms each) with the fraction of it the step reaches: of\n"
               "the faster shape, measured again after each row (the better of before and\n"
               "after), so that a neighbour on the cores cannot lower the reference alone.\n\n"
               "Example:\n"
               "  OMP_NUM_THREADS=2 tinyfold bench --backend cpu --threads 2 --problems "
               "tiny,small\n\n";
    case TF_CMD_GRAD:
        return "Usage: tinyfold grad --load WEIGHTS --data BATCH --out GRADS [options]\n\n"
               "Runs forward and backward once on the batch of a data file (all its samples,\n"
               "or --batch-size of them) with the weights of a checkpoint, and writes the loss,\n"
               "the predictions and every parameter's gradient to GRADS. No update is made.\n"
               "This is how tinyfold is compared with the PyTorch reference.\n\n";
    }
    return "";
}

void tf_cli_help_cmd(FILE *f, int cmd)
{
    fputs(cmd_intro(cmd), f);
    print_options(f, cmd);
    fprintf(f, "\n%s", exit_lines);
}

void tf_cli_help_compare(FILE *f)
{
    fputs("Usage: tinyfold compare A B [C ...] [--format table|markdown|csv|json] [--force]\n\n"
          "Prints runs side by side with ratios against the first: each argument is a run\n"
          "JSON (tinyfold train --json FILE), a profile's summary.json (tinyfold profile\n"
          "--out DIR writes DIR/summary.json) or its directory, or rocprofv3's\n"
          "kernel_stats.csv (--stats). Runs are comparable only at the same problem:\n"
          "a differing knob (batch, seq_len, ...) is refused (exit 2) unless --force.\n"
          "The table and markdown shorten long kernel names (head...tail); csv and json\n"
          "carry them whole.\n\n"
          "Examples:\n"
          "  tinyfold --impl v1 --json v1.json && tinyfold --impl v2 --json v2.json\n"
          "  tinyfold compare v1.json v2.json\n"
          "  tinyfold profile --impl v1 --out p1 && tinyfold profile --impl v2 --out p2\n"
          "  tinyfold compare p1/summary.json p2/summary.json --format markdown\n",
          f);
}

int tf_cli_help_command(int argc, char **argv)
{
    if (argc < 2) {
        tf_cli_help_main(stdout);
        return TF_EXIT_OK;
    }
    if (argc > 2) {
        char q[64];
        tf_cli_quote(q, sizeof q, argv[2]);
        tf_cli_error("help: unexpected argument '%s' (usage: tinyfold help [command])", q);
        return TF_EXIT_USAGE;
    }
    static const struct {
        const char *name;
        int cmd;
    } cmds[] = {{"train", TF_CMD_TRAIN},       {"profile", TF_CMD_PROFILE},
                {"validate", TF_CMD_VALIDATE}, {"bench", TF_CMD_BENCH},
                {"grad", TF_CMD_GRAD}};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (strcmp(argv[1], cmds[i].name) == 0) {
            tf_cli_help_cmd(stdout, cmds[i].cmd);
            return TF_EXIT_OK;
        }
    if (strcmp(argv[1], "compare") == 0) {
        tf_cli_help_compare(stdout);
        return TF_EXIT_OK;
    }
    if (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "-h") == 0) {
        tf_cli_help_main(stdout);
        return TF_EXIT_OK;
    }
    if (strcmp(argv[1], "report") == 0) {
        char *av[] = {argv[1], (char *)"--help", NULL};
        return tf_report_main(2, av);
    }
    return tf_cli_unknown_command("help: ", argv[1]);
}

int tf_cli_unknown_command(const char *context, const char *name)
{
    static const char *const names[] = {"train", "validate", "bench", "profile", "grad",
                                        "compare", "report", "help"};
    char q[64];
    tf_cli_quote(q, sizeof q, name);
    const char *n = tf_cli_nearest_name(name, names, sizeof names / sizeof names[0]);
    if (n)
        tf_cli_error("%sunknown command '%s' (did you mean %s?)", context, q, n);
    else
        tf_cli_error("%sunknown command '%s' (expected train, validate, bench, profile, grad, "
                     "compare, report, help; see tinyfold --help)",
                     context, q);
    return TF_EXIT_USAGE;
}
