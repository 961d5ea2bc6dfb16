/* The files a command will write, checked before any work by the one check
 * every subcommand uses (src/fileio/outcheck.h): the inputs and outputs of train,
 * profile, grad and bench as named by their options. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "fileio/outcheck.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_PATHS 14

static void add(tf_io_path *v, int *n, const char *flag, const char *path, const char *what,
                int output)
{
    if (!path || *n >= MAX_PATHS)
        return;
    memset(&v[*n], 0, sizeof v[*n]);
    v[*n].flag = flag;
    v[*n].path = path;
    v[*n].what = what;
    v[*n].output = output;
    (*n)++;
}

int tf_cli_check_outputs(const tf_cli_opts *o)
{
    static tf_io_path v[MAX_PATHS];
    int n = 0;
    add(v, &n, "--data", o->data_path, "the --data file", 0);
    add(v, &n, "--load", o->load_path, "the --load checkpoint", 0);
    add(v, &n, "--resume", o->resume_path, "the --resume checkpoint", 0);
    add(v, &n, "--resume", o->resume_optim_path, "the --resume checkpoint's optimizer file", 0);
    add(v, &n, "--save", o->save_path, "--save's checkpoint", 1);
    add(v, &n, "--save (its optimizer file)", o->save_optim_path, "--save's optimizer file", 1);
    if (!tf_cli_json_is_stdout(o->json_path)) /* "-": standard output */
        add(v, &n, "--json", o->json_path, "--json's file", 1);
    if (o->cmd == TF_CMD_GRAD)
        add(v, &n, "--out", o->out_path, "--out's gradient file", 1);
    /* profile --out DIR: the files it writes there collide like any other;
     * a directory the profiler has yet to create holds none of them. */
    static const char *const prof_files[] = {"kernel_stats.csv", "kernel_trace.csv",
                                             "summary.json", "trace.json"};
    static char prof_paths[4][PATH_MAX];
    if (o->cmd == TF_CMD_PROFILE && o->out_path) {
        struct stat st;
        int is_dir = stat(o->out_path, &st) == 0 && S_ISDIR(st.st_mode);
        for (int i = 0; i < 4; i++) {
            snprintf(prof_paths[i], sizeof prof_paths[i], "%s/%s", o->out_path, prof_files[i]);
            add(v, &n, "--out", prof_paths[i], "a file profile writes under --out", 1);
            v[n - 1].deferred = !is_dir;
        }
    }
    char err[PATH_MAX + 512];
    if (tf_io_check_paths(v, n, err, sizeof err) != 0) {
        /* a refused --json (/dev/stdout, say): the name that means standard output */
        const int json = strncmp(err, "--json:", 7) == 0;
        tf_cli_error("%s%s", err, json ? " (--json - writes the JSON to standard output)" : "");
        return TF_EXIT_USAGE;
    }
    return TF_EXIT_OK;
}
