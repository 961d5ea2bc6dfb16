/* tinyfold: the program. Dispatches the subcommands; each returns its exit
 * status (0 ok, 1 failure during a run, 2 bad input). */
#include "cli.h"
#include "dist/dist.h"
#include "report/commands.h"

#include <string.h>

static int run_options_cmd(int cmd, int argc, char **argv)
{
    tf_cli_opts o;
    int rc = tf_cli_parse(&o, cmd, argc, argv);
    if (rc != TF_EXIT_OK || o.help)
        return rc;
    /* A command that runs (and may write files): a closed stdout must not
     * kill it. help, --version and compare keep the usual SIGPIPE. */
    tf_cli_ignore_sigpipe();
    if (tf_cli_json_is_stdout(o.json_path) && (rc = tf_cli_json_stdout_begin()) != TF_EXIT_OK)
        return rc;
    if (o.validate_setup) /* the reference's `--validate-setup` */
        cmd = o.cmd = TF_CMD_VALIDATE;
    char var[64];
    int ranks = cmd == TF_CMD_TRAIN || cmd == TF_CMD_PROFILE ? 1
                                                             : tf_dist_launch_size(var, sizeof var);
    if (ranks > 1) { /* P copies of the same run would only compete for the machine */
        tf_cli_error("%s: runs as one process, not %d ranks (%s); only train and profile run "
                     "data parallel",
                     tf_cli_cmd_name(cmd), ranks, var);
        return TF_EXIT_USAGE;
    }
    switch (cmd) {
    case TF_CMD_TRAIN:
    case TF_CMD_PROFILE: return tf_cli_train(&o);
    case TF_CMD_VALIDATE: return tf_cli_validate(&o);
    case TF_CMD_BENCH: return tf_cli_bench(&o);
    case TF_CMD_GRAD: return tf_cli_grad(&o);
    }
    return TF_EXIT_FAIL;
}

static int dispatch(int argc, char **argv);

int main(int argc, char **argv)
{
    return tf_cli_finish_stdout(dispatch(argc, argv));
}

static int dispatch(int argc, char **argv)
{
    if (argc < 2) /* plain `tinyfold` trains with the defaults, like the reference */
        return run_options_cmd(TF_CMD_TRAIN, argc, argv);
    const char *sub = argv[1];
    if (strcmp(sub, "--version") == 0 || strcmp(sub, "-V") == 0) {
        if (argc > 2) {
            tf_cli_error("--version: takes no other arguments");
            return TF_EXIT_USAGE;
        }
        printf("tinyfold %s\n", TF_VERSION);
        return TF_EXIT_OK;
    }
    if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0) {
        tf_cli_help_main(stdout);
        return TF_EXIT_OK;
    }
    if (sub[0] == '-') /* options first: train */
        return run_options_cmd(TF_CMD_TRAIN, argc, argv);

    static const struct {
        const char *name;
        int cmd;
    } cmds[] = {{"train", TF_CMD_TRAIN},       {"profile", TF_CMD_PROFILE},
                {"validate", TF_CMD_VALIDATE}, {"bench", TF_CMD_BENCH},
                {"grad", TF_CMD_GRAD}};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (strcmp(sub, cmds[i].name) == 0)
            return run_options_cmd(cmds[i].cmd, argc - 1, argv + 1);
    if (strcmp(sub, "compare") == 0) {
        /* the same text as `tinyfold help compare` */
        for (int i = 2; i < argc; i++)
            if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
                tf_cli_help_compare(stdout);
                return TF_EXIT_OK;
            }
        return tf_compare_main(argc - 1, argv + 1);
    }
    if (strcmp(sub, "report") == 0)
        return tf_report_main(argc - 1, argv + 1);
    if (strcmp(sub, "help") == 0)
        return tf_cli_help_command(argc - 1, argv + 1);

    return tf_cli_unknown_command("", sub);
}
