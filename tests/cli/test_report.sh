#!/usr/bin/env bash
# `tinyfold report`: the page of two small CPU profiles (and a
# kernel_stats.csv, and a scaling JSON) has every section and references
# nothing outside itself; a 2-rank profile (under mpirun, skipped without it)
# has a rank panel, one rank none; bad input is one line, exit 2, and leaves
# no file.
# Usage: test_report.sh path/to/tinyfold
set -u
BIN=${1:?usage: $0 path/to/tinyfold}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0
fail() {
    fails=$((fails + 1))
    echo "FAIL: $*"
}

tiny=(--backend cpu --batch-size 1 --seq-len 8 --num-seqs 2 --num-blocks 1 --num-steps 2
      --warmup-steps 1 --threads 1)
for v in 1 3; do
    "$BIN" profile "${tiny[@]}" --impl v$v --out "$TMP/v$v" >"$TMP/log" 2>&1 ||
        { cat "$TMP/log"; echo "FAIL: profile v$v"; exit 1; }
done
cat >"$TMP/scaling.json" <<'JSON'
{"points": [{"N": 16, "peak_bytes": 1.0e7, "step_ms": 5.0, "flops": 1.0e9, "gflops": 200},
            {"N": 32, "peak_bytes": 3.5e7, "step_ms": 30.0, "flops": 7.0e9, "gflops": 233},
            {"N": 64, "peak_bytes": 1.3e8, "step_ms": 210.0, "flops": 5.2e10, "gflops": 247}]}
JSON

out="$TMP/report.html"
"$BIN" report "$TMP/v1" "$TMP/v3/summary.json" "$TMP/v3/kernel_stats.csv" "$TMP/scaling.json" \
    --out "$out" >"$TMP/log" 2>&1 || { cat "$TMP/log"; fail "report exited $?"; }
[ -s "$out" ] || fail "no report written"

# a scaling file whose values overflow a double (1e3440: inf) finishes: the
# chart's axis is left out, the page still written
cat >"$TMP/huge.json" <<'JSON'
{"points": [{"N": 16, "peak_bytes": 1.0e7, "step_ms": 5.0, "flops": 1.0e9, "gflops": 200},
            {"N": 32, "peak_bytes": 1.4e3440, "step_ms": 1e-320, "flops": 7.0e9}]}
JSON
timeout 60 "$BIN" report "$TMP/v3/summary.json" "$TMP/huge.json" --out "$TMP/huge.html" \
    >"$TMP/log" 2>&1 || { rc=$?; cat "$TMP/log"; fail "report of overflowing values exited $rc"; }
grep -q '<section id="scaling">' "$TMP/huge.html" || fail "no scaling section for overflowing values"

# every section is there, with its picture
for id in runs throughput steps phases kernels kdiff memory memtime timeline roofline scaling; do
    grep -q "<section id=\"$id\">" "$out" || fail "section '$id' missing"
done
for s in "<svg" "<circle" "<polyline" "<title>" "samples/s" "memory-bound\|memory</td>"; do
    grep -q -- "$s" "$out" || fail "'$s' missing from the page"
done
# the measured ceilings reached the page
grep -q "compute ceiling" "$out" || fail "no compute ceiling on the roofline"
# nothing outside the file: no URL, no fetched resource, no script
for pat in 'http:' 'https:' 'src=' 'url(' '@import' '<link' '<script' 'href=' '<img'; do
    if grep -qiF -- "$pat" "$out"; then fail "the page references '$pat'"; fi
done

# the timelines side by side share one time axis: the longest step's
axes=$(grep -o 'class="axisms">[0-9.]* ms' "$out" | sed 's/.*>//' | sort -u)
steps=$(grep -o 'class="stepms">[0-9.]* ms' "$out" | sed 's/.*>//' | sort -n)
[ "$(grep -c 'class="axisms">' "$out")" -eq 2 ] || fail "not two timelines"
[ "$(printf '%s\n' "$axes" | wc -l)" -eq 1 ] || fail "timelines on different axes: $axes"
[ "$axes" = "$(printf '%s\n' "$steps" | tail -1)" ] || fail "axis $axes is not the longest step"
short=$(printf '%s\n' "$steps" | head -1)
if [ "$short" != "$axes" ]; then
    grep -q ">end ${short% ms} ms</text>" "$out" || fail "the shorter step's end is not marked"
