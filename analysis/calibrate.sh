#!/bin/sh
# The H200 calibration, one command (about 25 s): fits the simulator's cost model to the
# recorded kernel benchmarks and the GPU replay and writes the complete hardware profile.
#   sh analysis/calibrate.sh [OUT.ini] [BENCH_DIR] [REPLAY.csv] [BASE.ini]
# defaults: models/hw/h200.ini measurements/h200 measurements/h200/replay-glm53-16x100k.csv
#           models/hw/h200-datasheet.ini
# Deterministic: the same inputs give the same bytes (tests/cli_replay.sh checks that the
# committed models/hw/h200.ini is this script's output).
#
# 1. bin/dhcal fit: every coefficient the step model uses, from the kernel versions the
#    simulator models, which are the versions bin/dhreplay runs:
#      attention v8, FP8 rows of 656 B, selected rows only ("hits"), timed 20 launches back to
#        back (attention-attention-b2b20.csv: in a decode step it launches behind the layer's
#        GEMMs, not on an idle GPU); the BF16 lines are held out (errors reported, not fitted);
#      fetch v5 (zero-copy gather, the serving layout), 2-16 SMs, 584-1152 B rows, timed 20
#        launches back to back (fetch-calib-b2b20.csv: a step issues a group's layer fetches one
#        after another on the fetch stream); 132 SMs held out; the density term (rows per 2 MB
#        region) from its locality lines, the 25K-row windows held out (the same rows per
#        window, four times as dense: a check that density is the input);
#      the fetch beside a saturated memory system (fetch-beside-b2b20.csv: each "+beside_hbm" line
#        against its partner timed alone, the beside form); those partners are held out of the
#        fetch fit itself (a check on another machine instance's run);
#      cuBLASLt GEMMs per dtype at the decode batch m = 16; m = 128 held out; FP8 is the
#        deployment's dtype (weight_bw, layer_fixed_s, mma_efficiency), BF16 is reported;
#      indexer v5 (scoring rate and the keys' rate: default-indexer.csv, 4-16 requests x 25K-200K
#        tokens, and indexer-scale.csv, 64-128 requests x 250K-500K, DeepSeek-V4.1-Flash's shape;
#        timed isolated); top-k v6 over the scores per request, the top-ks per launch
#        (waves of 132 blocks) and k (topk-scale-b2b20.csv: select_s's top-k part and the
#        topk_* waves), its lines on the indexer's own scores (16 requests x 1-8 queries,
#        indexer-topk6-b2b20.csv) held out.
#    layer_fixed_s starts as 8 GEMM launches per layer (q_a, q_b, kv_a, o_proj, shared
#    expert x 2, routed experts x 2 strided-batched, as bin/dhreplay runs them) x the GEMM's
#    fixed cost.
# 1b. fetch_interference (sim/hw.h): a compute task beside the miss fetch lengthens by this x the
#    overlap. From the replay's diagnostics (kernels/replay/README.md), per fitted configuration:
#    (its step - the step without the fetch) / the fetch alone, steps 4-11, then the mean.
#    compute_interference: the fetch work beside compute lengthens by this x the fetch's
#    beside_slowdown at its density x the overlap (sim/hw.h; beside_slowdown is fitted by dhcal on
#    fetch-beside-b2b20.csv: the fetch beside a kernel that saturates the memory system). Solved
#    (secant) so that the simulator's fetch time per step, summed over the fitted configurations,
#    equals the fetch kernels' time measured in those steps (dhreplay --fetch-times, steps 4-11);
#    solved again after the refit of layer_fixed_s below, which is then refitted once more.
# 2. bin/dhcal refit: layer_fixed_s refitted on whole decode steps of the replay's FITTED
#    configurations (heldout = 0 in the replay CSV; the held-out ones are never run here):
#    back-to-back launches in a step overlap their fixed costs, which the isolated GEMM
#    benchmark cannot see. dhsim runs at two values, the least-squares solution, a run at it,
#    until the solution repeats at 4 significant digits (analysis/refit.h).
set -e
OUTP=${1:-models/hw/h200.ini}
BENCH=${2:-measurements/h200}
REPLAY=${3:-measurements/h200/replay-glm53-16x100k.csv}
BASE=${4:-models/hw/h200-datasheet.ini}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
# The profile is named after its file (dhcal fit), so the first stage writes under the
# output's own name.
STAGE1="$T/$(basename "$OUTP")"

