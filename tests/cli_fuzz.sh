#!/bin/sh
# cli_fuzz.sh: a bounded run of each libFuzzer harness (tests/fuzz/fuzz_*.c) on the committed
# seed corpus (tests/fuzz/corpus/NAME): a fixed number of inputs from a fixed seed, so the run
# is the same on every machine and CI cannot fail on a finding that a longer campaign found
# first (the campaigns run by time: tests/fuzz/campaign.sh, tests/fuzz/RESULTS.md). Any crash,
# sanitizer report or leak fails it. New inputs go to a scratch folder, never into the corpus.
# The harnesses need clang (make fuzz); where it is missing this prints a note and a SKIP line.
# FUZZ_TEST_RUNS sets the inputs per harness (default 50000); the trace reader's harness, whose
# inputs each open an HDF5 file (a few ms), gets FUZZ_TRACE_RUNS (default 3000). Its mutations
# once reached defects inside the HDF5 library itself (Debian 12's 1.10.8) within the first few
# thousand inputs; the reader's pre-check closes those (tests/fuzz/RESULTS.md, the inputs in
# tests/fuzz/hdf5-defects/, run by tests/cli_harden.sh), so the bounded run mutates again.
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export LSAN_OPTIONS=suppressions=$(pwd)/tests/lsan.supp:print_suppressions=0
# A huge allocation fails as in a plain build (NULL, which HDF5 reports) instead of aborting.
export ASAN_OPTIONS=allocator_may_return_null=1
ran=0
for src in tests/fuzz/fuzz_*.c; do
  n=$(basename "$src" .c); n=${n#fuzz_}
  bin=build-fuzz/fuzz_$n
  if [ ! -x "$bin" ]; then continue; fi
  ran=1
  mkdir -p "$tmp/$n"
  case $n in trace) runs=${FUZZ_TRACE_RUNS:-3000} ;; *) runs=${FUZZ_TEST_RUNS:-50000} ;; esac
  # One process, seed 1: the same inputs in the same order on every run.
  "$bin" -seed=1 -runs="$runs" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$tmp/" "$tmp/$n" "tests/fuzz/corpus/$n" >"$tmp/log" 2>&1
  rc=$?
  crashes=$(ls "$tmp" | grep -c '^crash-\|^leak-\|^oom-\|^timeout-')
  if [ "$rc" -eq 0 ] && [ "$crashes" -eq 0 ]; then echo "PASS fuzz_$n ($([ "$runs" = 0 ] && echo "the corpus replayed" || echo "$runs inputs, seed 1"))"
  else echo "FAIL fuzz_$n: exit $rc, $(grep -m1 -E 'ERROR|SUMMARY|deadly' "$tmp/log" | head -c 300)"; fi
done
if [ "$ran" = 0 ]; then
  echo "note: the fuzz harnesses are not built here (make fuzz; they need clang)"
  echo "SKIP fuzz"
fi