fi

# each step's time and loss: the profiles' steps, and a run JSON of known
# steps whose fifth timed step is an outlier
for v in v1 v3; do
    grep -q "<b>$v</b>: [0-9]* steps" "$out" || fail "no step panel for $v"
done
cat >"$TMP/steps.json" <<'JSON'
{"config": {"batch": 1}, "summary": {"step_ms": 140.2},
 "steps": [{"step": 0, "warmup": true, "loss": 9.5, "step_ms": 500},
           {"step": 1, "warmup": false, "loss": 9.0, "step_ms": 100},
           {"step": 2, "warmup": false, "loss": 8.0, "step_ms": 102},
           {"step": 3, "warmup": false, "loss": 7.5, "step_ms": 98},
           {"step": 4, "warmup": false, "loss": null, "step_ms": 101},
           {"step": 5, "warmup": false, "loss": 7.0, "step_ms": 300}]}
JSON
"$BIN" report "$TMP/steps.json" --out "$TMP/steps.html" >/dev/null 2>&1 || fail "report of a run JSON"
row='<tr><td>steps.json</td><td>5</td><td>140.200</td><td>101.000</td><td>98.000</td><td>300.000</td>'
grep -qF "$row" "$TMP/steps.html" || fail "the step statistics are wrong"
grep -qF '<td>500.000</td><td>9.5000 → 7.0000</td><td class="outliers" style="text-align:left">5 (300.0 ms)</td>' \
    "$TMP/steps.html" || fail "warm-up, loss or the outlier step is wrong"
[ "$(grep -c '<rect class="warmup"' "$TMP/steps.html")" -eq 1 ] || fail "not one warm-up bar"
[ "$(grep -c '<rect class="outlier"' "$TMP/steps.html")" -eq 1 ] || fail "not one outlier bar"
[ "$(grep -c '<rect class="timed"' "$TMP/steps.html")" -eq 4 ] || fail "not four timed bars"
grep -q '<polyline class="loss"' "$TMP/steps.html" || fail "no loss line"

# memory over time: the trace's counter track, every sample, and a made-up
# track of known values
n=$(grep -c '"ph":"C"' "$TMP/v1/trace.json")
hi=$(grep -o '"backend_MiB":[0-9.]*' "$TMP/v1/trace.json" | sed 's/.*://' | sort -n | tail -1)
[ "$n" -gt 0 ] || fail "the profile's trace has no memory counter"
grep -q "<tr><td>v1</td><td>backend_MiB</td><td>$n</td><td>[0-9.]*</td><td>$hi</td>" "$out" ||
    fail "memory over time: v1's backend counter is not $n samples up to $hi MiB"
grep -q '<polyline class="counter"' "$out" || fail "memory over time: no counter line"
mkdir -p "$TMP/mem"
cp "$TMP/v1/summary.json" "$TMP/mem/"
cat >"$TMP/mem/trace.json" <<'JSON'
{"traceEvents": [
{"name":"step 1","ph":"X","pid":1,"tid":2,"ts":0,"dur":1000},
{"name":"memory","ph":"C","pid":1,"ts":100,"args":{"backend_MiB":10,"host_rss_MiB":40}},
{"name":"memory","ph":"C","pid":1,"ts":500,"args":{"backend_MiB":30,"host_rss_MiB":41}},
{"name":"memory","ph":"C","pid":1,"ts":900,"args":{"backend_MiB":20,"host_rss_MiB":42}}]}
JSON
"$BIN" report "$TMP/mem" --out "$TMP/mem.html" >/dev/null 2>&1 || fail "report of a made-up counter track"
for row in "backend_MiB</td><td>3</td><td>10.000</td><td>30.000</td><td>20.000" \
           "host_rss_MiB</td><td>3</td><td>40.000</td><td>42.000</td><td>42.000"; do
    grep -qF "<tr><td>mem</td><td>$row</td></tr>" "$TMP/mem.html" || fail "memory over time: $row"
