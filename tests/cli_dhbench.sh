#!/bin/sh
# tests/cli_dhbench.sh: bin/dhbench's command line, which is read before any CUDA call, so it
# runs where nvcc exists and no GPU does. Each bad option gives one error line naming it and
# exit status 2, and no output file. Prints PASS/FAIL per case.
bin=./bin/dhbench
if [ ! -x "$bin" ]; then
  if [ "$(make -s --no-print-directory print-BUILD_CUDA)" = 1 ]; then echo "FAIL dhbench_built (nvcc exists)"; else echo "PASS dhbench_not_built_without_nvcc"; fi
  exit 0
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# bad NAME ARGS... : exit 2, exactly one stderr line containing the option, nothing in $tmp/out.
bad() {
  name=$1; want=$2; shift 2
  "$bin" "$@" --out "$tmp/out" >/dev/null 2>"$tmp/err"; rc=$?
  if [ "$rc" -eq 2 ] && [ "$(wc -l < "$tmp/err")" -eq 1 ] && grep -q -- "$want" "$tmp/err" && [ -z "$(ls "$tmp/out" 2>/dev/null)" ]; then
    echo "PASS $name"
  else
    echo "FAIL $name (status $rc: $(head -c 200 "$tmp/err"))"
  fi
}
bad b2b_zero "--b2b '0'" --suite default --b2b 0
bad b2b_trailing "--b2b '5x'" --suite default --b2b 5x
bad b2b_negative "--b2b '-2'" --suite default --b2b -2
bad reps_word "--reps 'many'" --suite default --reps many
bad reps_huge "--reps '99999999999'" --suite default --reps 99999999999
# A good value gets past the option checks (to the suite, or to the missing device here).
"$bin" --suite default --b2b 20 --reps 3 --out "$tmp/ok" >/dev/null 2>"$tmp/err"
if ! grep -q 'need an integer' "$tmp/err"; then echo "PASS b2b_accepted"; else echo "FAIL b2b_accepted ($(cat "$tmp/err"))"; fi
