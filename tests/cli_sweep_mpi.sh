#!/bin/sh
# cli_sweep_mpi.sh: bin/dhsweep under OpenMPI's mpirun: two ranks share the
# points (round-robin by unit) and rank 0 merges; the files and the table are
# the same bytes as a run on threads alone; a rerun skips every point; a bad
# sweep file stops every rank before any point runs. Runs from the repository
# root; bin/dhsweep must have been built with mpicc (libopenmpi-dev, which
# `make` installs as root).
bin=./bin/dhsweep
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1"; }
# OpenMPI refuses root without --allow-run-as-root; --oversubscribe lets two ranks
# share a machine with fewer free cores than ranks.
# Under make sanitize, leak detection is off for the ranks alone: OpenMPI's plugins, unloaded at
# MPI_Finalize, keep allocations that LeakSanitizer reports without a module to suppress them
# by; every other check of the sanitizers stays on (a plain run ignores the variable).
MPIRUN="env ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 mpirun -n 2 --allow-run-as-root --oversubscribe"

if "$bin" --version | grep -q "mpi: yes"; then pass "built with MPI"
else fail "built with MPI: $("$bin" --version) (mpicc not found at build time; install libopenmpi-dev and make again)"; fi
if command -v mpirun >/dev/null; then pass "mpirun found"; else fail "mpirun found (openmpi-bin)"; fi

. tests/sweep_fixture.sh
sweep() { small_sweep "$tmp/$1.ini" "$tmp/$1" hisparse,adaptive 1,2; }
sweep threads; sweep ranks
"$bin" run "$tmp/threads.ini" --workers 2 --quiet
if timeout 300 $MPIRUN "$bin" run "$tmp/ranks.ini" --workers 1 >"$tmp/out" 2>&1 &&
   grep -q "6 points (0 skipped, 6 run, 0 failed).* x 2 ranks" "$tmp/out"; then pass "mpirun -n 2"
else fail "mpirun -n 2: $(tail -5 "$tmp/out")"; fi
same=1
for f in results.csv results.h5; do cmp -s "$tmp/threads/$f" "$tmp/ranks/$f" || same=0; done
for f in "$tmp"/threads/points/*.json; do cmp -s "$f" "$tmp/ranks/points/$(basename "$f")" || same=0; done
if [ $same = 1 ]; then pass "same bytes on 2 ranks as on threads"; else fail "same bytes on 2 ranks as on threads"; fi
if timeout 300 $MPIRUN "$bin" run "$tmp/ranks.ini" --workers 1 >"$tmp/out" 2>&1 && grep -q "6 skipped, 0 run" "$tmp/out"; then
  pass "mpirun rerun skips every point"; else fail "mpirun rerun skips every point: $(tail -5 "$tmp/out")"; fi

sweep bad
sed -i 's/^policy.hisparse_budget_k = .*/workload.concurency = 16,32/' "$tmp/bad.ini"
if timeout 300 $MPIRUN "$bin" run "$tmp/bad.ini" --workers 1 >"$tmp/out" 2>&1; then fail "bad sweep stops every rank"
elif grep -q "unknown key 'concurency'" "$tmp/out" && [ "$(ls "$tmp"/bad/points/*.json 2>/dev/null | wc -l)" -eq 0 ]; then
  pass "bad sweep stops every rank"; else fail "bad sweep stops every rank: $(tail -5 "$tmp/out")"; fi
