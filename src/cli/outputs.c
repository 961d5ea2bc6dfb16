/* The files a command will write, checked before any work: each can be
 * created (its temporary name "<name>.tmp.<pid>" included, so a name too long
 * for the file system fails now, not after training), is a regular file or
 * absent (a FIFO, a device, a symlink or a directory would be replaced by the
 * final rename), and is neither an input of the run nor another output.
 * Identity is the resolved path (directory through realpath, then the last
 * component) and, for files that exist, the device and inode. */
#define _DEFAULT_SOURCE /* realpath */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_PATHS 14

typedef struct {
    const char *flag; /* "--save" */
    const char *path; /* as given */
    const char *what; /* for messages: "the --data file", "--json's output" */
    int output;
    char resolved[PATH_MAX + NAME_MAX + 2]; /* "" when it cannot be resolved */
    int exists;
    dev_t dev;
    ino_t ino;
} path_ent;

static const char *kind_of(mode_t m)
{
    return S_ISDIR(m)    ? "a directory"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISLNK(m)  ? "a symbolic link"
           : S_ISSOCK(m) ? "a socket"
                         : "not a regular file";
}

static int refuse(const path_ent *e, const char *why)
{
    char q[64];
    tf_cli_quote(q, sizeof q, e->path);
    tf_cli_error("%s: '%s' is not accepted: %s", e->flag, q, why);
    return TF_EXIT_USAGE;
}

/* Splits path into its directory ("." when none) and last component. */
static int split(const char *path, char *dir, size_t dn, const char **base)
{
    const char *slash = strrchr(path, '/');
    *base = slash ? slash + 1 : path;
    size_t len = slash ? (size_t)(slash - path) : 1;
    if (slash == path)
        len = 1; /* "/name" */
    if (len >= dn)
        return -1;
    memcpy(dir, slash ? path : ".", len);
    dir[len] = '\0';
    return 0;
}

/* An output: creatable, temp name included; a regular file if it exists. */
static int check_output(path_ent *e)
{
    char dir[PATH_MAX];
    const char *base;
    char msg[PATH_MAX + 128];
    if (!*e->path)
        return refuse(e, "expected a file name");
    char tmp_suffix[32];
    int slen = snprintf(tmp_suffix, sizeof tmp_suffix, ".tmp.%ld", (long)getpid());
    if (strlen(e->path) + (size_t)slen >= PATH_MAX) {
        snprintf(msg, sizeof msg, "the path is longer than %d bytes with its temporary suffix",
                 PATH_MAX - 1);
        return refuse(e, msg);
    }
    if (split(e->path, dir, sizeof dir, &base) != 0 || !*base)
        return refuse(e, "expected a file name, not a directory");
    if (strlen(base) + (size_t)slen > NAME_MAX) {
        snprintf(msg, sizeof msg,
                 "its last component is %zu bytes; with the temporary suffix '%s' it must stay "
                 "within %d",
                 strlen(base), tmp_suffix, NAME_MAX);
        return refuse(e, msg);
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return refuse(e, "its directory does not exist");
    if (access(dir, W_OK | X_OK) != 0)
        return refuse(e, "its directory is not writable");
    if (lstat(e->path, &st) == 0) {
        if (!S_ISREG(st.st_mode)) {
            snprintf(msg, sizeof msg,
                     "it exists and is %s; outputs are written to a temporary file renamed "
                     "over the name, which would replace it: give a regular file's name",
                     kind_of(st.st_mode));
            return refuse(e, msg);
        }
        e->exists = 1;
        e->dev = st.st_dev;
        e->ino = st.st_ino;
    }
    /* Create and remove the temporary file: any other reason it cannot be
     * written (read-only file system, quota of inodes, ...) shows now. */
    char tmp[PATH_MAX + 32];
    snprintf(tmp, sizeof tmp, "%s%s", e->path, tmp_suffix);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST) {
        snprintf(msg, sizeof msg, "cannot create its temporary file: %s", strerror(errno));
        return refuse(e, msg);
    }
    if (fd >= 0) {
        close(fd);
        unlink(tmp);
    }
    char rdir[PATH_MAX];
    if (realpath(dir, rdir))
        snprintf(e->resolved, sizeof e->resolved, "%s/%s", strcmp(rdir, "/") ? rdir : "", base);
    return TF_EXIT_OK;
}

/* An input: only its identity (the reader reports what is wrong with it). */
static void identify_input(path_ent *e)
{
    struct stat st;
    char r[PATH_MAX];
    if (stat(e->path, &st) == 0) {
        e->exists = 1;
        e->dev = st.st_dev;
        e->ino = st.st_ino;
    }
    if (realpath(e->path, r))
        snprintf(e->resolved, sizeof e->resolved, "%s", r);
}

static int same_file(const path_ent *a, const path_ent *b)
{
    if (a->exists && b->exists && a->dev == b->dev && a->ino == b->ino)
        return 1;
    return a->resolved[0] && strcmp(a->resolved, b->resolved) == 0;
}

static void add(path_ent *v, int *n, const char *flag, const char *path, const char *what,
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
    path_ent v[MAX_PATHS];
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
    /* profile --out DIR: the files it writes there collide like any other. */
    static const char *const prof_files[] = {"kernel_stats.csv", "kernel_trace.csv",
                                             "summary.json", "trace.json"};
    char prof_paths[4][PATH_MAX];
    if (o->cmd == TF_CMD_PROFILE && o->out_path) {
        struct stat st;
        /* the profiler creates the directory; its files are only compared here */
        int is_dir = stat(o->out_path, &st) == 0 && S_ISDIR(st.st_mode);
        for (int i = 0; i < 4; i++) {
            snprintf(prof_paths[i], sizeof prof_paths[i], "%s/%s", o->out_path, prof_files[i]);
            add(v, &n, "--out", prof_paths[i], "a file profile writes under --out", 1);
            if (is_dir && check_output(&v[n - 1]) != TF_EXIT_OK)
                return TF_EXIT_USAGE;
        }
    }
    for (int i = 0; i < n; i++) {
        if (v[i].output && strcmp(v[i].what, "a file profile writes under --out") != 0) {
            if (check_output(&v[i]) != TF_EXIT_OK)
                return TF_EXIT_USAGE;
        } else if (!v[i].output) {
            identify_input(&v[i]);
        }
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++) {
            if (!v[i].output && !v[j].output)
                continue; /* two inputs may well be one file */
            if (!same_file(&v[i], &v[j]))
                continue;
            const path_ent *out = v[i].output ? &v[i] : &v[j];
            const path_ent *other = out == &v[i] ? &v[j] : &v[i];
            char why[256];
            snprintf(why, sizeof why, "it is also %s%s", other->what,
                     other->output ? ": two outputs of one run must be different files"
                                   : ": the run would overwrite its own input");
            return refuse(out, why);
        }
    return TF_EXIT_OK;
}
