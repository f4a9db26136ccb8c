#!/bin/sh
# kernels/library-check.sh OUTDIR: on a CUDA GPU, confirm that the kernel library and the
# replay built from it compute and time what the committed H200 measurements recorded:
#   1. every kernel of the check suite against its CPU reference (dhbench exits non-zero on a
#      mismatch), and fetch version 5 (not in that suite);
#   2. the default suite's attention, top-k, indexer and residency lines timed again, each
#      median beside the committed one (measurements/h200/default-*.csv) with the ratio;
#   3. a short GPU replay of two configurations, whose misses must equal the simulator's at
#      every step (dhreplay fails otherwise) and the committed replay's, with step times beside
#      the committed ones. The committed replay used top-k version 5, hence --topk-version 5.
# Build first: make bin/dhbench bin/dhreplay (INIH_INC, INIH_LIB, R123_INC where the Debian
# packages are missing). Prints a short table last; full outputs under OUTDIR.
set -u
O=${1:?usage: library-check.sh OUTDIR}
mkdir -p "$O"
export CUDA_MODULE_LOADING=EAGER
fail=0
bin/dhbench --suite check --reps 5 --out "$O/check" > "$O/check.log" 2>&1 || { echo "check suite: FAILED"; fail=1; }
bin/dhbench --kernel fetch version=5 pool_gb=8 row_bytes=656,584 rows=16384 sms=8 pattern=serving,uniform \
  --reps 5 --out "$O/f5" > "$O/f5.log" 2>&1 || { echo "fetch version 5: FAILED"; fail=1; }
for k in attention topk indexer residency; do
  bin/dhbench --suite default --only $k --out "$O/def" > "$O/def-$k.log" 2>&1 || { echo "default $k: FAILED"; fail=1; }
  awk -F, 'NR==FNR { if (FNR > 1) m[$2","$3","$5","$7","$10","$11","$12","$13","$15","$16] = $23; next }
    FNR > 1 { key = $2","$3","$5","$7","$10","$11","$12","$13","$15","$16
      if ((key in m) && m[key] > 0) { n++; r = $23 / m[key]; s += r; if (r > mx) mx = r; if (mn == 0 || r < mn) mn = r } }
    END { if (n) printf "default %-10s %3d lines  new/committed median time: mean %.3f, min %.3f, max %.3f\n", k, n, s / n, mn, mx
          else printf "default %-10s no line matched\n", k }' k=$k \
    measurements/h200/default-$k.csv "$O/def/default-$k.csv"
done
bin/dhreplay --steps 6 --topk-version 5 --run hs2k --run hs4k-seed2 --out "$O/replay.csv" > "$O/replay.log" 2>&1 ||
  { echo "replay: FAILED (misses differ from the simulator's, or an error: $O/replay.log)"; fail=1; }
awk -F, '!/^#/ && $1 != "config_id" { print $1","$4","$6","$7 }' "$O/replay.csv" > "$O/replay-new.txt"
awk -F, '!/^#/ && $1 != "config_id" && ($1 == "hs2k" || $1 == "hs4k-seed2") && $4 < 6 { print $1","$4","$6","$7 }' \
  measurements/h200/replay-glm53-16x100k.csv > "$O/replay-old.txt"
if cmp -s "$O/replay-new.txt" "$O/replay-old.txt"; then echo "replay misses: identical to measurements/h200/replay-glm53-16x100k.csv"
else echo "replay misses: DIFFER from the committed replay"; fail=1; fi
awk -F, 'NR==FNR { if (!/^#/ && $1 != "config_id") t[$1","$4] = $5; next }
  !/^#/ && $1 != "config_id" && ($1","$4) in t && $4 >= 2 { n++; r = $5 / t[$1","$4]; s += r }
  END { if (n) printf "replay step time, steps 2-5: new/committed mean %.3f over %d steps\n", s / n, n }' \
  measurements/h200/replay-glm53-16x100k.csv "$O/replay.csv"
exit $fail
