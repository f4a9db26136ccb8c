#!/bin/sh
# calib-bench.sh: every measurement bin/dhcal calibrate reads (analysis/calibrate.c), on the local
# GPU, into DIR, under the names of measurements/h200/; then, on any GPU from Ampere on,
#   bin/dhcal calibrate models/hw/ DIR DIR/replay-glm53-16x100k.csv BASE.ini
# writes models/hw/measured-NAME.ini (BASE.ini: a datasheet profile of the GPU, docs/HARDWARE.md),
# and kernels/replay/heldout-bench.sh DIR models/hw/measured-NAME.ini the held-out replays, validated.
#   sh kernels/calib-bench.sh DIR
# The versions are the GPU's (kernels/README.md, "GPU architectures"): where the Hopper versions
# do not run, their suites' lines are skipped and the fallbacks measured beside them (the replay's
# choices: attention 5-1, indexer 4 or 1, top-k 6-1), which the calibration then fits.
# Long: the fetch grids pin a 64 GB host pool, the replays an 82 GB one (about an hour on the H200).
set -u
O=${1:?usage: calib-bench.sh DIR}
mkdir -p "$O"
B=bin/dhbench
[ -x $B ] && [ -x bin/dhreplay ] || { echo "calib-bench.sh: build first: make bin/dhbench bin/dhreplay" >&2; exit 1; }
fail=0
run() { "$@" || { echo "calib-bench.sh: failed: $*" >&2; fail=1; }; }
run $B --suite attention --only attention --b2b 20 --out "$O"   # attention-attention-b2b20.csv
# The fallbacks of the attention suite's Hopper versions, at its batches (skipped where they do not run).
run $B --kernel attention version=1,2,3,4 format=fp8,bf16 batch=1,16,64,128 k=2048 --b2b 20 --out "$O"
# Version 39 (the library's on hot rows at 64 heads) at the attention suite's grid, for a fit on it
# (kernels/NOTES.md, "Version 39 on the H200, and in the replay: outcome"); skipped where it does not run.
for g in "batch=1,16,32,64,128 k=2048" "batch=3,64 k=2000" "batch=1,16,128 k=64"; do
  rm -f "$O/v39/kernel-attention-b2b20.csv"
  run $B --kernel attention version=39 format=fp8,bf16 $g --b2b 20 --out "$O/v39"
  tail -n +2 "$O/v39/kernel-attention-b2b20.csv" >> "$O/attention-attention-b2b20.csv" 2>/dev/null
done
rm -rf "$O/v39"
run $B --suite fetch-calib --b2b 20 --out "$O"
run $B --suite fetch-beside --b2b 20 --out "$O"
for k in gemm indexer; do run $B --suite default --only $k --out "$O"; done
run $B --suite topk-scale --b2b 20 --out "$O"
run $B --kernel topk version=1 batch=1,16,132,264 ctx=25000,100000,1000000 k=512,2048 dist=normal --b2b 20 --out "$O"
run $B --kernel indexer version=5,4,1 heads=32 batch=16 ctx=100000 queries=1,2,4,8 k=2048 --b2b 20 --out "$O" &&
  mv "$O/kernel-indexer-b2b20.csv" "$O/indexer-topk6-b2b20.csv"
run $B --suite indexer-scale --out "$O"
run $B --kernel indexer version=4,1 heads=64 batch=64,128 ctx=250000,500000 k=512 --out "$O"
cat "$O"/kernel-attention-b2b20.csv | tail -n +2 >> "$O/attention-attention-b2b20.csv" 2>/dev/null
cat "$O"/kernel-topk-b2b20.csv | tail -n +2 >> "$O/topk-scale-b2b20.csv" 2>/dev/null
cat "$O"/kernel-indexer.csv | tail -n +2 >> "$O/indexer-scale.csv" 2>/dev/null
rm -f "$O"/kernel-attention-b2b20.csv "$O"/kernel-topk-b2b20.csv "$O"/kernel-indexer.csv
# The replay and its diagnostics (the commands of measurements/h200/replay-glm53-16x100k*.csv).
R=bin/dhreplay
run $R --steps 32 --run hs4k --run hs2k --run hs3k --run ad6k --run hs4k-seed2 --out "$O/replay-glm53-16x100k.csv"
# Without the fetch: the fitted configurations (hs2k, hs4k: fetch_interference) and sa6k.
run $R --steps 12 --skip fetch --run hs2k --run hs4k --run sa6k --out "$O/replay-glm53-16x100k-fetch-beside.csv"
run $R --steps 12 --fetch-only --run hs4k --run hs2k --run sp4k --run sp2k --out "$O/replay-glm53-16x100k-fetch-only.csv"
run $R --steps 12 --fetch-times --run hs2k --run hs4k --run sp2k --run sp4k --run sa6k \
  --out "$O/replay-glm53-16x100k-fetch-busy.csv"
# The fetch kernels alone, timed the same way (compute_interference's "in the step / alone"), appended.
run $R --steps 12 --fetch-only --fetch-times --run hs2k --run hs4k --run sp2k --run sp4k --run sa6k \
  --out "$O/fetch-only-busy.csv" &&
  { head -n 1 "$O/fetch-only-busy.csv" | sed 's/$/ (appended)/'; grep -v '^#' "$O/fetch-only-busy.csv" | tail -n +2; } \
    >> "$O/replay-glm53-16x100k-fetch-busy.csv"
rm -f "$O/fetch-only-busy.csv"
exit $fail
