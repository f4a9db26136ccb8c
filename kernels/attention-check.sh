#!/bin/sh
# attention-check.sh: one run that checks and times the sparse decode attention's newer
# versions (kernels/NOTES.md, "Version 7 and back-to-back timing"), within ~6 minutes on an
# H200. Writes DIR/*.csv and DIR/sanitizers-v7.txt; prints the attention table last.
#   sh kernels/attention-check.sh [DIR]          (default kernels/results/local)
# 1. compute-sanitizer memcheck and racecheck on version 7 (small shapes; skipped where
#    compute-sanitizer is not on PATH);
# 2. suites/attention.suite with each launch timed on its own, then 20 back to back.
dir=${1:-kernels/results/local}
[ -x bin/dhbench ] || sh kernels/build.sh || exit 1
mkdir -p "$dir"
status=0
if command -v compute-sanitizer >/dev/null 2>&1; then
  : > "$dir/sanitizers-v7.txt"
  for tool in memcheck racecheck; do
    echo "== compute-sanitizer --tool $tool: attention version 7, batch 2, k 100" >> "$dir/sanitizers-v7.txt"
    compute-sanitizer --tool $tool --error-exitcode 3 ./bin/dhbench --kernel attention version=7 format=fp8,bf16 \
      batch=2 k=100 --quick --reps 1 >> "$dir/sanitizers-v7.txt" 2>&1 || status=1
  done
  grep -E '^==|ERROR SUMMARY|RACECHECK SUMMARY' "$dir/sanitizers-v7.txt"
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
