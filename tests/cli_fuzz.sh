#!/bin/sh
# cli_fuzz.sh: a bounded run of each libFuzzer harness (tests/fuzz/fuzz_*.c) on the committed
# seed corpus (tests/fuzz/corpus/NAME): a few seconds each, any crash, sanitizer report, leak
# or hang (-timeout) fails it. New inputs go to a scratch folder, never into the corpus.
# The harnesses need clang (make fuzz); where it is missing this prints a note and a SKIP line.
# FUZZ_TEST_SECONDS sets the time per harness (default 8).
secs=${FUZZ_TEST_SECONDS:-8}
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
  # Fork mode, one job: a hang is counted and the run goes on. A crash, a sanitizer report or a
  # leak fails the case; a hang is reported beside the PASS (HDF5 1.10 has one of its own on a
  # damaged global heap: tests/fuzz/RESULTS.md).
  "$bin" -fork=1 -ignore_timeouts=1 -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$tmp/" "$tmp/$n" "tests/fuzz/corpus/$n" >"$tmp/log" 2>&1
  rc=$?
  last=$(grep -E '^#[0-9]+: cov' "$tmp/log" | tail -1)
  runs=$(echo "$last" | sed -n 's/^#\([0-9]*\):.*/\1/p')
  hangs=$(echo "$last" | sed -n 's|.*oom/timeout/crash: [0-9]*/\([0-9]*\)/.*|\1|p')
  crashes=$(ls "$tmp" | grep -c '^crash-\|^leak-\|^oom-')
  # libFuzzer's fork mode exits 70 when the only findings were (ignored) hangs.
  if { [ "$rc" -eq 0 ] || { [ "$rc" -eq 70 ] && [ -n "$hangs" ] && [ "$hangs" -gt 0 ]; }; } && [ "$crashes" -eq 0 ]; then echo "PASS fuzz_$n (${runs:-0} runs${hangs:+, $hangs hangs})"
  else echo "FAIL fuzz_$n: exit $rc, $(grep -m1 -E 'ERROR|SUMMARY|deadly' "$tmp/log" | head -c 300)"; fi
done
if [ "$ran" = 0 ]; then
  echo "note: the fuzz harnesses are not built here (make fuzz; they need clang)"
  echo "SKIP fuzz"
fi