bin/dhcal fit --bench "$BENCH/attention-attention-b2b20.csv" "$BENCH/fetch-calib-b2b20.csv" \
    "$BENCH/fetch-beside-b2b20.csv" "$BENCH/default-gemm.csv" "$BENCH/default-indexer.csv" \
    "$BENCH/topk-scale-b2b20.csv" "$BENCH/indexer-topk6-b2b20.csv" "$BENCH/indexer-scale.csv" \
    --select kernel=attention,version=8,pattern=hits,timing=b2b20 --select kernel=fetch,version=5,timing=b2b20 \
    --select kernel=gemm --select kernel=indexer,version=5,timing=isolated --select 'kernel=topk,version=6,timing=b2b20' \
    --holdout kernel=attention,dtype=bf16 --holdout 'kernel=fetch,sms>=66' --holdout 'kernel=fetch,ctx<=25000' \
    --holdout 'kernel=topk,pattern=indexer' \
    --holdout 'kernel=fetch,suite=fetch-beside-b2b20' --holdout 'kernel=gemm,m>=128' \
    --weight-dtype fp8 --layer-gemms 8 --base "$BASE" -o "$STAGE1" \
    --command "sh analysis/calibrate.sh (bin/dhcal fit on $BENCH/attention-attention-b2b20.csv, $BENCH/fetch-calib-b2b20.csv, $BENCH/fetch-beside-b2b20.csv, $BENCH/default-{gemm,indexer}.csv, $BENCH/topk-scale-b2b20.csv, $BENCH/indexer-topk6-b2b20.csv and $BENCH/indexer-scale.csv, then bin/dhcal refit of layer_fixed_s on $REPLAY)" \
    > "$T/fit.txt" 2> "$T/fit.err" || { cat "$T/fit.err" >&2; exit 1; }
grep -v '^dhcal: [0-9]* lines match no --select\|^dhcal: warning: pool\|^dhcal: fitted but not used' "$T/fit.err" >&2 || true

FITTED=$(awk -F, '!/^#/ && $1 != "config_id" && $8 == 0 && !seen[$1]++ {print $1}' "$REPLAY")
[ -n "$FITTED" ] || { echo "calibrate.sh: $REPLAY has no fitted configuration (heldout = 0)" >&2; exit 1; }

BESIDE="$BENCH/replay-glm53-16x100k-fetch-beside.csv"
FONLY="$BENCH/replay-glm53-16x100k-fetch-only.csv"
BUSY="$BENCH/replay-glm53-16x100k-fetch-busy.csv"
for f in "$BESIDE" "$FONLY" "$BUSY"; do
  [ -r "$f" ] || { echo "calibrate.sh: $f: cannot read the replay diagnostic (kernels/replay/README.md)" >&2; exit 1; }
