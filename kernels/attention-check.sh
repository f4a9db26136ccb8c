#!/bin/sh
# attention-check.sh: one run that checks and times the sparse decode attention's newer
# versions (kernels/NOTES.md, "Version 7 and back-to-back timing", "Version 8"), within ~6 minutes on an
# H200. Writes DIR/*.csv and DIR/sanitizers-vV.txt; prints the attention table last.
#   sh kernels/attention-check.sh [DIR [V [SUITE]]]   (default measurements/local, version 8, attention)
# ATTN_TIMINGS="isolated b2b" (the default) or "b2b" alone chooses the timings of step 2.
# V may be a list (14,15); ATTN_HEADS (default 64) the heads of the sanitizers' shapes, e.g.
# 64,128 for versions 14-15, whose own kernel runs at 128 heads only.
# 1. compute-sanitizer memcheck and racecheck on version V (small shapes; skipped where
#    compute-sanitizer is not on PATH);
# 2. suites/SUITE.suite with each launch timed on its own, then 20 back to back.
dir=${1:-measurements/local}
v=${2:-8}
suite=${3:-attention}
timings=${ATTN_TIMINGS:-isolated b2b}
heads=${ATTN_HEADS:-64}
[ -x bin/dhbench ] || sh kernels/build.sh || exit 1
mkdir -p "$dir"
status=0
if command -v compute-sanitizer >/dev/null 2>&1; then
  log="$dir/sanitizers-v$(echo "$v" | tr , -).txt"
  : > "$log"
  for tool in memcheck racecheck; do
    # batch 2, k 100: two splits (partials and the combine); batch 1, k 64: one split (final rows).
    echo "== compute-sanitizer --tool $tool: attention version $v, heads $heads, batch 2 k 100 and batch 1 k 64" >> "$log"
    compute-sanitizer --tool $tool --error-exitcode 3 ./bin/dhbench --kernel attention version=$v format=fp8,bf16 \
      heads=$heads batch=2 k=100 --quick --reps 1 >> "$log" 2>&1 || status=1
    compute-sanitizer --tool $tool --error-exitcode 3 ./bin/dhbench --kernel attention version=$v format=fp8,bf16 \
      heads=$heads batch=1 k=64 --quick --reps 1 >> "$log" 2>&1 || status=1
  done
  grep -E '^==|ERROR SUMMARY|RACECHECK SUMMARY' "$log"
else
  echo "compute-sanitizer not found: sanitizers skipped"
fi
for t in $timings; do
  case $t in
  isolated) sh kernels/gpubench.sh "$dir" "$suite" || status=1 ;;
  b2b) sh kernels/gpubench.sh "$dir" "$suite" --b2b 20 || status=1 ;;
  esac
done
# The table: version, format, batch, heads, timing, median us, TFLOP/s, % of the copy rate.
for f in "$dir/$suite"-*.csv; do
  [ -f "$f" ] && awk -F, '/^#/ { next } !h { for (i = 1; i <= NF; i++) c[$i] = i; h = 1; next }
    { printf "%-9s v%-2s %-5s batch %-4s heads %-4s k %-5s %-13s %9s us %7s TFLOP/s %6s %% %s\n", $c["kernel"], $c["version"],
      $c["dtype"], $c["batch"], $c["heads"], $c["k"], $c["pattern"] "/" $c["timing"], $c["median_us"], $c["tflops"],
      $c["pct_of_ceiling"], $c["checked"] == 1 ? "" : "UNCHECKED" }' "$f"
done
exit $status
