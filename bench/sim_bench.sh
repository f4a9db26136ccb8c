#!/bin/sh
# sim_bench.sh: wall time, CPU time, selected rows classified per second and
# peak memory of bin/dhsim on the scenarios the simulator is held to
# (bench/RESULTS-sim.md):
#   1. the make-run scenario (GLM-5.3, 100K context, concurrency 128 on
#      8 x H200, glm51-longbench selections) at 1,000 decode steps, the four
#      policies (target: under 20 s on a 2-core machine), then the whole
#      --compare (the four plus Adaptive with speculative decoding);
#   2. DeepSeek-V4.1-Flash at 500K context and concurrency 512 (must fit in
#      24 GiB of host memory).
# CPU time (user + system, both threads) is printed beside the wall time
# because the wall time depends on what else the machine is running.
# Usage: [DHSIM=BINARY] [ONLY=NAME-PREFIX] [MAX_RSS_MB=N] sh bench/sim_bench.sh [steps]
# (default 1000). Run from the repository root. ONLY runs the scenarios whose
# name starts with it; MAX_RSS_MB stops a run whose resident memory passes N MiB
# (polled every second) and reports where it stopped instead of its figures, so a
# build that needs more memory than the machine has can be measured safely.
set -e
steps=${1:-1000}
bin=${DHSIM:-./bin/dhsim}   # DHSIM=path/to/another/dhsim compares two builds
[ -x "$bin" ] || { echo "build first: make" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# run NAME ARGS...: time one dhsim invocation and report wall time, rows
# classified per second of wall time (every row of every selection of every
# layer counts) and peak resident memory.
run() {
  name=$1; shift
  case "$name" in "${ONLY:-}"*) ;; *) return 0 ;; esac
  /usr/bin/time -f "%e %M %U %S" -o "$tmp/time" "$bin" "$@" --quiet --wall --json "$tmp/$name.json" &
  tpid=$!
  if [ -n "${MAX_RSS_MB:-}" ]; then
    # The dhsim under time: its resident memory, every second, against the cap.
    t0=$(date +%s); peak=0
    while kill -0 "$tpid" 2>/dev/null; do
      sleep 1
      spid=$(ps -o pid= --ppid "$tpid" | head -1 | tr -d ' ')
      [ -n "$spid" ] || continue
      rss=$(ps -o rss= -p "$spid" | tr -d ' ')
      [ -n "$rss" ] || continue
      [ "$rss" -gt "$peak" ] && peak=$rss
      if [ "$rss" -gt $((MAX_RSS_MB * 1024)) ]; then
        kill "$spid"
        wait "$tpid" || true
        printf '%-32s STOPPED at %7.1f MiB resident after %d s (MAX_RSS_MB=%s)\n' "$name" \
          "$(python3 -c "print($peak / 1024)")" $(( $(date +%s) - t0 )) "$MAX_RSS_MB"
        return 0
      fi
    done
  fi
  wait "$tpid"
  set -- $(cat "$tmp/time")
  wall=$1; rss_kb=$2; cpu=$(python3 -c "print($3 + $4)")
  rows=$(python3 -c "import json,sys; d=json.load(open('$tmp/$name.json')); print(sum(r['selected_rows'] for r in d['runs']))")
  printf '%-32s wall %6.1f s  cpu %6.1f s  rows classified %6.1f M/s  peak RSS %7.1f MiB\n' "$name" "$wall" "$cpu" \
    "$(python3 -c "print($rows / $wall / 1e6)")" "$(python3 -c "print($rss_kb / 1024)")"
  python3 - "$tmp/$name.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))['runs']:
    print('    %-9s tok/s/GPU %8.1f  fetch %.4f  own wall %6.1f s  %6.1f M rows/s' %
          (r['policy'], r['tok_s_per_gpu'], r['fetch_fraction'], r['wall_s'], r['rows_per_wall_s'] / 1e6))
PY
}

run "glm53-100k-c128-${steps}steps" --policy resident,hisparse,adaptive,oracle --steps "$steps"
run "glm53-100k-c128-${steps}steps-compare" --compare --steps "$steps"
run "dsv41flash-500k-c512" --compare --steps 200 --config models/instances/dsv41flash-h200x4.ini
