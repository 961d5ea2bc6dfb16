#!/usr/bin/env bash
# The CUDA backend's gradients through NCCL, on one GPU: one rank under a
# launcher (mpirun -np 1 when tinyfold has MPI, else the one-rank environment
# Open MPI gives its ranks) reduces through NCCL every step; with one rank the
# average is the gradient itself (ncclAvg on one rank multiplies by 1.0), so
# the losses must equal a plain run's bit for bit:
#  - in buckets of 64 KiB issued inside the backward (on the communication
#    stream, after the lane's GEMMs that write them) and in one all-reduce
#    after it; the run JSON reports the communication time and its exposed
#    part;
#  - with --graph, the same 64 KiB buckets captured into the backward's graph
#    and replayed every timed step: the same losses again, and comm_ms > 0 in
#    every timed (replayed) step, read from the graph's event-record nodes
#    (one rank still runs a kernel per bucket, NCCL's one-rank scaling);
#  - the profiler's kernel trace of a --graph run holds as many all-reduce
#    kernels a step as an eager run's, more than one (the buckets replayed
#    from the graph, not one all-reduce after it).
# Usage: tests/gpu/check_nccl.sh path/to/tinyfold   (a CUDA build with NCCL)
# Prints "PASS: ..." and exits 0, or "FAIL: ..." and exits 1.
set -u
BIN=${1:?usage: $0 path/to/tinyfold}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
ldd "$BIN" | grep -q libnccl || { echo "FAIL: $BIN is not linked with NCCL"; exit 1; }
ARGS=(--backend cuda --batch-size 4 --num-steps 20 --warmup-steps 2 --quiet --no-progress)
losses() { tr -d ' \t\n' <"$1" | grep -o '"step":[0-9]*,"warmup":[a-z]*,"loss":[^,]*'; }
"$BIN" train "${ARGS[@]}" --json "$TMP/plain.json" >"$TMP/plain.out" 2>&1 ||
    { cat "$TMP/plain.out"; echo "FAIL: plain run"; exit 1; }
if command -v mpirun >/dev/null && ldd "$BIN" | grep -q libmpi; then
    L=(mpirun -np 1); [ "$(id -u)" = 0 ] && L=(mpirun --allow-run-as-root -np 1)
else
    L=(env OMPI_COMM_WORLD_SIZE=1)
fi
for run in 64 0 64g; do
    kb=${run%g}; extra=(); [ "$run" = "$kb" ] || extra=(--graph)
    "${L[@]}" "$BIN" train "${ARGS[@]}" "${extra[@]}" --dist-bucket-kb $kb \
        --json "$TMP/nccl$run.json" >"$TMP/nccl.out" 2>&1 ||
        { cat "$TMP/nccl.out"; echo "FAIL: one rank through NCCL (${L[*]}), --dist-bucket-kb $kb ${extra[*]}"; exit 1; }
    grep 'communication' "$TMP/nccl.out"
    tr -d ' \t\n' <"$TMP/nccl$run.json" | grep -q '"comm_ms":[^,]*,"exposed_comm_ms":' ||
        { echo "FAIL: no comm_ms and exposed_comm_ms in the run JSON: NCCL did not run"; exit 1; }
    [ "$(losses "$TMP/plain.json")" = "$(losses "$TMP/nccl$run.json")" ] ||
        { echo "FAIL: losses differ from the plain run (--dist-bucket-kb $kb ${extra[*]})"
          diff <(losses "$TMP/plain.json" | tr '{' '\n') \
            <(losses "$TMP/nccl$run.json" | tr '{' '\n') | head; exit 1; }
done
python3 - "$TMP/nccl64g.json" <<'PY' || { echo "FAIL: --graph: comm_ms of the replayed steps"; exit 1; }
import json, sys
j = json.load(open(sys.argv[1]))
timed = [s for s in j["steps"] if not s["warmup"]]
bad = [s["step"] for s in timed if not s["comm_ms"] > 0 or s["exposed_comm_ms"] < 0]
gk = j["summary"].get("graph_kernel_nodes", 0)
print(f"  --graph: {len(timed)} replayed steps, comm_ms {min(s['comm_ms'] for s in timed):.4f}.."
      f"{max(s['comm_ms'] for s in timed):.4f} ms, graph kernel nodes {gk}")
sys.exit(1 if bad or not timed or not gk else 0)
PY
# the trace: all-reduce kernels a step, eager and replayed
P=(--backend cuda --batch-size 4 --num-steps 3 --warmup-steps 1 --dist-bucket-kb 64 --quiet)
"${L[@]}" "$BIN" profile "${P[@]}" --out "$TMP/pe" >"$TMP/pe.out" 2>&1 &&
"${L[@]}" "$BIN" profile "${P[@]}" --graph --out "$TMP/pg" >"$TMP/pg.out" 2>&1 ||
    { tail -5 "$TMP/pe.out" "$TMP/pg.out"; echo "FAIL: tinyfold profile through NCCL"; exit 1; }
python3 - "$TMP" <<'PY' || { echo "FAIL: --graph: the all-reduces in the kernel trace"; exit 1; }
import csv, collections, re, sys
def per_step(d):
    c = collections.Counter()
    for r in csv.DictReader(open(f"{sys.argv[1]}/{d}/kernel_trace.csv")):
        if re.search(r"nccl|oneRank", r["Name"], re.I):
            c[int(r["Step"])] += 1
    return c
e, g = per_step("pe"), per_step("pg")
last = max(e) if e else -1
print(f"  all-reduce kernels a step: eager {dict(e)}, --graph {dict(g)}")
sys.exit(0 if last in g and e[last] == g[last] > 1 else 1)
PY
echo "PASS: 22 steps through NCCL, in buckets, in one all-reduce and in buckets replayed from the backward's graph, equal the plain run bit for bit; the replayed buckets are timed and traced"
