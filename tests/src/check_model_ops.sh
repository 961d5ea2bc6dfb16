#!/usr/bin/env bash
# The model calls the op table only through exec.c's wrappers, which state
# each op's memory for the weight-gradient lane's waits (src/model/lane.h):
# an op issued around them would escape those waits. Usage:
# check_model_ops.sh DIR (src/model); prints each direct call, exits 1 if
# any. The check first proves on a made-up file that it catches one.
set -u
scan() { # files...: FILE:LINE of each call through an ops table or TF_EXEC_OP
    grep -nE 'ops->[a-z_0-9]+[[:space:]]*\(|TF_EXEC_OP[[:space:]]*\(' "$@" /dev/null |
        grep -vE ':[0-9]+:[[:space:]]*(\*|//|/\*)'
}
probe=$(mktemp)
trap 'rm -f "$probe"' EXIT
printf 'static void f(tf_exec *ex) {\n    ex->ops->add(ex->be, y, a, b, n);\n}\n' >"$probe"
if [ -z "$(scan "$probe")" ]; then
    echo "check_model_ops: the scan misses a direct call in a made-up file"
    exit 1
fi
dir=${1:?usage: check_model_ops.sh DIR}
found=$(scan $(ls "$dir"/*.c | grep -v '/exec\.c$'))
if [ -n "$found" ]; then
    echo "$found" | sed 's/$/: calls the op table directly (use the tf_x_* wrappers of exec.c)/'
    exit 1
fi
echo "check_model_ops: the model calls the op table only through exec.c"
