#!/usr/bin/env bash
# Regenerates the example outputs quoted in README.md and docs/*.md from
# today's binary, so that they cannot drift from what it prints.
#
# A quoted example is the fenced block right after a line
#   <!-- regen: NAME -->
# and recipe NAME below writes its text. CPU recipes run the binary here
# (TINYFOLD, default build/tinyfold). GPU recipes cut the logs that
# bench/gpu_docs.sh writes on the GPU machine (GPU_DOCS, default
# out/gpu/docs: copy that folder here first); a GPU block whose log is
# missing is left as it is, and the script says so.
#
#   docs/regen.sh [NAME...]          rewrite the blocks (those NAMEs only) in place
#   docs/regen.sh --check [NAME...]  change nothing; show what would change (exit 1 if any)
#   docs/regen.sh --list             the recipe names and where they are used
#
# Timings differ from run to run: regenerate on a quiet machine, and say in
# the text around a block which machine and command it comes from.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(realpath "${TINYFOLD:-$root/build/tinyfold}" 2>/dev/null || true)
gpu=$(realpath -m "${GPU_DOCS:-$root/out/gpu/docs}")
mode="write"
only=" "
for a in "$@"; do
    case $a in
    --check) mode=check ;;
    --list) mode=list ;;
    -*) echo "docs/regen.sh: unknown argument '$a': expected --check, --list or recipe names" >&2; exit 2 ;;
    *) only="$only$a " ;;
    esac
