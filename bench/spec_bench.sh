#!/bin/sh
# spec_bench.sh: does speculative decoding keep the simulator's cost scaling?
# Wall time of bin/dhsim on the headline scenario (GLM-5.3, 100K context,
# concurrency 128 on 8 x H200, glm51-longbench selections, policy adaptive)
# plain and with DFlash2 (bench/RESULTS-spec.md). Target: the DFlash2 run
# within 2x the wall time of the plain run. A speculative step decodes
# E[accepted] + 1 tokens per request (3.78 for the GLM-5.3 DFlash2 table), so
# the DFlash2 run is timed twice: at the same decoded tokens (steps / 3.78,
# what `dhsim --compare` runs) and at the same number of steps.
# Usage: sh bench/spec_bench.sh [steps] (default 200). Run from the repository root.
set -e
steps=${1:-200}
bin=./bin/dhsim
[ -x "$bin" ] || { echo "build first: make" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
tau=$(awk '/^marginal/ { sub(/.*= */, ""); n = split($0, a, /, */); s = 1; for (i = 1; i <= n; i++) s += a[i]; print s }' \
      models/drafts/glm53-dflash2.ini)
spec_steps=$(awk -v s="$steps" -v t="$tau" 'BEGIN { x = s / t; printf "%d", (x == int(x)) ? x : int(x) + 1 }')

# run NAME ARGS...: one single-threaded dhsim run; prints wall seconds, peak
# RSS, decoded tokens, tokens/s per GPU and wall microseconds per decoded token.
run() {
  name=$1; shift
  /usr/bin/time -f "%e %M" -o "$tmp/time" "$bin" "$@" --threads 1 --quiet --json "$tmp/$name.json"
  set -- $(cat "$tmp/time")
  python3 - "$tmp/$name.json" "$name" "$1" "$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))['runs'][0]
wall, rss = float(sys.argv[3]), float(sys.argv[4]) / 1024
print('%-30s steps %4d  wall %6.1f s  peak RSS %7.1f MiB  tokens %7.0f  tok/s/GPU %7.1f  wall/token %6.0f us'
      % (sys.argv[2], r['steps'], wall, rss, r['tokens'], r['tok_s_per_gpu'], 1e6 * wall / r['tokens']))
PY
  echo "$1" >"$tmp/$name.wall"
}

echo "E[tokens per step] of glm53-dflash2: $tau; same-token DFlash2 run: $spec_steps steps"
run "adaptive (plain)" --policy adaptive --steps "$steps"
run "adaptive+dflash2 same tokens" --policy adaptive+dflash2 --steps "$spec_steps"
run "adaptive+dflash2 same steps" --policy adaptive+dflash2 --steps "$steps"
run "hisparse-spec same tokens" --policy hisparse-spec --steps "$spec_steps"
plain=$(cat "$tmp/adaptive (plain).wall")
same_tok=$(cat "$tmp/adaptive+dflash2 same tokens.wall")
same_steps=$(cat "$tmp/adaptive+dflash2 same steps.wall")
awk -v p="$plain" -v a="$same_tok" -v b="$same_steps" -v t="$tau" 'BEGIN {
  printf "DFlash2 / plain wall time: %.2fx at the same tokens (target <= 2x), %.2fx at the same steps (%.2fx per decoded token)\n", a / p, b / p, b / p / t }'