done
grep -q '<svg class="chart memtime"' "$TMP/mem.html" || fail "memory over time: no chart"

# kernel by kernel: the later profile against the first, and two
# kernel_stats.csv files of known kernels (one of each change)
grep -q '<p class="note"><b>v3</b> against <b>v1</b>: kernel time' "$out" ||
    fail "no kernel difference of v3 against v1"
hdr='"Name","Calls","TotalDurationNs","AverageNs","Percentage","MinNs","MaxNs","StdDev"'
printf '%s\n"k1",10,100000000,1,1,1,1,0\n"k2",5,50000000,1,1,1,1,0\n"k3",2,20000000,1,1,1,1,0\n"k5",1,10000000,1,1,1,1,0\n' \
    "$hdr" >"$TMP/a.csv"
printf '%s\n"k1",10,60000000,1,1,1,1,0\n"k2",5,80000000,1,1,1,1,0\n"k4",3,30000000,1,1,1,1,0\n"k5",1,10200000,1,1,1,1,0\n' \
    "$hdr" >"$TMP/b.csv"
"$BIN" report "$TMP/a.csv" "$TMP/b.csv" --out "$TMP/kdiff.html" >/dev/null 2>&1 ||
    fail "report of two kernel_stats.csv"
grep -o '<td class="name" title="k[0-9]">k[0-9]</td><td class="st"[^>]*>[a-z]*</td><td>[^<]*</td><td>[^<]*</td><td>[^<]*</td><td>[^<]*</td>' \
    "$TMP/kdiff.html" | sed 's/<[^>]*>/ /g; s/  */ /g; s/^ //; s/ $//' >"$TMP/kdiff.txt"
cat >"$TMP/kdiff.want" <<'TXT'
k1 faster 100.000 60.000 -40.000 0.60×
k2 slower 50.000 80.000 +30.000 1.60×
k4 added - 30.000 +30.000 -
k3 removed 20.000 - -20.000 -
k5 same 10.000 10.200 +0.200 1.02×
TXT
diff "$TMP/kdiff.want" "$TMP/kdiff.txt" >/dev/null || fail "kernel difference: $(cat "$TMP/kdiff.txt")"
for c in "added</td><td>1</td><td>+30.000" "removed</td><td>1</td><td>-20.000" \
         "faster</td><td>1</td><td>-40.000" "slower</td><td>1</td><td>+30.000"; do
    grep -qF "<tr><td>$c</td></tr>" "$TMP/kdiff.html" || fail "kernel difference counts: $c"
done

# a compute ceiling below what the ops achieved is flagged, its roof dashed;
# one far above them is not
ceiling() { # ceiling FLOPS DIR: v1's profile with that compute ceiling
    mkdir -p "$2"
    cp "$TMP/v1/trace.json" "$2/"
    sed "s/\"compute_flops_per_s\":[[:space:]]*[0-9.e+]*/\"compute_flops_per_s\": $1/" \
        "$TMP/v1/summary.json" >"$2/summary.json"
}
ceiling 1000 "$TMP/low"
ceiling 1e15 "$TMP/high"
"$BIN" report "$TMP/low" --out "$TMP/low.html" >/dev/null 2>&1 || fail "report of a low ceiling"
grep -q '<p class="warn">Compute ceiling measured low: [0-9]* ops\? ran faster' "$TMP/low.html" ||
    fail "no warning for a compute ceiling below the ops"
grep -q 'class="roof-low"[^>]*stroke-dasharray' "$TMP/low.html" || fail "the low roof is not dashed"
grep -q '1 kFLOP/s (measured low)</text>' "$TMP/low.html" || fail "the low roof is not labelled"
"$BIN" report "$TMP/high" --out "$TMP/high.html" >/dev/null 2>&1 || fail "report of a high ceiling"
if grep -q 'measured low' "$TMP/high.html"; then fail "a ceiling above every op flagged low"; fi
grep -q '<title>compute roof: 1 PFLOP/s' "$TMP/high.html" || fail "the solid compute roof is missing"

