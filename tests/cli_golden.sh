#!/bin/sh
# tests/cli_golden.sh: every reference output of tests/golden/outputs.sh (make run's table and
# JSON, timelines in TSV and HDF5, a load step, speculative runs, DeepSeek-V4.1-Flash, a latency
# search, open-loop arrivals, the trace tools, the replay validation tables) is regenerated and
# compared byte for byte with the committed copy. A planted change (one digit of a copy) must be
# caught, so the comparison can fail.
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
ok() { echo "PASS $1"; }
bad() { echo "FAIL $1${2:+: $2}"; }
if ! sh tests/golden/outputs.sh "$T/now" > "$T/log" 2>&1; then bad golden_outputs_run "$(tail -2 "$T/log")"; exit 0; fi
for f in tests/golden/*; do
  case "$f" in *.sh) continue ;; esac
  n=$(basename "$f")
  if cmp -s "$f" "$T/now/$n"; then ok "golden $n"; else bad "golden $n" "$(diff "$f" "$T/now/$n" | head -4 | tr '\n' ' ')"; fi
done
for n in $(ls "$T/now"); do [ -e "tests/golden/$n" ] || bad "golden $n" "not committed"; done
# Planted: one changed digit in a copy is a difference.
cp tests/golden/run-compare.json "$T/planted.json"
sed -i '0,/"tok_s_per_gpu": [0-9]/s/"tok_s_per_gpu": \([0-9]\)/"tok_s_per_gpu": 9\1/' "$T/planted.json"
if ! cmp -s "$T/planted.json" "$T/now/run-compare.json"; then ok golden_planted_caught; else bad golden_planted_caught; fi
