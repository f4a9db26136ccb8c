#!/bin/sh
# attention-check.sh: one run that checks and times the sparse decode attention's newer
# versions (kernels/NOTES.md, "Version 7 and back-to-back timing", "Version 8"), within ~6 minutes on an
# H200. Writes DIR/*.csv and DIR/sanitizers-vV.txt; prints the attention table last.
#   sh kernels/attention-check.sh [DIR [V]]      (default measurements/local, version 8)
# 1. compute-sanitizer memcheck and racecheck on version V (small shapes; skipped where
#    compute-sanitizer is not on PATH);
# 2. suites/attention.suite with each launch timed on its own, then 20 back to back.
dir=${1:-measurements/local}
v=${2:-8}
[ -x bin/dhbench ] || sh kernels/build.sh || exit 1
mkdir -p "$dir"
status=0
if command -v compute-sanitizer >/dev/null 2>&1; then
  log="$dir/sanitizers-v$v.txt"
  : > "$log"
  for tool in memcheck racecheck; do
    # batch 2, k 100: two splits (partials and the combine); batch 1, k 64: one split (final rows).
    echo "== compute-sanitizer --tool $tool: attention version $v, batch 2 k 100 and batch 1 k 64" >> "$log"
    compute-sanitizer --tool $tool --error-exitcode 3 ./bin/dhbench --kernel attention version=$v format=fp8,bf16 \
      batch=2 k=100 --quick --reps 1 >> "$log" 2>&1 || status=1
    compute-sanitizer --tool $tool --error-exitcode 3 ./bin/dhbench --kernel attention version=$v format=fp8,bf16 \
      batch=1 k=64 --quick --reps 1 >> "$log" 2>&1 || status=1
  done
  grep -E '^==|ERROR SUMMARY|RACECHECK SUMMARY' "$log"
else
  echo "compute-sanitizer not found: sanitizers skipped"
fi
sh kernels/gpubench.sh "$dir" attention || status=1
sh kernels/gpubench.sh "$dir" attention --b2b 20 || status=1
# The table: version, format, batch, timing, median us, % of the copy rate.
for f in "$dir"/attention-attention.csv "$dir"/attention-attention-b2b20.csv; do
  [ -f "$f" ] && awk -F, '/^#/ { next } !h { for (i = 1; i <= NF; i++) c[$i] = i; h = 1; next }
    { printf "%-9s v%-2s %-5s batch %-4s k %-5s %-12s %9s us %6s %%\n", $c["kernel"], $c["version"], $c["dtype"],
      $c["batch"], $c["k"], $c["pattern"] "/" $c["timing"], $c["median_us"], $c["pct_of_ceiling"] }' "$f"
done
exit $status