# a GPU-shaped trace: the ops on two stream tracks of pid 2 (as CUPTI's
# kernels are) each get a track of their own in the timeline
mkdir -p "$TMP/gpu"
cp "$TMP/v3/summary.json" "$TMP/gpu/"
# (the trace has one event a line; awk alone, so no interpreter is needed)
awk '/"ph":"M","pid":1,"tid":3,/ { next }
     /"ph":"X","pid":1,"tid":3,/ { sub(/"pid":1,"tid":3,/, "\"pid\":2,\"tid\":" (100 + k++ % 2) ",") }
     /^\]\}$/ { print ",{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":2,\"tid\":100,\"args\":{\"name\":\"stream 7\"}}"
                print ",{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":2,\"tid\":101,\"args\":{\"name\":\"stream 9\"}}" }
     { print }' "$TMP/v3/trace.json" >"$TMP/gpu/trace.json"
"$BIN" report "$TMP/gpu" --out "$TMP/gpu.html" >/dev/null 2>&1 || fail "report of the GPU-shaped trace"
for t in "stream 7" "stream 9"; do
    grep -q ">$t</text>" "$TMP/gpu.html" || fail "timeline track '$t' missing"
done

# bad input: one line "tinyfold: ...", exit 2, nothing written
bad() {
    local expect=$1
    shift
    rm -f "$TMP/bad.html"
    echo keep >"$TMP/keep.html"
    "$BIN" report "$@" >"$TMP/o" 2>"$TMP/e"
    local rc=$?
    [ "$rc" -eq 2 ] || fail "report $*: exit $rc, expected 2"
    [ "$(wc -l <"$TMP/e")" -eq 1 ] || fail "report $*: $(wc -l <"$TMP/e") stderr lines"
    grep -q '^tinyfold: ' "$TMP/e" || fail "report $*: stderr does not start with 'tinyfold: '"
    grep -qF -- "$expect" "$TMP/e" || fail "report $*: stderr lacks '$expect': $(cat "$TMP/e")"
    [ ! -e "$TMP/bad.html" ] || fail "report $*: wrote a file"
    [ "$(cat "$TMP/keep.html")" = keep ] || fail "report $*: overwrote an existing file"
    ls "$TMP"/*.html.* >/dev/null 2>&1 && fail "report $*: left a temporary file"
}
mkdir -p "$TMP/notprof"
bad "not a profile directory" "$TMP/notprof" --out "$TMP/bad.html"
bad "cannot read" "$TMP/missing" --out "$TMP/bad.html"
mkdir -p "$TMP/trunc"
head -c 300 "$TMP/v1/summary.json" >"$TMP/trunc/summary.json"
bad "not valid JSON" "$TMP/trunc" --out "$TMP/bad.html"
{ cat "$TMP/v1/summary.json"; echo "garbage"; } >"$TMP/padded.json"
bad "not valid JSON" "$TMP/padded.json" --out "$TMP/bad.html"
printf '"Name","Calls"\n"k",1\n' >"$TMP/wrong.csv"
bad "not a kernel_stats.csv" "$TMP/wrong.csv" --out "$TMP/bad.html"
# rocprofv3's other --stats summaries share the header: refused by name or by rows
printf '%s\n"k",1,5,1,1,1,1,0\n' "$hdr" >"$TMP/1234_memory_copy_stats.csv"
bad "memory copy statistics (by its name), not kernels" "$TMP/1234_memory_copy_stats.csv" --out "$TMP/bad.html"
printf '%s\n"hipLaunchKernel",40,5,1,1,1,1,0\n"hipMemcpyAsync",3,4,1,1,1,1,0\n' "$hdr" >"$TMP/api.csv"
bad "HIP API statistics (by its rows), not kernels" "$TMP/api.csv" --out "$TMP/bad.html"
bad "--out" "$TMP/v1"
bad "unknown option" "$TMP/v1" --bogus --out "$TMP/bad.html"
head -c 2000 "$TMP/v1/trace.json" >"$TMP/trunc/trace.json"
cp "$TMP/v1/summary.json" "$TMP/trunc/summary.json"
bad "trace.json' is not valid JSON" "$TMP/trunc" --out "$TMP/bad.html"
# runs of different problems are refused unless --force
"$BIN" profile "${tiny[@]}" --batch-size 2 --impl v3 --num-steps 2 --out "$TMP/b2" >/dev/null 2>&1 ||
    fail "profile b2"
bad "runs differ in batch" "$TMP/v1" "$TMP/b2" --out "$TMP/bad.html"
bad "runs differ in batch" "$TMP/v1" "$TMP/b2" --out "$TMP/keep.html"
"$BIN" report "$TMP/v1" "$TMP/b2" --force --out "$TMP/forced.html" >/dev/null 2>&1 ||
    fail "--force did not report"
[ -s "$TMP/forced.html" ] || fail "--force wrote nothing"
# so are runs of different precision; a half-precision run's roofline says
# which ceiling it is held to
"$BIN" profile "${tiny[@]}" --impl v1 --precision bf16 --out "$TMP/bf16" >/dev/null 2>&1 ||
    fail "profile bf16"
bad "runs differ in precision" "$TMP/v1" "$TMP/bf16" --out "$TMP/bad.html"
"$BIN" report "$TMP/v1" "$TMP/bf16" --force --out "$TMP/prec.html" >/dev/null 2>&1 ||
    fail "--force did not report runs of two precisions"
grep -q "an fp32 ceiling, this run is bf16" "$TMP/prec.html" || fail "the bf16 roofline note is missing"

# the rank panel: per rank of a 2-rank profile (under mpirun), none for one rank
if grep -q '<section id="ranks">' "$out"; then fail "a rank panel for single-rank profiles"; fi
if ! command -v mpirun >/dev/null 2>&1; then
    echo "SKIP: no mpirun (rank panel)"
elif ! ldd "$BIN" 2>/dev/null | grep -q libmpi; then
    echo "SKIP: tinyfold built without MPI (rank panel)"
else
    export OMPI_MCA_btl_vader_single_copy_mechanism=none
    MPI=(mpirun --oversubscribe -np 2)
    [ "$(id -u)" = 0 ] && MPI=(mpirun --allow-run-as-root --oversubscribe -np 2)
    if ! timeout 300 "${MPI[@]}" "$BIN" profile "${tiny[@]}" --batch-size 2 --out "$TMP/rk" \
        >"$TMP/log" 2>&1 </dev/null; then
        cat "$TMP/log"
        fail "profile under mpirun"
    else
        "$BIN" report "$TMP/rk" --out "$TMP/rk.html" >/dev/null 2>&1 || fail "report of 2 ranks"
        grep -q '<section id="ranks">' "$TMP/rk.html" || fail "no rank panel for 2 ranks"
        for k in 0 1; do
            grep -q "<tr><td>$k</td><td>[0-9.]*</td><td>[0-9.]*</td><td>[0-9.]*</td>" \
                "$TMP/rk.html" || fail "rank panel: no row for rank $k"
        done
        grep -q '<b>rk</b>: 2 ranks; skew <span class="skew">[0-9.]* ms</span>' "$TMP/rk.html" ||
            fail "rank panel: no skew"
        [ "$(grep -c '<title>rank [01]: [0-9.]* ms</title>' "$TMP/rk.html")" -eq 2 ] ||
            fail "rank panel: not two all-reduce bars"
        # a rank's summary.json missing: its row says so, the page is written
        mkdir -p "$TMP/rk1"
        cp "$TMP/rk/summary.json" "$TMP/rk1/"
        "$BIN" report "$TMP/rk1" --out "$TMP/rk1.html" >/dev/null 2>&1 ||
            fail "report of 2 ranks, one summary missing"
        grep -q '<tr><td>1</td><td colspan="5"[^>]*>[^<]*rank1/summary.json[^<]*cannot open' "$TMP/rk1.html" ||
            fail "rank panel: the missing rank is not named"
    fi
fi

if [ "$fails" -ne 0 ]; then
    echo "$fails failure(s)"
    exit 1
fi
echo "report: all checks passed"
