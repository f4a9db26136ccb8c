#!/bin/sh
# cli_dhsweep.sh: bin/dhsweep on bad sweep files (one error line "dhsweep: ...",
# non-zero exit, no point run), on determinism (the same bytes for 1 and 3
# workers, and with every task run instead of reused), on agreement with bin/dhsim run alone, on resumption (a missing,
# a corrupt and a killed point run again, the others are skipped), on a
# failing point (recorded, the others go on), on a generator parameter axis,
# on the table (CSV, and HDF5 read by h5py as the README shows) and on plot.
# Runs from the repository root.
bin=./bin/dhsweep
PY=/usr/bin/python3
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1"; }

# sweep NAME OUTPUT: a small sweep file (tests/sweep_fixture.sh: 4 requests per GPU, 8 steps).
. tests/sweep_fixture.sh
sweep() { small_sweep "$tmp/$1.ini" "$2" hisparse,adaptive,resident 1:2:1; }

# expect_error NAME NEEDLE FILE: exit status non-zero, one line on stderr naming NEEDLE, no point written.
expect_error() {
  name=$1; needle=$2; file=$3
  "$bin" run "$file" --quiet >"$tmp/out" 2>"$tmp/err"; rc=$?
  lines=$(wc -l <"$tmp/err")
  n=$(ls "$tmp"/bad/points/*.json 2>/dev/null | wc -l)
  if [ "$rc" -ne 0 ] && [ "$lines" -eq 1 ] && grep -q "^dhsweep: .*$needle" "$tmp/err" && [ "$n" -eq 0 ]; then pass "$name"
  else fail "$name (rc $rc, $n points, stderr: $(cat "$tmp/err"))"; fi
}

sweep bad "$tmp/bad"
sed 's/^steps = 8/stepz = 8/' "$tmp/bad.ini" >"$tmp/e1.ini"; expect_error unknown_sweep_key "unknown key 'stepz'" "$tmp/e1.ini"
sed 's/^policy.hisparse_budget_k = .*/policy.hisparse_budget_k = 3:1:1/' "$tmp/bad.ini" >"$tmp/e2.ini"; expect_error bad_range "range '3:1:1'" "$tmp/e2.ini"
sed 's/^policy.hisparse_budget_k = .*/workload.concurency = 16,32/' "$tmp/bad.ini" >"$tmp/e3.ini"; expect_error unknown_config_key "unknown key 'concurency'" "$tmp/e3.ini"
sed 's/^policy.hisparse_budget_k = .*/policy.hisparse_budget_k = 0.5,2/' "$tmp/bad.ini" >"$tmp/e4.ini"; expect_error bad_value_in_one_point "hisparse_budget_k" "$tmp/e4.ini"
sed 's/^policies = .*/policies = hisparse,lfu/' "$tmp/bad.ini" >"$tmp/e5.ini"; expect_error bad_policy "unknown policy 'lfu'" "$tmp/e5.ini"
sed 's/^policies = .*/policies = oracle+dflash2/' "$tmp/bad.ini" >"$tmp/e6.ini"; expect_error oracle_spec "oracle does not run with speculative" "$tmp/e6.ini"
printf 'gen.selection.step_overlapp = 0.5,0.6\n' >>"$tmp/bad.ini"; expect_error bad_gen_key "step_overlapp" "$tmp/bad.ini"
sweep e7 "$tmp/bad"; sed -i 's/^output = .*/&\ncombine = zip/' "$tmp/e7.ini"; printf 'workload.prompt_len = 1000,2000\n' >>"$tmp/e7.ini"
expect_error zip_lengths "one length" "$tmp/e7.ini"
: >"$tmp/afile"
sweep e8 "$tmp/afile/out"; expect_error unwritable_output "unable to create" "$tmp/e8.ini"
sweep e9 "$tmp/bad"; printf '[extra]\nx = 1\n' >>"$tmp/e9.ini"; expect_error unknown_section "unknown section \[extra\]" "$tmp/e9.ini"

# Determinism: 1 and 3 workers give the same bytes, files and table.
sweep s1 "$tmp/w1"; sweep s3 "$tmp/w3"
if "$bin" run "$tmp/s1.ini" --workers 1 --quiet && "$bin" run "$tmp/s3.ini" --workers 3 --quiet; then pass "run"; else fail "run"; fi
same=1
for f in results.csv results.h5; do cmp -s "$tmp/w1/$f" "$tmp/w3/$f" || same=0; done
for f in "$tmp"/w1/points/*.json; do cmp -s "$f" "$tmp/w3/points/$(basename "$f")" || same=0; done
[ "$(ls "$tmp"/w1/points/*.json | wc -l)" -eq 6 ] || same=0
if [ $same = 1 ]; then pass "same bytes for 1 and 3 workers"; else fail "same bytes for 1 and 3 workers"; fi
# Reuse: adaptive and resident do not read the budget, so each runs once per seed
# here; running every task (--no-reuse) gives the same bytes.
sweep nr "$tmp/nr"
"$bin" run "$tmp/nr.ini" --workers 2 --quiet --no-reuse
same=1
for f in results.csv results.h5; do cmp -s "$tmp/w1/$f" "$tmp/nr/$f" || same=0; done
for f in "$tmp"/w1/points/*.json; do cmp -s "$f" "$tmp/nr/points/$(basename "$f")" || same=0; done
if [ $same = 1 ]; then pass "reused runs give the bytes of running every task"; else fail "reused runs give the bytes of running every task"; fi
rows=$(($(wc -l <"$tmp/w1/results.csv") - 1))
if [ "$rows" -eq 18 ]; then pass "one row per (point, seed, policy)"; else fail "one row per (point, seed, policy): $rows rows"; fi

# Each run equals bin/dhsim's on the same inputs (point 1 = budget 2, seed 2).
./bin/dhsim --policy hisparse,adaptive,resident --steps 8 --concurrency 32 --set workload.output_len=6 \
  --set workload.output_len_max=12 --set policy.hisparse_budget_k=2 --seed 2 --json "$tmp/bare.json" --quiet
a=$(grep -o '"tok_s_per_gpu": [^,]*\|"missed_rows": [^,]*' "$tmp/bare.json" | tr '\n' ' ')
b=$(grep -o '"tok_s_per_gpu": [^,]*\|"missed_rows": [^,]*' "$tmp/w1/points/p000001-s2.json" | tr '\n' ' ')
if [ -n "$a" ] && [ "$a" = "$b" ]; then pass "same figures as dhsim"; else fail "same figures as dhsim ($a / $b)"; fi

# A concurrency axis: the smaller points replay the largest one's first streams
# (generated once for the group); each point's figures are dhsim's alone.
small_sweep "$tmp/c.ini" "$tmp/wc" hisparse,adaptive,oracle 1
sed -i 's/^policy.hisparse_budget_k = .*/workload.concurrency = 16,48/; /^workload.concurrency = 32$/d' "$tmp/c.ini"
"$bin" run "$tmp/c.ini" --workers 2 --quiet
same=1
for c in 16 48; do
  ./bin/dhsim --policy hisparse,adaptive,oracle --steps 8 --concurrency $c --set workload.output_len=6 \
    --set workload.output_len_max=12 --seed 1 --json "$tmp/bare$c.json" --quiet
  a=$(grep -o '"tok_s_per_gpu": [^,]*\|"missed_rows": [^,]*\|"fetch_fraction": [^,]*' "$tmp/bare$c.json" | tr '\n' ' ')
  b=$(grep -o '"tok_s_per_gpu": [^,]*\|"missed_rows": [^,]*\|"fetch_fraction": [^,]*' "$tmp/wc/points/p00000$((c / 48))-s1.json" | tr '\n' ' ')
  [ -n "$a" ] && [ "$a" = "$b" ] || { same=0; echo "concurrency $c: $a / $b"; }
done
if [ $same = 1 ]; then pass "concurrency axis: same figures as dhsim"; else fail "concurrency axis: same figures as dhsim"; fi

# Resumption: a missing and a truncated point run again, the others are skipped, same table.
cp "$tmp/w1/results.csv" "$tmp/before.csv"
rm "$tmp/w1/points/p000000-s1.json"
head -c 100 "$tmp/w1/points/p000002-s2.json" >"$tmp/x" && mv "$tmp/x" "$tmp/w1/points/p000002-s2.json"
"$bin" run "$tmp/s1.ini" --workers 2 >"$tmp/out" 2>&1
if grep -q "4 skipped, 2 run, 0 failed" "$tmp/out" && cmp -s "$tmp/before.csv" "$tmp/w1/results.csv"; then pass "resume"
else fail "resume ($(cat "$tmp/out"))"; fi
if "$bin" merge "$tmp/w1" >/dev/null && cmp -s "$tmp/before.csv" "$tmp/w1/results.csv"; then pass "merge"; else fail "merge"; fi

# A killed sweep restarts where it stopped and ends with the same table.
sweep k "$tmp/wk"
sed -i 's/^steps = 8/steps = 40/; s/^seeds = .*/seeds = 1:4:1/' "$tmp/k.ini"
"$bin" run "$tmp/k.ini" --workers 1 --quiet & pid=$!
i=0; while [ $i -lt 1200 ] && [ "$(ls "$tmp"/wk/points/*.json 2>/dev/null | wc -l)" -lt 2 ]; do sleep 0.1; i=$((i + 1)); done
kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
done_before=$(ls "$tmp"/wk/points/*.json 2>/dev/null | wc -l)
"$bin" run "$tmp/k.ini" --workers 2 >"$tmp/out" 2>&1
sed 's/^output = .*/output = '"$(echo "$tmp/wk2" | sed 's/\//\\\//g')"'/' "$tmp/k.ini" >"$tmp/k2.ini"
"$bin" run "$tmp/k2.ini" --workers 2 --quiet
if [ "$done_before" -ge 2 ] && [ "$done_before" -lt 12 ] && grep -q "($done_before skipped" "$tmp/out" &&
   cmp -s "$tmp/wk/results.csv" "$tmp/wk2/results.csv"; then pass "killed sweep resumes"
else fail "killed sweep resumes ($done_before done before; $(cat "$tmp/out"))"; fi

# A failing point is recorded with its error; the others go on; the exit status says so.
./bin/dhtrace gen --preset glm51-longbench --requests 4 --output 12 -o "$tmp/small.h5" >/dev/null
printf 'not HDF5\n' >"$tmp/garbage.h5"
cat >"$tmp/f.ini" <<EOF2
[sweep]
policies = hisparse,adaptive
steps = 6
output = $tmp/wf
[base]
workload.concurrency = 32
trace.preset =
[axes]
trace.path = $tmp/small.h5,$tmp/garbage.h5
EOF2
"$bin" run "$tmp/f.ini" --workers 2 >"$tmp/out" 2>"$tmp/err"; rc=$?
if [ $rc -ne 0 ] && grep -q "1 of 2 points have a failing policy" "$tmp/err" &&
   [ "$(grep -c ',ok,' "$tmp/wf/results.csv")" -eq 2 ] && [ "$(grep -c ',error,.*garbage.h5' "$tmp/wf/results.csv")" -eq 2 ]; then
  pass "failing point recorded"
else fail "failing point recorded (rc $rc, $(cat "$tmp/err"))"; fi

# A generator parameter as an axis: the preset's own value gives dhsim's figures, another differs.
cat >"$tmp/g.ini" <<EOF2
[sweep]
policies = hisparse
steps = 8
output = $tmp/wg
[base]
workload.concurrency = 32
workload.output_len = 6
workload.output_len_max = 12
[axes]
gen.selection.step_overlap = 0.5,0.7
EOF2
"$bin" run "$tmp/g.ini" --quiet
./bin/dhsim --policy hisparse --steps 8 --concurrency 32 --set workload.output_len=6 --set workload.output_len_max=12 \
  --json "$tmp/bare.json" --quiet
a=$(grep -o '"missed_rows": [^,]*' "$tmp/bare.json")
b0=$(grep -o '"missed_rows": [^,]*' "$tmp/wg/points/p000000-s1.json")
b1=$(grep -o '"missed_rows": [^,]*' "$tmp/wg/points/p000001-s1.json")
if [ -n "$a" ] && [ "$a" = "$b1" ] && [ "$a" != "$b0" ]; then pass "generator parameter axis"
else fail "generator parameter axis ($a / $b0 / $b1)"; fi

# The table: CSV with intervals over the two seeds, HDF5 read by h5py as the README shows.
cat >"$tmp/read.py" <<'PYEOF'
import sys, csv, math, h5py, numpy as np
d = sys.argv[1]
t = h5py.File(d + "/results.h5", "r")["results"][()]
rows = list(csv.DictReader(open(d + "/results.csv")))
assert len(t) == len(rows) == 18, (len(t), len(rows))
assert list(t.dtype.names) == list(rows[0].keys())
for k in ("point", "seed", "policy", "policy.hisparse_budget_k", "workload.steps", "commit", "config_digest",
          "tok_s_per_gpu", "tok_s_per_gpu_mean", "tok_s_per_gpu_ci95", "fetch_fraction_ci95", "ci_n"):
    assert k in t.dtype.names, k
for r, x in zip(rows, t):
    assert r["policy"] == x["policy"].decode() and float(r["tok_s_per_gpu"]) == x["tok_s_per_gpu"]
# A unit per field (none unknown: the figures' table in sim/out.c and the config schemas cover every column),
# and what wrote the table.
f = h5py.File(d + "/results.h5", "r")
u = dict(zip(t.dtype.names, [str(x) for x in f["results"].attrs["units"]]))
assert len(u) == len(t.dtype.names) and not [k for k, v in u.items() if v == "unknown"], [k for k, v in u.items() if v == "unknown"]
assert u["tok_s_per_gpu"] == u["tok_s_per_gpu_ci95"] == "tokens/s" and u["tpot_p90_s"] == "s/token" and u["fetch_bytes"] == "bytes"
assert f.attrs["tool"] == "dhsweep" and f.attrs["commit"] == t["commit"][0].decode() and f.attrs["sweep_digest"] == t["sweep_digest"][0].decode()
# The interval of (point 0, hisparse) from its two seeds: t(0.975, 1) = 12.706.
v = [float(r["tok_s_per_gpu"]) for r in rows if r["point"] == "0" and r["policy"] == "hisparse"]
m = sum(v) / 2; s = math.sqrt(sum((y - m) ** 2 for y in v))
h = 12.7062047361747 * s / math.sqrt(2)
x = [r for r in rows if r["point"] == "0" and r["policy"] == "hisparse"][0]
assert abs(float(x["tok_s_per_gpu_mean"]) - m) <= 1e-9 * abs(m), (x["tok_s_per_gpu_mean"], m)
assert abs(float(x["tok_s_per_gpu_ci95"]) - h) <= 1e-6 * max(h, 1e-12), (x["tok_s_per_gpu_ci95"], h)
print("ok")
PYEOF
if [ -x "$PY" ] && $PY "$tmp/read.py" "$tmp/w3" >"$tmp/out" 2>&1 && grep -q '^ok' "$tmp/out"; then pass "table in CSV and HDF5 (h5py)"
else fail "table in CSV and HDF5 (h5py): $(tail -3 "$tmp/out")"; fi
# A commit that parses as a number ("765e114", a real short hash) stays text in the HDF5 table.
cp -r "$tmp/w3" "$tmp/w3hex" && rm -f "$tmp/w3hex/results.csv" "$tmp/w3hex/results.h5"
for f in "$tmp/w3hex"/points/*.json; do sed 's/"commit": "[^"]*"/"commit": "765e114"/' "$f" >"$f.x" && mv "$f.x" "$f"; done
if "$bin" merge "$tmp/w3hex" >/dev/null 2>"$tmp/err" && [ -x "$PY" ] &&
   $PY -c 'import sys, h5py; t = h5py.File(sys.argv[1], "r")["results"][()]; assert t["commit"][0] == b"765e114", t["commit"][0]; print("ok")' \
     "$tmp/w3hex/results.h5" >"$tmp/out" 2>&1 && grep -q '^ok' "$tmp/out"; then pass "numeric-looking commit kept as text"
else fail "numeric-looking commit kept as text: $(cat "$tmp/err") $(tail -2 "$tmp/out")"; fi

# plot: PNG and PDF of a metric against an axis.
if "$bin" plot "$tmp/s3.ini" --metric tok_s_per_gpu --axis policy.hisparse_budget_k -o "$tmp/p" >/dev/null 2>"$tmp/err" &&
   [ "$(head -c 4 "$tmp/p.png" | od -An -c | tr -d ' ')" = "211PNG" ] && [ "$(head -c 4 "$tmp/p.pdf")" = "%PDF" ]; then pass "plot"
else fail "plot ($(cat "$tmp/err"))"; fi
if "$bin" plot "$tmp/w3" --metric nope --axis policy.hisparse_budget_k >/dev/null 2>"$tmp/err"; then fail "plot unknown metric"
elif grep -q "no numeric metric 'nope'" "$tmp/err"; then pass "plot unknown metric"; else fail "plot unknown metric ($(cat "$tmp/err"))"; fi

# check validates every point without running one; slurm writes a script that runs shards.
if "$bin" check "$tmp/s1.ini" | grep -q "3 points x 2 seeds x 3 policies = 18 runs"; then pass "check"; else fail "check"; fi
sweep sl "$tmp/wsl"
if "$bin" slurm "$tmp/sl.ini" --tasks 2 >"$tmp/out" && grep -q -- '--array=0-1' "$tmp/wsl/sweep.sbatch" &&
   grep -q -- '--shard "$SLURM_ARRAY_TASK_ID/2"' "$tmp/wsl/sweep.sbatch"; then pass "slurm script"; else fail "slurm script"; fi
# The script's two array tasks run by hand, then merge: the same table as one run.
if SLURM_ARRAY_TASK_ID=0 SLURM_CPUS_PER_TASK=1 sh "$tmp/wsl/sweep.sbatch" && "$bin" merge "$tmp/wsl" >/dev/null 2>&1; then
  fail "merge of an unfinished sweep fails"; else pass "merge of an unfinished sweep fails"; fi
if SLURM_ARRAY_TASK_ID=1 SLURM_CPUS_PER_TASK=1 sh "$tmp/wsl/sweep.sbatch" && "$bin" merge "$tmp/wsl" >/dev/null &&
   cmp -s "$tmp/wsl/results.csv" "$tmp/w1/results.csv"; then pass "shards merged"; else fail "shards merged"; fi

# The progress bar: drawn on a terminal (script(1) gives the run one), never into a pipe or a file.
# A run shorter than half a second never shows one (traces/progress.c), so this sweep's points
# are long enough (about 2 s in all) that the bar's appearance does not depend on the machine.
sweep pb "$tmp/wpb"
sed -i 's/^steps = 8$/steps = 150/; s/^workload.output_len = 6$/workload.output_len = 200/; s/^workload.output_len_max = 12$/workload.output_len_max = 200/' "$tmp/pb.ini"
if script -qc "$bin run $tmp/pb.ini --workers 1" /dev/null 2>&1 | tr '\r' '\n' | grep -q 'dhsweep: points \[#*\.*\] 100% 6/6'; then
  pass "progress bar on a terminal"; else fail "progress bar on a terminal"; fi
rm -rf "$tmp/wpb"
if "$bin" run "$tmp/pb.ini" --workers 1 2>&1 | grep -q 'points \['; then fail "no progress bar in a pipe"; else pass "no progress bar in a pipe"; fi
