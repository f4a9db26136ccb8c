#!/bin/sh
# Runs bin/dhsim on the configurations of the committed GPU replay and compares step by step:
#   sh kernels/replay/validate.sh [PROFILE] [REPLAY.csv] [OUTDIR]   (exit 2 if a target is missed)
# The simulator's settings match bin/dhreplay's run (its log prints weights_per_gpu_bytes):
# 16 requests per GPU (concurrency 128 over attention_dp 8), 100K-token prompts, 32 steps,
# no step overhead and no all-to-all (one GPU has no expert-parallel peers).
set -e
PROFILE=${1:-models/hw/h200-fitted.ini}
REPLAY=${2:-kernels/results/h200/replay-glm53-16x100k.csv}
OUT=${3:-out/replay-validate}
mkdir -p "$OUT"
COMMON="--concurrency 128 --steps 32 --set workload.requests=16 --set workload.output_len=32
 --set workload.prompt_len=100000 --set instance.moe_comm_s=0 --set instance.step_overhead_s=0
 --set instance.weights_per_gpu_bytes=105267855360 --set instance.hw=$PROFILE --quiet"
bin/dhsim $COMMON --policy hisparse --set policy.hisparse_budget_k=2 --timeline "$OUT/hs4k"
bin/dhsim $COMMON --policy hisparse --set policy.hisparse_budget_k=1 --timeline "$OUT/hs2k"
bin/dhsim $COMMON --policy hisparse --set policy.hisparse_budget_k=1.5 --timeline "$OUT/hs3k"
bin/dhsim $COMMON --policy adaptive --set policy.adaptive_max_optional_k=2 --timeline "$OUT/ad6k"
bin/dhsim $COMMON --policy hisparse --set policy.hisparse_budget_k=2 --seed 2 --timeline "$OUT/hs4k-seed2"
exec bin/dhcal validate --replay "$REPLAY" --sim-timeline "$OUT/hs4k.tsv:hs4k:plain" \
    --sim-timeline "$OUT/hs2k.tsv:hs2k:plain" --sim-timeline "$OUT/hs3k.tsv:hs3k:plain" \
    --sim-timeline "$OUT/ad6k.tsv:ad6k:plain" --sim-timeline "$OUT/hs4k-seed2.tsv:hs4k-seed2:plain" \
    --exact-misses --max-median 0.05 --max-p95 0.10
