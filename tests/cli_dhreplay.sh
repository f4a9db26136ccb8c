#!/bin/sh
# tests/cli_dhreplay.sh: bin/dhreplay's command line, and its host side against the committed
# GPU replay. No GPU needed: bad options exit 2 before any CUDA call, and --dry-run runs the
# selections and the simulator's hot buffer alone. Prints PASS/FAIL per case.
bin=./bin/dhreplay
. tests/gpu_tool.sh
gpu_tool_present || exit 0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# cfgfile NAME POLICY HELDOUT: a configurations file in kernels/replay/configs.ini's format
# ($tmp/NAME.ini, its [replay] section) holding one configuration, 'a'.
cfgfile() {
  { sed -n '/^\[replay\]/,/^$/p' kernels/replay/configs.ini
    printf '[a]\npolicy = %s\nbudget = 4096\nheldout = %s\nseed = 1\nrequests = 16\nprompt_len = 100000\n' "$2" "$3"
    printf 'steps = 32\noutput_len = 257\nsim = policy.hisparse_budget_k=2\n'; } > "$tmp/$1.ini"
}
cfgfile lru lru 0; cfgfile held2 hisparse 2; cfgfile dspark adaptive+dspark 0
# bad NAME WANT ARGS...: exit 2 and exactly one stderr line containing WANT.
# one past the last attention version (kernels/bench.cuh), so that a new version does not break it
past=$(( $(sed -n 's/.*ATTN_MAX_VERSION = \([0-9]*\).*/\1/p' kernels/bench.cuh) + 1 ))
bad attention_version "--attention-version '$past'" --attention-version $past --run hs4k
bad topk_version "--topk-version '0'" --topk-version 0 --run hs4k
bad indexer_version "--indexer-version '6'" --indexer-version 6 --run hs4k
bad as_arch "--as-arch: 'sm_70' is not an architecture" --as-arch sm_70 --run hs4k
bad run_policy "policy 'lru'" --configs "$tmp/lru.ini" --run a
bad run_heldout "heldout = 2 is outside" --configs "$tmp/held2.ini" --run a
bad run_unknown "no replay configuration 'nosuch'" --run nosuch
bad run_batches "configurations of different batches" --run hs4k --run hs4k-r64
# The host side reproduces the GPU's miss counts of the committed replay (every step's counts
# were checked equal on the GPU): the first 6 steps of a fitted and a held-out configuration.
# dry_matches NAME REPLAY CONFIGS RUN...: the dry run's first 6 steps of RUN... (config, step,
# misses, selected) equal REPLAY's lines of CONFIGS (a space-separated list); $tmp/NAME holds them.
dry_matches() {
  name=$1 file=$2 configs=$3; shift 3
  "$bin" --dry-run --steps 6 "$@" > "$tmp/$name.csv" 2>"$tmp/err"
  awk -F, 'NR > 1 {print $1 "," $3 "," $4 "," $5}' "$tmp/$name.csv" > "$tmp/$name"
  awk -F, -v cs=" $configs " '!/^#/ && $1 != "config_id" && index(cs, " " $1 " ") && $4 < 6 {print $1 "," $4 "," $6 "," $7}' \
    "$file" > "$tmp/$name.want"
  n=$(echo $configs | wc -w)
  if [ -s "$tmp/$name.want" ] && [ "$(wc -l < "$tmp/$name.want")" -eq $((6 * n)) ] && cmp -s "$tmp/$name" "$tmp/$name.want"; then
    echo "PASS $name"
  else
    echo "FAIL $name ($(diff "$tmp/$name" "$tmp/$name.want" | head -3 | tr '\n' ' ') $(head -c 200 "$tmp/err"))"
  fi
}
dry_matches dry_run_matches_gpu_replay measurements/h200/replay-glm53-16x100k.csv "hs2k hs4k-seed2" \
  --run hs2k --run hs4k-seed2
# Verification steps: the host side (the simulator's verification and commit, sim/specrun.h)
# reproduces the committed GPU replay's fetched rows (base misses + staged union rows), and
# the simulator's own timeline of the same run step for step.
dry_matches dry_run_verify_matches_gpu_replay measurements/h200/replay-glm53-16x100k-verify.csv sp2k --run sp2k
dry_matches dry_run_verify_adaptive_matches_gpu_replay measurements/h200/replay-glm53-16x100k-verify-adaptive.csv sa6k \
  --run sa6k
# 64 requests x 25K: the batch comes from the configuration (kernels/replay/configs.ini).
dry_matches dry_run_verify_r64_matches_gpu_replay measurements/h200/replay-glm53-64x25k-verify.csv sa6k-r64 --run sa6k-r64
dry_matches dry_run_r64_matches_gpu_replay measurements/h200/replay-glm53-64x25k.csv hs4k-r64 --run hs4k-r64
if bin/dhcal simulate --profile models/hw/h200.ini --out "$tmp/sim" sp2k >/dev/null 2>&1; then
  awk -F'\t' 'NR > 1 && $3 < 6 {print "sp2k," $3 "," $11}' "$tmp/sim/sp2k.tsv" > "$tmp/simv"
  awk -F, '{print $1 "," $2 "," $3}' "$tmp/dry_run_verify_matches_gpu_replay" > "$tmp/gotv3"
  if [ "$(wc -l < "$tmp/simv")" -eq 6 ] && cmp -s "$tmp/simv" "$tmp/gotv3"; then echo "PASS dry_run_verify_matches_simulator"
  else echo "FAIL dry_run_verify_matches_simulator ($(diff "$tmp/simv" "$tmp/gotv3" | head -3 | tr '\n' ' '))"; fi
else
  echo "FAIL dry_run_verify_matches_simulator (dhcal simulate failed)"
fi
bad draft_policy "policy 'adaptive+dspark'" --configs "$tmp/dspark.ini" --run a
bad skip_part "'gemm' is not indexer, attention, dense, experts or fetch" --skip attention,gemm --run hs4k
bad fetch_priority "--fetch-priority 'highest' is not default or high" --fetch-priority highest --run hs4k
bad out_unwritable "--out: cannot write '$tmp/no/such/dir/a.csv'" --out "$tmp/no/such/dir/a.csv" --run hs4k
bad timeline_unwritable "--timeline: cannot write '$tmp/no/such/dir/tl.csv'" --timeline "$tmp/no/such/dir/tl.csv" --run hs4k
"$bin" --dry-run --steps 6 --run hs2k --run hs4k-seed2 > "$tmp/dry2.csv" 2>/dev/null
if cmp -s "$tmp/dry_run_matches_gpu_replay.csv" "$tmp/dry2.csv"; then echo "PASS dry_run_deterministic"; else echo "FAIL dry_run_deterministic"; fi
# --fetch-times is a flag (no value): the dry run, which times nothing, is the same with it.
"$bin" --dry-run --fetch-times --steps 6 --run hs2k --run hs4k-seed2 > "$tmp/dry3.csv" 2>/dev/null
if cmp -s "$tmp/dry_run_matches_gpu_replay.csv" "$tmp/dry3.csv"; then echo "PASS dry_run_fetch_times_flag"; else echo "FAIL dry_run_fetch_times_flag"; fi
