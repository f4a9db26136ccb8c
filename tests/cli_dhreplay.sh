#!/bin/sh
# tests/cli_dhreplay.sh: bin/dhreplay's command line, and its host side against the committed
# GPU replay. No GPU needed: bad options exit 2 before any CUDA call, and --dry-run runs the
# selections and the simulator's hot buffer alone. Prints PASS/FAIL per case.
bin=./bin/dhreplay
. tests/gpu_tool.sh
gpu_tool_present || exit 0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# bad NAME WANT ARGS...: exit 2 and exactly one stderr line containing WANT.
bad attention_version "--attention-version '11'" --attention-version 11 --run a:hisparse:4096:0
bad topk_version "--topk-version '0'" --topk-version 0 --run a:hisparse:4096:0
bad indexer_version "--indexer-version '6'" --indexer-version 6 --run a:hisparse:4096:0
bad run_policy "policy 'lru'" --run a:lru:4096:0
bad run_heldout "is not ID:POLICY:BUDGET:HELDOUT" --run a:hisparse:4096:2
# The host side reproduces the GPU's miss counts of the committed replay (every step's counts
# were checked equal on the GPU): the first 6 steps of a fitted and a held-out configuration.
replay=kernels/results/h200/replay-glm53-16x100k.csv
"$bin" --dry-run --steps 6 --run hs2k:hisparse:2048:0 --run hs4k-seed2:hisparse:4096:1:2 > "$tmp/dry.csv" 2>"$tmp/err"
awk -F, 'NR > 1 {print $1 "," $3 "," $4 "," $5}' "$tmp/dry.csv" > "$tmp/got"
awk -F, '!/^#/ && $1 != "config_id" && ($1 == "hs2k" || $1 == "hs4k-seed2") && $4 < 6 {print $1 "," $4 "," $6 "," $7}' "$replay" > "$tmp/want"
if [ -s "$tmp/want" ] && [ "$(wc -l < "$tmp/want")" -eq 12 ] && cmp -s "$tmp/got" "$tmp/want"; then
  echo "PASS dry_run_matches_gpu_replay"
else
  echo "FAIL dry_run_matches_gpu_replay ($(diff "$tmp/got" "$tmp/want" | head -3 | tr '\n' ' ') $(head -c 200 "$tmp/err"))"
fi
# Verification steps: the host side (the simulator's verification and commit, sim/specrun.h)
# reproduces the committed GPU replay's fetched rows (base misses + staged union rows), and
# the simulator's own timeline of the same run step for step.
vreplay=kernels/results/h200/replay-glm53-16x100k-verify.csv
"$bin" --dry-run --steps 6 --run sp2k:hisparse+dflash2:2048:1 > "$tmp/dryv.csv" 2>"$tmp/err"
awk -F, 'NR > 1 {print $1 "," $3 "," $4 "," $5}' "$tmp/dryv.csv" > "$tmp/gotv"
awk -F, '!/^#/ && $1 == "sp2k" && $4 < 6 {print $1 "," $4 "," $6 "," $7}' "$vreplay" > "$tmp/wantv"
if [ -s "$tmp/wantv" ] && [ "$(wc -l < "$tmp/wantv")" -eq 6 ] && cmp -s "$tmp/gotv" "$tmp/wantv"; then
  echo "PASS dry_run_verify_matches_gpu_replay"
else
  echo "FAIL dry_run_verify_matches_gpu_replay ($(diff "$tmp/gotv" "$tmp/wantv" | head -3 | tr '\n' ' ') $(head -c 200 "$tmp/err"))"
fi
if sh kernels/replay/simrun.sh models/hw/h200.ini "$tmp/sim" sp2k >/dev/null 2>&1; then
  awk -F'\t' 'NR > 2 && $1 < 6 {print "sp2k," $1 "," $9}' "$tmp/sim/sp2k.tsv" > "$tmp/simv"
  awk -F, '{print $1 "," $2 "," $3}' "$tmp/gotv" > "$tmp/gotv3"
  if [ "$(wc -l < "$tmp/simv")" -eq 6 ] && cmp -s "$tmp/simv" "$tmp/gotv3"; then echo "PASS dry_run_verify_matches_simulator"
  else echo "FAIL dry_run_verify_matches_simulator ($(diff "$tmp/simv" "$tmp/gotv3" | head -3 | tr '\n' ' '))"; fi
else
  echo "FAIL dry_run_verify_matches_simulator (simrun.sh failed)"
fi
bad draft_policy "policy 'adaptive+dflash2'" --run a:adaptive+dflash2:4096:0
"$bin" --dry-run --steps 6 --run hs2k:hisparse:2048:0 --run hs4k-seed2:hisparse:4096:1:2 > "$tmp/dry2.csv" 2>/dev/null
if cmp -s "$tmp/dry.csv" "$tmp/dry2.csv"; then echo "PASS dry_run_deterministic"; else echo "FAIL dry_run_deterministic"; fi
