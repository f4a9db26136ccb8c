#!/bin/sh
# Runs bin/dhsim on every configuration of a GPU replay (kernels/replay/simrun.sh) and compares
# step by step with bin/dhcal validate:
#   sh kernels/replay/validate.sh [PROFILE] [REPLAY.csv] [OUTDIR]   (exit 2 if a target is missed)
# Targets: held-out configurations median <= 5 %, p95 <= 10 %; misses equal on every step.
set -e
PROFILE=${1:-models/hw/h200.ini}
REPLAY=${2:-measurements/h200/replay-glm53-16x100k.csv}
OUT=${3:-out/replay-validate}
CONFIGS=$(awk -F, '!/^#/ && $1 != "config_id" && !seen[$1]++ {print $1}' "$REPLAY")
sh kernels/replay/simrun.sh "$PROFILE" "$OUT" $CONFIGS
TL=
for c in $CONFIGS; do
  mode=$(awk -F, -v c="$c" '$1 == c {print $3; exit}' "$REPLAY")
  TL="$TL --sim-timeline $OUT/$c.tsv:$c:$mode"
done
exec bin/dhcal validate --replay "$REPLAY" $TL --exact-misses --max-median 0.05 --max-p95 0.10
