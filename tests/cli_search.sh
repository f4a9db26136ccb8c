#!/bin/sh
# cli_search.sh: bin/dhsim --search-latency (sim/search.h) and the per-request
# latencies (sim/reqlat.h) from the command line:
#   - the answer's statistic is what a plain run at that concurrency, with the
#     search's warm-up cut, reports, it meets the bound and its check (one
#     above) does not; the stop reason is latency;
#   - under a memory limit the stop reason is memory, and a plain run at the
#     check concurrency holds fewer requests than it asks for;
#   - a speculative run keeps its target running all run long (its trace has
#     requests to replace every finished one: before, it ran dry and stopped);
#   - --requests writes one CSV row per arrived request, --timeline adds the
#     CDFs, --latency-stat takes a per-request statistic, bad values are errors.
# Runs from the repository root.
bin=./bin/dhsim
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
small="--steps 40 --set workload.output_len=8 --set workload.output_len_max=16 --set workload.prompt_len=8000 --policy hisparse"

# row FILE: the search table's row of the policy (fields: policy concurrency per_GPU tok/s stat_ms CI stop check check_ms warm-up measured runs)
row() { awk '$1 == "hisparse"' "$1"; }

"$bin" $small --search-latency 30 --latency-stat p50 >"$tmp/s1" 2>"$tmp/e1"
set -- $(row "$tmp/s1")
if [ $# -ge 12 ]; then
  conc=$2; stat=$5; stop=$7; check=$8; check_ms=$9; warm=${10}
  p50=$("$bin" $small --concurrency "$conc" --set workload.warmup_steps="$warm" --quiet --json - |
        tr ',' '\n' | awk -F': ' '/"tpot_p50_s"/ { printf "%.2f", $2 * 1000; exit }')
  if [ "$p50" = "$stat" ] && [ "$stop" = latency ] && awk -v a="$stat" -v b="$check_ms" 'BEGIN { exit !(a <= 30 && b > 30) }'
  then echo "PASS search_bound_and_check"
  else echo "FAIL search_bound_and_check (per GPU $3: $stat ms, plain run $p50 ms; check $check: $check_ms ms; stop $stop)"; fi
  # One progress line per run on stderr.
  if [ "$(grep -c '^search: hisparse per GPU' "$tmp/e1")" -eq "${12}" ]; then echo "PASS search_progress"
  else echo "FAIL search_progress ($(wc -l <"$tmp/e1") lines for ${12} runs)"; fi
else echo "FAIL search_bound_and_check (no result: $(cat "$tmp/e1"))"; echo "FAIL search_progress"; fi

mem="$small --set instance.weights_per_gpu_bytes=125e9"
"$bin" $mem --search-latency 100000 >"$tmp/s2" 2>"$tmp/e2"
set -- $(row "$tmp/s2")
if [ $# -ge 12 ] && [ "$7" = memory ] && [ "$9" = memory ]; then
  per=$3
  active_at() { "$bin" $mem --concurrency "$1" --quiet --json - | tr ',' '\n' | awk -F': ' '/"mean_active"/ { print $2 }'; }
  a=$(active_at $((per * 8))); b=$(active_at $(((per + 1) * 8)))
  if awk -v p="$per" -v a="$a" -v b="$b" 'BEGIN { exit !(a == p && b < p + 1) }'; then echo "PASS search_memory_bound"
  else echo "FAIL search_memory_bound (per GPU $per: mean active $a; at $((per + 1)): $b)"; fi
else echo "FAIL search_memory_bound ($(cat "$tmp/s2" "$tmp/e2"))"; fi

# Speculative decoding commits up to gamma + 1 tokens a step: short outputs
# finish fast, and every one is replaced.
"$bin" --policy adaptive+dflash2 --concurrency 16 --steps 150 --set workload.prompt_len=4000 --set workload.output_len=32 \
  --set workload.output_len_max=64 --quiet --timeline "$tmp/sp" 2>"$tmp/e3"
n=$(awk -F'\t' 'NR > 1 && $6 == 2' "$tmp/sp.tsv" | wc -l)
if [ "$n" -eq 150 ]; then echo "PASS spec_replaced_all_run"; else echo "FAIL spec_replaced_all_run ($n of 150 steps at 2 requests; $(cat "$tmp/e3"))"; fi

# Per-request CSV: one row per arrived request, their TTFTs defined.
"$bin" $small --concurrency 32 --quiet --requests "$tmp/r.csv" --timeline "$tmp/t" 2>"$tmp/e4"
rows=$(awk -F, 'NR > 1 && $1 == "hisparse"' "$tmp/r.csv" | wc -l)
bad=$(awk -F, 'NR > 1 && ($11 == "" || $11 <= 0)' "$tmp/r.csv" | wc -l)
if [ "$(head -1 "$tmp/r.csv" | cut -d, -f11)" = ttft_s ] && [ "$rows" -ge 4 ] && [ "$bad" -eq 0 ]; then echo "PASS requests_csv"
else echo "FAIL requests_csv ($rows rows, $bad without TTFT; $(cat "$tmp/e4"))"; fi
# The CDF's p90 row is the 0.9 quantile of the CSV's TTFTs (ceil(0.9 n)-th smallest).
want=$(awk -F, 'NR > 1 && $5 == 1 { print $11 }' "$tmp/r.csv" | sort -g | awk '{ v[NR] = $1 } END { r = int(0.9 * NR); if (r < 0.9 * NR) r++; print v[r] }')
got=$(awk -F'\t' '$2 == "ttft" && $4 == 0.9 { print $5 }' "$tmp/t.latency.tsv")
if awk -v a="$want" -v b="$got" 'BEGIN { exit !(a != "" && (a - b) * (a - b) < 1e-18) }'; then echo "PASS latency_cdf"
else echo "FAIL latency_cdf (CSV p90 $want, CDF $got)"; fi

# A per-request statistic in the search.
"$bin" $small --search-latency 400 --latency-stat e2e_p90 >"$tmp/s5" 2>"$tmp/e5"
if grep -q "^largest concurrency with e2e_p90 <= 400 ms" "$tmp/s5" && [ -n "$(row "$tmp/s5")" ]; then echo "PASS search_e2e"
else echo "FAIL search_e2e ($(cat "$tmp/s5" "$tmp/e5"))"; fi

# expect_error NAME NEEDLE ARGS...: non-zero exit, one line on stderr naming NEEDLE, no output file.
expect_error() {
  name=$1; needle=$2; shift 2
  "$bin" "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?
  if [ "$rc" -ne 0 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "^dhsim: .*$needle" "$tmp/err" && [ ! -e "$tmp/x.csv" ]
  then echo "PASS $name"; else echo "FAIL $name (rc $rc, stderr: $(cat "$tmp/err"))"; fi
}
expect_error bad_latency_stat "expected p50, p90, p99 or mean" --latency-stat p95 --search-latency 30
expect_error bad_latency_metric "expected token, tpot, ttft, e2e or queue" --latency-stat itl_p90 --search-latency 30
expect_error bad_search_max "search-max" --search-max 0 --search-latency 30
expect_error requests_unwritable "nodir" $small --requests "$tmp/nodir/x.csv"
expect_error search_open_loop "needs workload.mode = closed" $small --set workload.mode=open --set workload.rate=10 --search-latency 30
expect_error search_too_short "raise --steps" $small --steps 12 --search-latency 30 --requests "$tmp/x.csv"
