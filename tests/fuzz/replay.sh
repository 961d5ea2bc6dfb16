#!/usr/bin/env bash
# ctest's run of one fuzz target without libFuzzer (tests/fuzz/replay.c):
# the seed corpus of make_corpus.py, then a fixed sequence of mutations.
# Exits 77 (skipped) without python3 to write the seeds.
# Usage: replay.sh path/to/fuzz_replay_TARGET TARGET [MUTATIONS]
set -u
bin=${1:?usage: $0 path/to/fuzz_replay_TARGET TARGET [MUTATIONS]}
target=${2:?target}
here=$(cd "$(dirname "$0")" && pwd)
command -v python3 >/dev/null || { echo "replay.sh: python3 not found: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
kind=$target
[ "$target" = checkpoint_meta ] && kind=checkpoint
python3 "$here/make_corpus.py" "$tmp/seed" "$kind" >/dev/null || exit 1
# the targets' refusals go to stderr: kept out of the log unless it fails
if ! TMPDIR=$tmp "$bin" "$tmp/seed" "${3:-10000}" 2>"$tmp/err"; then
    tail -n 20 "$tmp/err"
    echo "replay.sh: fuzz_replay_$target failed"
    exit 1
fi
