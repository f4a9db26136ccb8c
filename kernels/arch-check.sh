#!/bin/sh
# arch-check.sh: the kernels' architecture paths checked on one GPU (kernels/README.md, "GPU
# architectures"). Runs bin/dhbench's default suite (every kernel but the fetch, whose versions
# differ between architectures only in version 4, which step 3 covers) twice: as built, the
# versions this GPU chooses, and with --as-arch sm_80, the generic fallbacks every GPU from
# Ampere on runs; then the fetch's versions on a small pool both ways, and a short replay with
# the generic fallbacks. Every grid point is checked against its CPU reference before it is
# timed; a failed check fails the script.
#   sh kernels/arch-check.sh DIR [ARCH]     (ARCH: the forced architecture, default sm_80)
# Writes DIR/default-KERNEL.csv, DIR/default-as-sm_80-KERNEL.csv, the fetch's CSVs and the logs.
# Build first: make bin/dhbench bin/dhreplay.
set -u
O=${1:?usage: arch-check.sh DIR [ARCH]}
A=${2:-sm_80}
mkdir -p "$O"
fail=0
for k in residency attention verify ring indexer topk gemm; do
  for mode in native forced; do
    if [ $mode = native ]; then set --; else set -- --as-arch "$A"; fi
    bin/dhbench --suite default --only $k --out "$O" "$@" > "$O/$mode-$k.log" 2>&1 || { echo "default $k ($mode): FAILED"; fail=1; }
  done
done
for mode in native forced; do
  if [ $mode = native ]; then set --; else set -- --as-arch "$A"; fi
  bin/dhbench --kernel fetch version=1,2,3,4,5,6,7,8,9,10 pool_gb=8 row_bytes=656 rows=16384 sms=8 pattern=serving \
    --reps 5 --out "$O" "$@" > "$O/$mode-fetch.log" 2>&1 || { echo "fetch ($mode): FAILED"; fail=1; }
done
if [ -x bin/dhreplay ]; then
  bin/dhreplay --steps 4 --run hs2k --as-arch "$A" --out "$O/replay-as-$A.csv" > "$O/replay-as-$A.log" 2>&1 ||
    { echo "replay (as $A): FAILED"; fail=1; }
fi
# The table: per kernel and mode, the lines measured and checked, and the skip lines.
for f in "$O"/default*.csv "$O"/kernel-fetch*.csv; do
  awk -F, -v f="$(basename "$f")" 'NR > 1 && $1 !~ /^#/ && $1 != "config_id" { n++; if ($31 == 1) c++ }
    END { printf "%-44s %4d lines, %4d checked\n", f, n, c }' "$f"
done
grep -h "skipped" "$O"/*.log | sort | uniq -c | sort -rn | head -40
exit $fail
