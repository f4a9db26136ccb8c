#!/bin/sh
# tests/fuzz/campaign.sh SECONDS [NAME...]: a fuzzing campaign, each harness in turn for SECONDS
# on one core (one libFuzzer job), from the committed seed corpus; new inputs and any crash,
# leak or hang artefact go under build-fuzz/campaign/NAME. Prints libFuzzer's final figures per
# harness; tests/fuzz/RESULTS.md records a run. Build the harnesses first with make fuzz.
secs=${1:?usage: campaign.sh SECONDS [NAME...]}; shift
names=${*:-trace cfg bcsv}
root=$(pwd)
export LSAN_OPTIONS=suppressions=$root/tests/lsan.supp
# A huge allocation fails as in a plain build (NULL, which HDF5 reports) instead of aborting.
export ASAN_OPTIONS=allocator_may_return_null=1
for n in $names; do
  d=build-fuzz/campaign/$n
  mkdir -p "$d/corpus" "$d/artifacts"
  echo "== fuzz_$n: $secs s, started $(date -u +%H:%M:%S)"
  # Fork mode with one job: a crash or hang is recorded and the campaign goes on, so the
  # counts below are of the whole campaign, not of its first finding.
  build-fuzz/fuzz_$n -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 -max_total_time="$secs" \
    -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$d/artifacts/" "$d/corpus" "tests/fuzz/corpus/$n" >"$d/log" 2>&1
  echo "exit status $?"
  # The last progress line: "#EXECUTIONS: cov ... oom/timeout/crash: O/T/C time: S".
  grep -E '^#[0-9]+: cov' "$d/log" | tail -1
  echo "artefacts: $(ls "$d/artifacts" | wc -l) ($(ls "$d/artifacts" | tr '\n' ' '))"
done