done
files=("$root/README.md" "$root"/docs/*.md)
if [ "$mode" = list ]; then
    grep -Ho -n '<!-- regen: [a-z0-9_]* -->' "${files[@]}" | sed "s|^$root/||; s/<!-- regen: \(.*\) -->/\1/"
    exit 0
fi
if [ ! -x "$bin" ]; then
    echo "docs/regen.sh: no tinyfold binary at ${TINYFOLD:-build/tinyfold} (run make, or set TINYFOLD)" >&2
    exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# show PROMPT ARGS...: "$ PROMPT ARGS" then what the binary prints (stdout
# and stderr), run in a scratch folder so that output directories land there.
show() {
    local prompt=$1
    shift
    echo "\$ $prompt $*"
    (cd "$work" && OMP_NUM_THREADS=2 "$bin" "$@" 2>&1) || true
}

# cut FILE FIRST LAST [FIRST LAST]...: the file's first line (the command, as
# bench/gpu_docs.sh writes it), then each range from a line matching FIRST to
# the next matching LAST ('$': the end), with "..." wherever lines are left out.
cut_log() {
    local f=$1
    shift
    awk -v spec="$(printf '%s\n' "$@")" '
        BEGIN { n = split(spec, re, "\n"); if (re[n] == "") n--; k = 1 }
        NR == 1 { print; next }
        { line[NR] = $0; last = NR }
        END {
            i = 2; printed = 1
            for (k = 1; k <= n; k += 2) {
                for (s = i; s <= last && line[s] !~ re[k]; s++) ;
                if (s > last) break
                if (re[k + 1] == "$") e = last
                else for (e = s; e <= last && line[e] !~ re[k + 1]; e++) ;
                if (e > last) e = last
                if (s > printed + 1) print "..."
                for (j = s; j <= e; j++) print line[j]
                printed = e; i = e + 1
            }
            if (printed < last) print "..."
        }' "$f"
}

# gpu_log NAME PROMPT FIRST LAST ...: a cut of GPU_DOCS/NAME.txt, with the
# command's "tinyfold" spelt PROMPT and GPU_DOCS paths shown relative.
gpu_log() {
    local name=$1 prompt=$2
    shift 2
    local f=$gpu/$name.txt
    [ -f "$f" ] || return 3
    cut_log "$f" "$@" | sed "1s|^\\\$ tinyfold|\$ $prompt|; s|$gpu/||g"
}

tiny=(--batch-size 2 --seq-len 32 --num-seqs 8 --num-blocks 2)
recipe() {
    case $1 in
    readme_errors)
        show ./build/tinyfold --seq-len 0
        show ./build/tinyfold --batch-size 64 --seq-len 4096 ;;
    cli_longseq)
        show tinyfold train --backend cpu --batch-size 1 --seq-len 1024 --num-seqs 16
        show tinyfold train --backend cpu --batch-size 1 --seq-len 1024 --num-seqs 16 --memory-budget 8G
        show tinyfold train --backend cpu --seq-len 64 --chunk-size 65 ;;
    readme_train_gpu)
        gpu_log train_v1 ./build/tinyfold '^Warm-up 1/' '^Warm-up 2/' '^Step  *30/' '$' ;;
    readme_compare_gpu)
        [ -f "$gpu/compare.txt" ] || return 3
        echo '$ ./build/tinyfold profile --backend cuda --impl v1 --out prof_v1   # and v2, v3, v3 --graph'
        gpu_log compare ./build/tinyfold '^Metric' '^final loss' ;;
    prof_train_gpu)
        gpu_log train_v1 tinyfold '^Warm-up 1/' '^Warm-up 2/' '^Step ' '^   Average step time' \
            '^   Peak memory usage' '^   Peak memory usage' ;;
    prof_v1_gpu)
        gpu_log prof_v1 tinyfold '^== tinyfold profile' '^msa_transition' ;;
    prof_v1_sel_gpu)
        gpu_log prof_v1_sel tinyfold '^== tinyfold profile' '^sm80_xmma|^void|^[a-z_]*_kernel' \
            '^Kernel launches per step' '^Kernel launches per step' ;;
    prof_compare_gpu)
        gpu_log compare tinyfold '^Performance' '^final loss' ;;
    prof_cpu_counters) # the counters table, without the kernel table before it
        show tinyfold profile --backend cpu --impl v3 "${tiny[@]}" --num-steps 2 --counters layernorm \
            --out prof_cnt | awk 'NR == 1 { print; print "..."; next }
                                  /^Counters/ { on = 1 } /^$|^Profile written/ { on = 0 } on' ;;
    prof_cpu) # from the launch count to the six costliest modules
        show tinyfold profile --backend cpu --impl v3 "${tiny[@]}" --num-steps 2 --out prof_cpu |
            awk 'NR == 1 { print; print "..."; next } /^Kernel launches per step/ { on = 1 } !on { next }
                 rows >= 6 { print "..."; exit } { print } /^------/ { table = 1; next } table { rows++ }' ;;
    prof_cpu_ops) # the ops furthest above their roof, the same run as prof_cpu's
        show tinyfold profile --backend cpu --impl v3 "${tiny[@]}" --num-steps 2 --out prof_cpu |
            awk 'NR == 1 { print; print "..."; next } /^Ops with the most time/ { on = 1 }
                 /^Peak memory/ { on = 0 } on' ;;
    *) return 4 ;;
    esac
}

changed=0
for f in "${files[@]}"; do
    grep -q '<!-- regen: ' "$f" || continue
    for name in $(sed -n 's/^<!-- regen: \([a-z0-9_]*\) -->$/\1/p' "$f"); do
        [ "$only" = " " ] || [[ "$only" == *" $name "* ]] || continue
        rc=0
        recipe "$name" >"$work/$name.txt" || rc=$?
        rel=${f#"$root"/}
        if [ "$rc" = 3 ]; then
            echo "$rel: $name: kept (no GPU log under ${GPU_DOCS:-out/gpu/docs}: run bench/gpu_docs.sh on the GPU machine)"
            continue
        elif [ "$rc" = 4 ]; then
            echo "docs/regen.sh: $rel: no recipe '$name'" >&2
            exit 2
        fi
        # splice: the lines between the marker's fence and the closing fence
        python3 - "$f" "$name" "$work/$name.txt" "$work/new.md" <<'PY'
import sys
path, name, body, out = sys.argv[1:]
lines = open(path).read().split("\n")
new = open(body).read().rstrip("\n").split("\n")
i = lines.index(f"<!-- regen: {name} -->")
assert lines[i + 1].startswith("```"), f"{path}: the line after '<!-- regen: {name} -->' is not a fence"
j = next(k for k in range(i + 2, len(lines)) if lines[k].startswith("```"))
lines[i + 2:j] = new
open(out, "w").write("\n".join(lines))
PY
        if cmp -s "$f" "$work/new.md"; then
            echo "$rel: $name: unchanged"
        else
            changed=$((changed + 1))
            if [ "$mode" = check ]; then
                echo "$rel: $name: differs"
                diff -u "$f" "$work/new.md" | sed -n '3,$p' | grep '^[-+]' | head -20 || true
            else
                echo "$rel: $name: rewritten"
                cat "$work/new.md" >"$f"
            fi
        fi
    done
done
if [ "$mode" = check ] && [ "$changed" -gt 0 ]; then exit 1; fi
