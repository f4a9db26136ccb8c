#!/bin/sh
# run.sh: every CPU benchmark of the project (make bench), from the repository
# root. Each prints its figures; the recorded ones and how to read them are in
# bench/RESULTS-traces.md, RESULTS-sim.md, RESULTS-spec.md and RESULTS-sweep.md.
#   1. traces: generation and statistics rows/s, bytes per stored row, and the
#      16-request, 78-layer, 1,000-token trace (issue targets: >= 50 M rows/s)
#   2. simulator: the make-run scenario at 1,000 steps (target: < 20 s) and
#      DeepSeek-V4.1-Flash at 500K context, concurrency 512 (fits in 24 GiB)
#   3. speculative decoding: DFlash2 within 2x the wall time of plain decoding
#   4. sweeps: dhsweep's overhead per point against a bare dhsim run (target <= 5 %), a
#      32-unit subset on 1 and 2 workers and 2 MPI ranks, and the 1,000-point sweep
#      sweeps/bench-1000.ini on 2 workers (target: 10 minutes on two cores). The full
#      sweep is the longest part; SWEEP_BENCH="overhead subset" leaves it out
#   5. kernels, where a CUDA GPU is present: the default dhbench suite (make gpubench),
#      CSVs to measurements/local/ (recorded H200 figures: measurements/h200/)
set -e
make -s build/bench/trace_bench
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
echo "== traces (build/bench/trace_bench --file $tmp)"
build/bench/trace_bench --file "$tmp"
echo "== simulator (sh bench/sim_bench.sh 1000)"
sh bench/sim_bench.sh 1000
echo "== speculative decoding (sh bench/spec_bench.sh 200)"
sh bench/spec_bench.sh 200
echo "== sweeps (sh bench/sweep_bench.sh ${SWEEP_BENCH:-overhead subset full})"
sh bench/sweep_bench.sh ${SWEEP_BENCH:-overhead subset full}
if [ -x bin/dhbench ] && nvidia-smi -L >/dev/null 2>&1; then
  echo "== kernels (sh kernels/gpubench.sh measurements/local)"
  sh kernels/gpubench.sh measurements/local
else
  echo "== kernels: no CUDA GPU here (or bin/dhbench not built); on a GPU machine: make gpubench"
fi
