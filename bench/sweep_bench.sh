#!/bin/sh
# sweep_bench.sh: bin/dhsweep on the issue's benchmark (bench/RESULTS-sweep.md).
#   overhead  one point (budget 2k, concurrency 128, seed 1, four policies,
#             200 steps) as a bare `dhsim --threads 1` and as a one-point sweep
#             on one worker: CPU and wall time of each, best of three, and the
#             sweep's overhead per point (target <= 5 %);
#   subset    32 units of sweeps/bench-1000.ini (budgets 1,4,7,10 x
#             concurrencies 32,128,224,320 x seeds 1,2) on 1 worker, on 2
#             workers and on 2 MPI ranks of 1 worker: wall time, units per
#             second and the speedups, measured in one run;
#   full      sweeps/bench-1000.ini (1,000 units) on 2 workers, once.
# CPU time (user + system) is printed beside wall time because on a shared
# machine the wall time depends on what else runs. Usage:
#   sh bench/sweep_bench.sh [overhead] [subset] [full]   (default: all three)
# Run from the repository root; outputs go to a temporary folder.
set -e
sweep=./bin/dhsweep
sim=./bin/dhsim
[ -x "$sweep" ] && [ -x "$sim" ] || { echo "build first: make" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
what=${*:-overhead subset full}
date -u "+sweep_bench: %Y-%m-%d %H:%M UTC, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"

# timed NAME CMD...: run CMD, print and keep "wall cpu" in $tmp/NAME.t.
timed() {
  name=$1; shift
  /usr/bin/time -f "%e %U %S" -o "$tmp/time" "$@" >"$tmp/$name.out" 2>&1 || { cat "$tmp/$name.out" >&2; exit 1; }
  set -- $(tail -1 "$tmp/time")
  echo "$1 $(awk -v u="$2" -v s="$3" 'BEGIN { print u + s }')" >"$tmp/$name.t"
}
wall() { cut -d' ' -f1 "$tmp/$1.t"; }
cpu() { cut -d' ' -f2 "$tmp/$1.t"; }

# subsweep NAME OUTPUT [AXES...]: sweeps/bench-1000.ini with its output and axes replaced.
subsweep() {
  sed -e "s|^output = .*|output = $2|" sweeps/bench-1000.ini >"$tmp/$1.ini"
}

for w in $what; do case $w in
overhead)
  pol=resident,hisparse,adaptive,oracle
  best_sim=""; best_sw=""
  cat >"$tmp/one.ini" <<EOF2
[sweep]
policies = $pol
seeds = 1
steps = 200
output = $tmp/one
[base]
policy.hisparse_budget_k = 2
workload.concurrency = 128
EOF2
  for i in 1 2 3; do
    timed sim$i "$sim" --policy $pol --steps 200 --concurrency 128 --set policy.hisparse_budget_k=2 --seed 1 \
      --threads 1 --quiet --json "$tmp/bare.json"
    rm -rf "$tmp/one"
    timed sw$i "$sweep" run "$tmp/one.ini" --workers 1 --quiet
    best_sim=$(awk -v a="$best_sim" -v b="$(cpu sim$i)" 'BEGIN { print (a == "" || b < a) ? b : a }')
    best_sw=$(awk -v a="$best_sw" -v b="$(cpu sw$i)" 'BEGIN { print (a == "" || b < a) ? b : a }')
    printf '  try %d: dhsim wall %6.2f s cpu %6.2f s   dhsweep (1 point) wall %6.2f s cpu %6.2f s\n' $i \
      "$(wall sim$i)" "$(cpu sim$i)" "$(wall sw$i)" "$(cpu sw$i)"
  done
  printf 'overhead: one point, four policies, 200 steps: dhsim %.2f CPU s, dhsweep %.2f CPU s: %+.1f %% per point\n' \
    "$best_sim" "$best_sw" "$(awk -v a="$best_sim" -v b="$best_sw" 'BEGIN { print 100 * (b - a) / a }')"
  ;;
subset)
  for k in w1 w2 mpi2; do
    subsweep $k "$tmp/$k"
    sed -i -e 's|^seeds = .*|seeds = 1,2|' -e 's|^policy.hisparse_budget_k = .*|policy.hisparse_budget_k = 1,4,7,10|' \
      -e 's|^workload.concurrency = .*|workload.concurrency = 32:320:96|' "$tmp/$k.ini"
  done
  timed w1 "$sweep" run "$tmp/w1.ini" --workers 1 --quiet
  timed w2 "$sweep" run "$tmp/w2.ini" --workers 2 --quiet
  timed mpi2 mpirun -n 2 --allow-run-as-root --oversubscribe "$sweep" run "$tmp/mpi2.ini" --workers 1 --quiet
  cmp -s "$tmp/w1/results.csv" "$tmp/w2/results.csv" && cmp -s "$tmp/w1/results.csv" "$tmp/mpi2/results.csv" ||
    { echo "sweep_bench: the three runs' tables differ" >&2; exit 1; }
  n=$(ls "$tmp"/w1/points/*.json | wc -l)
  for k in w1 w2 mpi2; do
    printf 'subset (%d units x 4 policies): %-5s wall %7.1f s  cpu %7.1f s  %.3f units/s\n' "$n" $k "$(wall $k)" "$(cpu $k)" \
      "$(awk -v n="$n" -v t="$(wall $k)" 'BEGIN { print n / t }')"
  done
  printf 'speedup 1 -> 2 workers: %.2fx; 1 worker -> 2 MPI ranks: %.2fx (tables identical)\n' \
    "$(awk -v a="$(wall w1)" -v b="$(wall w2)" 'BEGIN { print a / b }')" \
    "$(awk -v a="$(wall w1)" -v b="$(wall mpi2)" 'BEGIN { print a / b }')"
  ;;
full)
  subsweep full "$tmp/full"
  timed full "$sweep" run "$tmp/full.ini" --workers 2 --quiet
  n=$(ls "$tmp"/full/points/*.json | wc -l)
  printf 'full (%d units x 4 policies, 200 steps) on 2 workers: wall %.1f s (%.1f min), cpu %.1f s, %.3f units/s\n' "$n" \
    "$(wall full)" "$(awk -v t="$(wall full)" 'BEGIN { print t / 60 }')" "$(cpu full)" \
    "$(awk -v n="$n" -v t="$(wall full)" 'BEGIN { print n / t }')"
  printf 'full: %.2f CPU s a unit; the goal, 10 minutes on two cores, is 1200 CPU s: %s\n' \
    "$(awk -v n="$n" -v c="$(cpu full)" 'BEGIN { print c / n }')" \
    "$(awk -v c="$(cpu full)" 'BEGIN { print (c <= 1200) ? "met" : "not met" }')"
  ;;
*) echo "sweep_bench: unknown part '$w' (overhead, subset, full)" >&2; exit 2 ;;
esac; done
