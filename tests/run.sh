#!/bin/sh
# Runs every test binary given (cmocka) and every tests/cli_*.sh script, and ends with one
# summary line "N passed, N failed".  A cmocka binary reports "[  PASSED  ] N test(s)." and
# "[  FAILED  ] N test(s)"; a shell test prints one "PASS name" or "FAIL name" line per case.
# A binary that crashes, or prints no summary, counts as one failure.
passed=0; failed=0; log=$(mktemp); trap 'rm -f "$log"' EXIT
for t in "$@" tests/cli_*.sh; do
  [ -e "$t" ] || continue
  case "$t" in *.sh) sh "$t" >"$log" 2>&1 ;; *) "$t" >"$log" 2>&1 ;; esac
  rc=$?
  cat "$log"
  p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
  f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
  p=$((p + $(grep -c '^PASS ' "$log"))); f=$((f + $(grep -c '^FAIL ' "$log")))
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then echo "FAIL $t exited with status $rc"; f=1; fi
  # A script that can only skip here (a tool this machine lacks) says "SKIP name".
  if [ "$p" -eq 0 ] && [ "$f" -eq 0 ] && ! grep -q '^SKIP ' "$log"; then echo "FAIL $t ran no test"; f=1; fi
  passed=$((passed + p)); failed=$((failed + f))
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
