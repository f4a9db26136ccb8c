#!/bin/sh
# The simulator on every configuration of a GPU replay (kernels/replay/configs.ini), compared step
# by step with bin/dhcal validate (the runs in-process; their timelines in OUTDIR/CONFIG.tsv):
#   sh kernels/replay/validate.sh [PROFILE] [REPLAY.csv] [OUTDIR]   (exit 2 if a target is missed)
# Targets: held-out configurations median <= 5 %, p95 <= 10 %; misses equal on every step.
exec bin/dhcal validate --replay "${2:-measurements/h200/replay-glm53-16x100k.csv}" --simulate "${1:-models/hw/h200.ini}" \
    --timelines "${3:-out/replay-validate}" --exact-misses --max-median 0.05 --max-p95 0.10
