#!/bin/sh
# Runs bin/dhsim on configurations of the committed GPU replay, one per-step timeline each
# (OUTDIR/CONFIG.tsv):
#   sh kernels/replay/simrun.sh PROFILE OUTDIR CONFIG... [-- DHSIM_OPTION...]
# The simulator's settings match bin/dhreplay's run (its log prints weights_per_gpu_bytes):
# 16 requests per GPU (concurrency 128 over attention_dp 8), 100K-token prompts, 32 steps
# (sa6k-r64, hs4k-r64: 64 requests, 25K tokens, 12 steps),
# no step overhead and no all-to-all (one GPU has no expert-parallel peers); verification runs
# (sp*: hisparse+dflash2, sa*: adaptive+dflash2) with streams of 32 x (gamma + 1) + 1 = 257 positions, as bin/dhreplay
# gives them (its draft is models/drafts/glm53-dflash2.ini, gamma 7). Options after
# "--" go to every dhsim run (e.g. --set hw.layer_fixed_s=7.3e-05).
set -e
[ $# -ge 3 ] || { echo "usage: simrun.sh PROFILE OUTDIR CONFIG... [-- DHSIM_OPTION...]" >&2; exit 1; }
PROFILE=$1; OUT=$2; shift 2
CONFIGS=
while [ $# -gt 0 ] && [ "$1" != "--" ]; do CONFIGS="$CONFIGS $1"; shift; done
[ "$1" = "--" ] && shift
mkdir -p "$OUT"
for c in $CONFIGS; do
  # ID:POLICY:BUDGET:HELDOUT[:SEED] of bin/dhreplay --run, as the simulator's policy settings;
  # the shape is 16 requests x 100K, 32 steps, unless the configuration says otherwise.
  out_len=32 req=16 prompt=100000 steps=32 weights=105267855360
  case $c in
    sp4k) p="--policy hisparse+dflash2 --set policy.hisparse_budget_k=2"; out_len=257 ;;
    sp2k) p="--policy hisparse+dflash2 --set policy.hisparse_budget_k=1"; out_len=257 ;;
    sa6k) p="--policy adaptive+dflash2 --set policy.adaptive_max_optional_k=2"; out_len=257 ;;
    hs4k) p="--policy hisparse --set policy.hisparse_budget_k=2" ;;
    hs2k) p="--policy hisparse --set policy.hisparse_budget_k=1" ;;
    hs3k) p="--policy hisparse --set policy.hisparse_budget_k=1.5" ;;
    ad6k) p="--policy adaptive --set policy.adaptive_max_optional_k=2" ;;
    hs4k-seed2) p="--policy hisparse --set policy.hisparse_budget_k=2 --seed 2" ;;
    # 64 requests x 25K, 12 steps of 8 queries (512 tokens a step): bin/dhreplay --requests 64
    # --prompt-len 25000 --steps 12 (streams of 12 x 8 + 1 positions; the same weights_per_gpu_bytes).
    sa6k-r64) p="--policy adaptive+dflash2 --set policy.adaptive_max_optional_k=2"; out_len=97 req=64 prompt=25000
              steps=12 ;;
    hs4k-r64) p="--policy hisparse --set policy.hisparse_budget_k=2"; out_len=12 req=64 prompt=25000 steps=12 ;;
    *) echo "simrun.sh: unknown replay configuration '$c'" >&2; exit 1 ;;
  esac
  bin/dhsim --concurrency $((req * 8)) --steps $steps --set workload.requests=$req --set workload.output_len=$out_len \
    --set workload.prompt_len=$prompt --set instance.moe_comm_s=0 --set instance.moe_comm_gbps=0 --set instance.step_overhead_s=0 \
    --set instance.weights_per_gpu_bytes=$weights --set instance.hw="$PROFILE" --quiet \
    $p "$@" --timeline "$OUT/$c"
done
