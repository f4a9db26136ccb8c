#!/bin/sh
# cli_dhsim.sh: bin/dhsim on bad options, configs and traces (one error line
# "dhsim: ...", non-zero exit, no output file left behind) and on determinism
# (the same inputs and seed give byte-identical JSON and TSV, on 1 or 2 threads).
# Runs from the repository root.
bin=./bin/dhsim
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
small="--concurrency 16 --steps 6 --set workload.output_len=4 --set workload.output_len_max=8"

# expect_error NAME NEEDLE ARGS...: exit status non-zero, exactly one line on stderr naming NEEDLE.
expect_error() {
  name=$1; needle=$2; shift 2
  "$bin" "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?
  lines=$(wc -l <"$tmp/err")
  if [ "$rc" -ne 0 ] && [ "$lines" -eq 1 ] && grep -q "^dhsim: .*$needle" "$tmp/err"; then echo "PASS $name"
  else echo "FAIL $name (rc $rc, stderr: $(cat "$tmp/err"))"; fi
}

expect_error unknown_option "unknown option" --frobnicate
expect_error missing_config "nope.ini" --config "$tmp/nope.ini"
expect_error misspelt_key "unknown key 'concurency'" --set workload.concurency=4
expect_error bad_value "gpus" --set instance.gpus=-1
expect_error bad_policy "unknown policy 'lfu'" --policy lfu
expect_error bad_set_syntax "expected section.key=value" --set nodot
expect_error missing_trace "missing.h5" --trace "$tmp/missing.h5"
printf 'this is not an HDF5 file\n' >"$tmp/garbage.h5"
expect_error corrupt_trace "garbage.h5" --trace "$tmp/garbage.h5"
expect_error bad_model_kind "unknown kind 'nope'" --set "model.layers=dense_own, nope"
expect_error bad_search "search-latency" --search-latency -3
expect_error too_big_weights "exceed the GPU's HBM" --set instance.weights_per_gpu_bytes=2e11
expect_error no_json_half_written "unable to write" $small --policy resident --json "$tmp/no/such/dir/x.json"

if "$bin" --help | grep -q "usage: dhsim"; then echo "PASS help"; else echo "FAIL help"; fi

# Determinism: two runs, different thread counts, byte-identical JSON and TSV.
if "$bin" $small --compare --quiet --threads 1 --json "$tmp/a.json" --timeline "$tmp/a" 2>"$tmp/err1" &&
   "$bin" $small --compare --quiet --threads 2 --json "$tmp/b.json" --timeline "$tmp/b" 2>"$tmp/err2" &&
   cmp -s "$tmp/a.json" "$tmp/b.json" && cmp -s "$tmp/a.tsv" "$tmp/b.tsv"; then echo "PASS deterministic_json_tsv"
else echo "FAIL deterministic_json_tsv ($(cat "$tmp/err1" "$tmp/err2"))"; fi
# The HDF5 timeline opens with h5dump and holds one dataset per column.
if h5dump -n "$tmp/a.h5" 2>/dev/null | grep -q "/timeline/oracle/fetch_fraction"; then echo "PASS timeline_h5"
else echo "FAIL timeline_h5"; fi
if ls "$tmp"/*.tmp* >/dev/null 2>&1; then echo "FAIL no_temp_files_left"; else echo "PASS no_temp_files_left"; fi
