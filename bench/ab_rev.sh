#!/usr/bin/env bash
# A/B of two source trees side by side: builds `tinyfold` from a base (a git
# revision, or a directory holding a source tree) and from this tree, then
# alternates their training runs so that drift hits both alike. Prints the
# median step of each side, the ratio, samples/s, peak memory and graph kernel
# nodes, and whether both sides gave the same loss at every step (the same
# seed: they must, unless the change is meant to change the bits; exit 1 if
# any differ).
#   bench/ab_rev.sh BASE [steps] [rounds]
#   BASE: a revision (git archive of it; needs the .git of this checkout) or a
#         directory with a tinyfold source tree (e.g. one unpacked locally)
# Environment: BACKEND=cuda (default) or cpu; IMPL=v3; GRAPH=--graph (cuda
# only; empty for eager); PROBLEMS="small large"; PRECISIONS="fp32 tf32"
# (cuda; the CPU runs fp32); OUT (default out/ab_rev); BUILD (this tree's
# build dir, default build-ab) and JOBS; BASE_BIN and CUR_BIN (two binaries
# built already: no builds); RUN_TIMEOUT (seconds a run may take,
# default 300: a hung run counts as failed instead of holding the machine).
set -uo pipefail
cd "$(dirname "$0")/.."
BASE=${1:?usage: bench/ab_rev.sh BASE [steps] [rounds]}
STEPS=${2:-15}
ROUNDS=${3:-2}
BACKEND=${BACKEND:-cuda}
IMPL=${IMPL:-v3}
OUT=${OUT:-$PWD/out/ab_rev}
BUILD=${BUILD:-build-ab}
JOBS=${JOBS:-$(nproc)}
if [ "$BACKEND" = cuda ]; then
  GRAPH=${GRAPH---graph}
  PRECISIONS=${PRECISIONS:-"fp32 tf32"}
  CUDA_FLAGS="-DTF_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90"
else
  GRAPH=""
  PRECISIONS=fp32
  CUDA_FLAGS="-DTF_CUDA=OFF"
fi
PROBLEMS=${PROBLEMS:-"small large"}
mkdir -p "$OUT"

src="$BASE"
if [ ! -d "$BASE" ]; then # a revision: unpack it next to the builds
  src="$OUT/base-src"
  rm -rf "$src" && mkdir -p "$src"
  git archive "$BASE" 2>/dev/null | tar -x -C "$src" 2>/dev/null ||
    { echo "ab_rev: cannot unpack revision $BASE (not a revision of this checkout)"; exit 2; }
fi
[ -f "$src/CMakeLists.txt" ] || { echo "ab_rev: $src holds no tinyfold source tree"; exit 2; }

# The binary, and the GPU module where the tree has a target for it (an older
# tree's binary depends on its module, so it comes with the binary there).
build() { # source dir, build dir, log name
  cmake -S "$1" -B "$2" -DCMAKE_BUILD_TYPE=Release -DTF_TESTS=OFF $CUDA_FLAGS > "$OUT/$3.cmake.log" 2>&1 ||
    return 1
  local targets=tinyfold
  grep -qw tinyfold_gpu <<<"$(cmake --build "$2" --target help 2>/dev/null)" && targets="tinyfold tinyfold_gpu"
  cmake --build "$2" -j "$((JOBS / 2 > 0 ? JOBS / 2 : 1))" --target $targets > "$OUT/$3.build.log" 2>&1
}
BASE_T="$OUT/build-base/tinyfold" CUR_T="$BUILD/tinyfold"
if [ -n "${BASE_BIN:-}" ] && [ -n "${CUR_BIN:-}" ]; then # binaries built already
  BASE_T=$BASE_BIN CUR_T=$CUR_BIN
else
  build "$src" "$OUT/build-base" base & pb=$!
  build . "$BUILD" cur & pc=$!
  wait $pb || { echo "ab_rev: the base build failed ($OUT/base.build.log)"; exit 1; }
  wait $pc || { echo "ab_rev: this tree's build failed ($OUT/cur.build.log)"; exit 1; }
fi

rm -f "$OUT"/run_*.json
for r in $(seq "$ROUNDS"); do
  for prob in $PROBLEMS; do
    if [ "$prob" = small ]; then N=64; S=16; else N=128; S=32; fi
    for p in $PRECISIONS; do
      for side in base cur; do
        T=$BASE_T; [ $side = cur ] && T=$CUR_T
        prec=""; [ "$BACKEND" = cuda ] && prec="--precision $p"
        timeout "${RUN_TIMEOUT:-300}" "$T" train --backend "$BACKEND" --impl "$IMPL" $GRAPH $prec --batch-size 4 \
          --seq-len $N --num-seqs $S --num-blocks 4 --num-steps "$STEPS" --quiet \
          --json "$OUT/run_${prob}_${p}_${side}_$r.json" > /dev/null 2>&1 ||
          echo "run $prob $p $side failed"
      done
    done
  done
done
python3 - "$OUT" "$BASE" <<'PY'
import glob, json, statistics as st, sys
O, base = sys.argv[1:3]
print(f"base {base} vs this tree (median step of all timed steps, alternated runs)")
print(f"{'problem':8} {'prec':5} {'base ms':>9} {'this ms':>9} {'this/base':>9}  samples/s base -> this  "
      "peak MiB base -> this  graph nodes")
rows = sorted({tuple(f.split("/run_")[1].split("_")[:2]) for f in glob.glob(f"{O}/run_*.json")})
differ = 0
for prob, p in rows:
    med, peak, nodes, losses = {}, {}, {}, {}
    for side in ("base", "cur"):
        xs = []
        for f in sorted(glob.glob(f"{O}/run_{prob}_{p}_{side}_*.json")):
            d = json.load(open(f))
            xs += [s["step_ms"] for s in d["steps"] if not s["warmup"]]
            losses.setdefault(side, [s["loss"] for s in d["steps"]])  # the same seed every run
            peak[side] = d["summary"]["peak_memory_bytes"] / 2**20
            nodes[side] = d["summary"].get("graph_kernel_nodes", "-")
        med[side] = st.median(xs) if xs else float("nan")
    print(f"{prob:8} {p:5} {med['base']:9.3f} {med['cur']:9.3f} {med['cur']/med['base']:9.3f}  "
          f"{4e3/med['base']:8.1f} -> {4e3/med['cur']:<8.1f}  {peak.get('base', 0):8.1f} -> "
          f"{peak.get('cur', 0):<8.1f}  {nodes.get('base')} -> {nodes.get('cur')}")
    same = losses.get("base") is not None and losses.get("base") == losses.get("cur")
    differ += not same
    print(f"{'':8} {'':5} losses of every step {'identical' if same else 'DIFFER'} "
          f"({len(losses.get('cur', []))} steps, last {losses.get('base', [0])[-1]} -> {losses.get('cur', [0])[-1]})")
sys.exit(1 if differ else 0)
PY
