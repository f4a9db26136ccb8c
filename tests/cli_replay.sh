#!/bin/sh
# GPU replay validation on the committed H200 replay data (no GPU needed): the simulator
# must reproduce every step's misses exactly and meet the latency targets on the held-out
# configurations with the fitted profile; a planted miss difference and the unfitted
# profile must both be caught (exit 2).
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
R=kernels/results/h200/replay-glm53-16x100k.csv
ok() { echo "PASS $1"; }
bad() { echo "FAIL $1"; }
if sh kernels/replay/validate.sh models/hw/h200-fitted.ini $R "$T/a" > "$T/a.txt" 2>&1 &&
   grep -q "ALL held-out configurations" "$T/a.txt"; then ok replay_validate_fitted; else bad replay_validate_fitted; cat "$T/a.txt"; fi
# Planted fault: one step's miss count off by one row.
awk -F, 'BEGIN{OFS=","} $1=="hs3k" && $4=="5" {$6=$6+1} {print}' $R > "$T/planted.csv"
sh kernels/replay/validate.sh models/hw/h200-fitted.ini "$T/planted.csv" "$T/b" > "$T/b.txt" 2>&1
rc=$?
if [ $rc -eq 2 ] && grep -q "hs3k" "$T/b.txt"; then ok replay_planted_miss_caught; else bad replay_planted_miss_caught; fi
# The seed profile (no kernel-fitted keys) misses the latency targets: the check can fail.
sh kernels/replay/validate.sh models/hw/h200.ini $R "$T/c" > "$T/c.txt" 2>&1
rc=$?
if [ $rc -eq 2 ] && grep -q "target missed" "$T/c.txt"; then ok replay_unfitted_profile_fails; else bad replay_unfitted_profile_fails; fi
if bin/dhcal check-profile models/hw/h200-fitted.ini > /dev/null 2>&1; then ok replay_fitted_profile_checks; else bad replay_fitted_profile_checks; fi