done
INTERF=$(awk -F, -v fitted=" $(echo $FITTED) " '
  /^#/ || $1 == "config_id" || $4 < 4 || $4 > 11 || !index(fitted, " " $1 " ") {next}
  FILENAME == ARGV[1] && $3 == "plain" {full[$1] += $5; nf[$1]++}
  FILENAME == ARGV[2] && $3 == "plain-skip-fetch" {nof[$1] += $5; nn[$1]++}
  FILENAME == ARGV[3] && $3 == "plain-fetch-only" {fo[$1] += $5; no[$1]++}
  END {
    for (c in full) if (nn[c] && no[c]) {
      a = (full[c] / nf[c] - nof[c] / nn[c]) / (fo[c] / no[c]); sum += a; n++
      per = per sprintf("%s%s %.3g", per == "" ? "" : ", ", c, a)
    }
    if (n) printf "%.4g %s\n", sum / n, per
  }' "$REPLAY" "$BESIDE" "$FONLY")
[ -n "$INTERF" ] || { echo "calibrate.sh: no fitted configuration in both $BESIDE and $FONLY" >&2; exit 1; }
ALPHA=${INTERF%% *}
# The measured fetch kernels' time per step (ms, steps 4-11), each fitted configuration's mean,
# summed; and the ratio to the fetch alone per configuration (reported).
CINTERF=$(awk -F, -v fitted=" $(echo $FITTED) " '
  /^#/ || $1 == "config_id" || $4 < 4 || $4 > 11 || !index(fitted, " " $1 " ") {next}
  $3 == "plain-fetch-busy" {b[$1] += $5; nb[$1]++}
  $3 == "plain-fetch-only-fetch-busy" {o[$1] += $5; no[$1]++}
  END {
    for (c in b) if (no[c]) {
      sum += b[c] / nb[c] / 1000; n++
      per = per sprintf("%s%s %.3g", per == "" ? "" : ", ", c, (b[c] / nb[c]) / (o[c] / no[c]))
    }
    if (n) printf "%.6g %s\n", sum, per
  }' "$BUSY")
[ -n "$CINTERF" ] || { echo "calibrate.sh: no fitted configuration in $BUSY" >&2; exit 1; }
FMEAS=${CINTERF%% *}
grep -q '^beside_slowdown' "$STAGE1" ||
  { echo "calibrate.sh: the fit wrote no [gather] beside_slowdown (fetch-beside-b2b20.csv)" >&2; exit 1; }
# The simulator's fetch time per step (ms, steps 4-11) at compute_interference $1, summed over the
# fitted configurations as above; layer_fixed_s $2.
simfetch() {
  sh kernels/replay/simrun.sh "$STAGE1" "$T/u$1-$2" $FITTED -- --set hw.fetch_interference="$ALPHA" \
      --set hw.compute_interference="$1" --set hw.layer_fixed_s="$2" > /dev/null
  for c in $FITTED; do
    awk -F'\t' '$1 == "step" {for (i = 1; i <= NF; i++) if ($i == "pcie_h2d_util") u = i; next}
      $1 ~ /^[0-9]+$/ && $1 >= 4 && $1 <= 11 {s += $u * ($3 - $2); n++} END {printf "%.9g\n", s / n * 1e3}' "$T/u$1-$2/$c.tsv"
  done | awk '{s += $1} END {printf "%.9g", s}'
}
# compute_interference at layer_fixed_s $1: the secant from 0 and 1 until the value repeats at
# 4 significant digits.
solve_u() {
  u0=0; f0=$(simfetch 0 "$1"); u1=1; f1=$(simfetch 1 "$1"); j=0
  while :; do
    j=$((j + 1))
    [ $j -le 8 ] || { echo "calibrate.sh: compute_interference did not converge in 8 steps" >&2; exit 1; }
    u2=$(awk -v a="$u0" -v fa="$f0" -v b="$u1" -v fb="$f1" -v m="$FMEAS" 'BEGIN {
      if (fb == fa) exit 1; x = b - (fb - m) * (b - a) / (fb - fa); if (x < 0) x = 0; printf "%.4g", x}') ||
      { echo "calibrate.sh: the simulator's fetch does not change with compute_interference" >&2; exit 1; }
    [ "$u2" = "$u1" ] && break
    u0=$u1; f0=$f1; u1=$u2; f1=$(simfetch "$u1" "$1")
  done
  echo "$u1"
}
run() { sh kernels/replay/simrun.sh "$STAGE1" "$T/at$1" $FITTED -- --set hw.layer_fixed_s="$1" \
          --set hw.fetch_interference="$ALPHA" --set hw.compute_interference="$BETA"; }
# layer_fixed_s from $1: two runs, the least-squares solution, a run at it, until the solution
# repeats at 4 significant digits (analysis/refit.h); leaves the last two in A and B.
refit_layer() {
  A=$1
  B=$(awk -v a="$A" 'BEGIN {printf "%.4g", a / 2}')
  run "$A"
  run "$B"
  i=0
  while :; do
    i=$((i + 1))
    [ $i -le 8 ] || { echo "calibrate.sh: the refit of layer_fixed_s did not converge in 8 runs" >&2; exit 1; }
    X=$(bin/dhcal refit --replay "$REPLAY" --key hw.layer_fixed_s --at "$A" "$T/at$A" --at "$B" "$T/at$B" | sed -n 's/^value \([^ ]*\).*/\1/p')
    [ -n "$X" ] || exit 1
    if [ "$X" = "$B" ]; then break; fi
    A=$B; B=$X
    run "$B"
  done
}
L0=$(sed -n 's/^layer_fixed_s = //p' "$STAGE1")
BETA1=$(solve_u "$L0")
BETA=$BETA1
refit_layer "$L0"
BETA=$(solve_u "$B")
rm -rf "$T"/at*
refit_layer "$B"
awk -v a="$ALPHA" -v per="${INTERF#* }" -v b="$(basename "$BESIDE")" -v f="$(basename "$FONLY")" \
    -v c="$BETA" -v cper="${CINTERF#* }" -v u="$(basename "$BUSY")" -v m="$FMEAS" -v c1="$BETA1" '
  /^\[/ && hw && !done {
    print "; dhcal: fetch_interference = mean over the fitted configurations of (step - step without the fetch) / the fetch"
    print "; dhcal:  alone, steps 4-11 (" per "; the replay, " b ", " f ")"
    print "fetch_interference = " a
    print "; dhcal: compute_interference = the value at which the simulator gives the fitted configurations the fetch kernels"
    print "; dhcal:  time measured in their steps, " m " ms per step summed over them (steps 4-11; dhreplay --fetch-times, " u ";"
    print "; dhcal:  in the step / alone: " cper "); with [gather] beside_slowdown the share of a saturated memory system"
    print "; dhcal:  that a step'"'"'s compute amounts to (" c1 " before the refit of layer_fixed_s)"
    print "compute_interference = " c; done = 1
  }
  /^\[hw\]/ {hw = 1}
  {print}' "$STAGE1" > "$T/stage1b.ini" && mv "$T/stage1b.ini" "$STAGE1"
{ echo "fetch_interference $ALPHA (${INTERF#* })"; echo "compute_interference $BETA ($BETA1 before the refit of layer_fixed_s; measured fetch $FMEAS ms per step; in the step / alone: ${CINTERF#* })"; } > "$T/interf.txt"
bin/dhcal refit --replay "$REPLAY" --key hw.layer_fixed_s --at "$A" "$T/at$A" --at "$B" "$T/at$B" \
    --profile "$STAGE1" -o "$T/out.ini" > "$T/refit.txt"
cat "$T/fit.txt" "$T/interf.txt" "$T/refit.txt"
mv "$T/out.ini" "$OUTP"
