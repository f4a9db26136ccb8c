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

# Determinism: two runs, different thread counts, more than a second apart (HDF5 would record
# object times in seconds), byte-identical JSON, TSV and HDF5 timeline.
if "$bin" $small --compare --quiet --threads 1 --json "$tmp/a.json" --timeline "$tmp/a" 2>"$tmp/err1" && sleep 1.1 &&
   "$bin" $small --compare --quiet --threads 2 --json "$tmp/b.json" --timeline "$tmp/b" 2>"$tmp/err2" &&
   cmp -s "$tmp/a.json" "$tmp/b.json" && cmp -s "$tmp/a.tsv" "$tmp/b.tsv"; then echo "PASS deterministic_json_tsv"
else echo "FAIL deterministic_json_tsv ($(cat "$tmp/err1" "$tmp/err2"))"; fi
if cmp -s "$tmp/a.h5" "$tmp/b.h5"; then echo "PASS deterministic_h5_timeline"; else echo "FAIL deterministic_h5_timeline"; fi
# The HDF5 timeline opens with h5dump and holds one dataset per column.
if h5dump -n "$tmp/a.h5" 2>/dev/null | grep -q "/timeline/oracle/fetch_fraction"; then echo "PASS timeline_h5"
else echo "FAIL timeline_h5"; fi
if ls "$tmp"/*.tmp* >/dev/null 2>&1; then echo "FAIL no_temp_files_left"; else echo "PASS no_temp_files_left"; fi

# Speculative decoding: bad modes and drafts, oracle refused, determinism.
expect_error bad_spec_mode "expected none, dflash2 or dspark" --spec eagle
expect_error bad_policy_mode "unknown speculative mode 'eagle'" --policy adaptive+eagle
expect_error oracle_spec "oracle does not run with speculative decoding" --policy oracle --spec dflash2
expect_error missing_draft "nope-draft.ini" --draft "$tmp/nope-draft.ini"
expect_error draft_other_model "targets model 'glm53'" --config models/instances/dsv41flash-h200x4.ini --draft models/drafts/glm53-dflash2.ini
spec_small="--steps 6 --set workload.output_len=8 --set workload.prompt_len=8000"
if "$bin" $spec_small --policy adaptive+dflash2,hisparse-spec,resident+dspark --quiet --threads 1 --json "$tmp/s1.json" 2>"$tmp/err1" &&
   "$bin" $spec_small --policy adaptive+dflash2,hisparse-spec,resident+dspark --quiet --threads 2 --json "$tmp/s2.json" 2>"$tmp/err2" &&
   cmp -s "$tmp/s1.json" "$tmp/s2.json" && grep -q '"policy": "hisparse-spec"' "$tmp/s1.json" &&
   grep -q '"shared_retrieval": false, "draft_ring": false, "staging_reuse": false' "$tmp/s1.json"; then echo "PASS spec_deterministic_json"
else echo "FAIL spec_deterministic_json ($(cat "$tmp/err1" "$tmp/err2"))"; fi

# The all-to-all cost comes from models/hw/a2a.ini where it measures moe_ep GPUs
# (2 here), from the instance's assumed values where it does not (4), and a GPU
# count the file has no section for is an error.
dsv="--config models/instances/dsv41flash-h200x4.ini --steps 2 --policy hisparse --set workload.concurrency=8 --quiet --json -"
a2a_of() { "$bin" $dsv "$@" 2>&1 | grep -o '"a2a": "[^"]*"'; }
case "$(a2a_of --set instance.moe_ep=2)" in
  *"measured (models/hw/a2a.ini, 2 GPUs)"*) echo "PASS a2a_measured_used" ;; *) echo "FAIL a2a_measured_used" ;; esac
case "$(a2a_of)" in *"assumed"*) echo "PASS a2a_unmeasured_assumed" ;; *) echo "FAIL a2a_unmeasured_assumed" ;; esac
# A GPU count the file does not list is no longer an error but the assumed cost, said in the
# run's a2a line (a2a_unlisted_gpus_assumed below).
case "$(a2a_of --set instance.moe_ep=3 --set instance.gpus=3 --set instance.attention_dp=3 --set instance.lm_head_tp=3 --set instance.dense_mlp_tp=3)" in
  *"assumed ([instance] moe_comm_s, moe_comm_gbps; models/hw/a2a.ini lists no 3 GPUs)"*) echo "PASS a2a_no_section_assumed" ;;
  *) echo "FAIL a2a_no_section_assumed" ;; esac

# --search-latency: the concurrency it returns meets the bound, the next one up does not.
search_small="--steps 6 --set workload.output_len=8 --set workload.prompt_len=8000 --policy hisparse"
per_gpu=$("$bin" $search_small --search-latency 30 --search-stat p50 2>"$tmp/err" | awk '$1 == "hisparse" { print $3 }')
p50_at() { "$bin" $search_small --concurrency "$1" --quiet --json - | tr ',' '\n' | awk -F': ' '/"tpot_p50_s"/ { print $2 * 1000 }'; }
if [ -n "$per_gpu" ] && [ "$per_gpu" -ge 1 ]; then
  ok=$(p50_at $((per_gpu * 8))); next=$(p50_at $(((per_gpu + 1) * 8)))
  if awk -v a="$ok" -v b="$next" 'BEGIN { exit !(a <= 30 && b > 30) }'; then echo "PASS search_latency_bound"
  else echo "FAIL search_latency_bound (per GPU $per_gpu: p50 $ok ms; $((per_gpu + 1)): $next ms)"; fi
else echo "FAIL search_latency_bound (no result: $(cat "$tmp/err"))"; fi

# --search-latency under a memory limit: a concurrency that HBM cannot admit
# never meets a bound (its waiting requests get no tokens), so with a bound no
# run misses, the result is the largest concurrency admitted in full.
search_mem="--steps 4 --set workload.output_len=8 --set instance.weights_per_gpu_bytes=124e9 --policy hisparse"
per_gpu=$("$bin" $search_mem --search-latency 100000 2>"$tmp/err" | awk '$1 == "hisparse" { print $3 }')
active_at() { "$bin" $search_mem --concurrency "$1" --quiet --json - | tr ',' '\n' | awk -F': ' '/"mean_active"/ { print $2 }'; }
if [ -n "$per_gpu" ] && [ "$per_gpu" -ge 1 ]; then
  a=$(active_at $((per_gpu * 8))); b=$(active_at $(((per_gpu + 1) * 8)))
  if awk -v p="$per_gpu" -v a="$a" -v b="$b" 'BEGIN { exit !(a >= p && b < p + 1) }'; then echo "PASS search_latency_admitted"
  else echo "FAIL search_latency_admitted (per GPU $per_gpu: admitted $a; at $((per_gpu + 1)): $b)"; fi
else echo "FAIL search_latency_admitted (no result: $(cat "$tmp/err"))"; fi

# The all-to-all file: a GPU count it does not list falls back to the instance's assumed cost and
# says so (it was an error); every section and key of it is checked (an unknown key was accepted).
out=$(./bin/dhsim --policy hisparse --steps 3 --set instance.gpus=16 --set instance.moe_ep=16 \
      --set instance.attention_dp=16 2>&1); rc=$?
if [ $rc -eq 0 ] && echo "$out" | grep -q "all-to-all: assumed (.*lists no 16 GPUs)"; then echo "PASS a2a_unlisted_gpus_assumed"
else echo "FAIL a2a_unlisted_gpus_assumed (rc $rc: $(echo "$out" | head -2))"; fi
sed 's/^dedup = rank/dedup = rank\nbogus = 1/' models/hw/a2a.ini > "$tmp/a2a-key.ini"
sed 's/^latency_us = 22.831/latency_us = fast/' models/hw/a2a.ini > "$tmp/a2a-num.ini"
sed 's/^\[gpus.2.combine\]/[gpus.2.scatter]/' models/hw/a2a.ini > "$tmp/a2a-sec.ini"
for c in key:"unknown key 'bogus'" num:"latency_us = 'fast' is not a number" sec:"section \[gpus.2.scatter\]"; do
  f=${c%%:*}; want=${c#*:}
  ./bin/dhsim --policy hisparse --steps 3 --set instance.a2a="$tmp/a2a-$f.ini" > "$tmp/out" 2> "$tmp/err"; rc=$?
  if [ $rc -ne 0 ] && [ "$(wc -l < "$tmp/err")" -eq 1 ] && grep -q "$want" "$tmp/err" && [ ! -s "$tmp/out" ]
  then echo "PASS a2a_file_checked_$f"; else echo "FAIL a2a_file_checked_$f (rc $rc: $(cat "$tmp/err"))"; fi
done
# [fit_range]: a key that names no fitted kernel's input, or a value that is not "min, max", is
# one error line (both were accepted).
for c in name:"bogus_key = 1, 2":"bogus_key is not KERNEL_INPUT" value:"fetch_foo = 1, x":"fetch_foo"; do
  f=${c%%:*}; rest=${c#*:}; line=${rest%%:*}; want=${rest#*:}
  { cat models/hw/h200.ini; printf '[fit_range]\n%s\n' "$line"; } > "$tmp/hw-$f.ini"
  ./bin/dhsim --policy hisparse --steps 3 --set instance.hw="$tmp/hw-$f.ini" > "$tmp/out" 2> "$tmp/err"; rc=$?
  if [ $rc -ne 0 ] && [ "$(wc -l < "$tmp/err")" -eq 1 ] && grep -q "$want" "$tmp/err" && [ ! -s "$tmp/out" ]
  then echo "PASS fit_range_checked_$f"; else echo "FAIL fit_range_checked_$f (rc $rc: $(cat "$tmp/err"))"; fi
done

# --memory: the plan's breakdown, whose KV pool is HBM less the weights in use and the
# framework's share (the figures in bytes, the last column but one), and the weights' parts
# add to the computed total.
"$bin" --memory > "$tmp/mem.txt" 2>&1
if awk '/^  HBM / { h = $(NF-1) } /weights in use/ { w = $(NF-1) } /framework besides weights and KV/ { f = $(NF-1) }
        /KV pool \(HBM/ { k = $(NF-1) } /weights: / { s += $(NF-1) } /weights computed from the model/ { c = $(NF-1) }
        END { exit !(h > 0 && k > 0 && (h - w - f - k) ^ 2 < 4 && (s - c) ^ 2 < 100) }' "$tmp/mem.txt"
then echo "PASS memory_plan_adds_up"; else echo "FAIL memory_plan_adds_up"; cat "$tmp/mem.txt"; fi
