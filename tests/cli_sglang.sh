#!/bin/sh
# cli_sglang.sh: the SGLang policies on the command line: bad [policy] keys give one error
# line and a non-zero exit; ideal-lru is the idealised LRU's other name (the same bytes);
# the dynamic policies give the same bytes on 1 and 3 threads; with every request resident
# (a small concurrency) sglang-dynamic is resident (the same output per GPU, nothing
# fetched; 2 requests per GPU fit the pool of the default instance), and with the device
# pool short it fetches. Runs from the repository root.
bin=./bin/dhsim
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
small="--steps 8 --set workload.output_len=8 --set workload.output_len_max=16"

expect_error() {
  name=$1; needle=$2; shift 2
  "$bin" "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?
  lines=$(wc -l <"$tmp/err")
  if [ "$rc" -ne 0 ] && [ "$lines" -eq 1 ] && grep -q "^dhsim: .*$needle" "$tmp/err"; then echo "PASS $name"
  else echo "FAIL $name (rc $rc, stderr: $(cat "$tmp/err"))"; fi
}
expect_error sglang_bad_cold "sglang_cold" --set policy.sglang_cold=warm
expect_error sglang_bad_order "sglang_order" --set policy.sglang_order=random
expect_error sglang_buffer_below_topk "device_buffer_size = 1000 is below group 0's top-k 2048" --policy sglang-hisparse --set policy.device_buffer_size=1000 $small
expect_error sglang_dynamic_buffer_below_topk "device_buffer_size = 1000 is below" --policy sglang-dynamic --set policy.device_buffer_size=1000 $small
expect_error sglang_watermarks_crossed "sglang_low_watermark = 0.9 is above" --set policy.sglang_low_watermark=0.9
expect_error sglang_no_spec "does not run with speculative decoding" --policy sglang-dynamic+dflash2 $small

# json FILE KEY POLICY: one number of a run.
json() { python3 -c "import json,sys; print([r for r in json.load(open('$1'))['runs'] if r['policy']=='$3'][0]['$2'])"; }

# The figures of a --json file without what it records of its inputs (which name the command line).
figs() { python3 -c 'import json, sys
d = json.load(open(sys.argv[1])); d.pop("inputs", None)
for r in d["runs"]: r.pop("inputs", None)
print(json.dumps(d, sort_keys=True))' "$1"; }
"$bin" --policy hisparse $small --quiet --json "$tmp/h.json" >/dev/null 2>&1
"$bin" --policy ideal-lru $small --quiet --json "$tmp/i.json" >/dev/null 2>&1
if [ -s "$tmp/h.json" ] && [ "$(figs "$tmp/h.json")" = "$(figs "$tmp/i.json")" ]; then echo "PASS sglang_ideal_lru_alias"; else echo "FAIL sglang_ideal_lru_alias"; fi

p=sglang-hisparse,sglang-dynamic,sglang-watermark,adaptive
"$bin" --policy $p $small --threads 1 --quiet --json "$tmp/t1.json" >/dev/null 2>&1
"$bin" --policy $p $small --threads 3 --quiet --json "$tmp/t3.json" >/dev/null 2>&1
if [ -s "$tmp/t1.json" ] && cmp -s "$tmp/t1.json" "$tmp/t3.json"; then echo "PASS sglang_thread_independent"
else echo "FAIL sglang_thread_independent"; fi

"$bin" --policy resident,sglang-dynamic --concurrency 16 $small --quiet --json "$tmp/fit.json" >/dev/null 2>&1
r=$(json "$tmp/fit.json" tok_s_per_gpu resident); d=$(json "$tmp/fit.json" tok_s_per_gpu sglang-dynamic)
f=$(json "$tmp/fit.json" fetch_bytes sglang-dynamic)
if [ -n "$r" ] && [ "$r" = "$d" ] && [ "$f" = "0.0" -o "$f" = "0" ]; then echo "PASS sglang_dynamic_resident_when_it_fits"
else echo "FAIL sglang_dynamic_resident_when_it_fits (resident $r, dynamic $d, fetched $f)"; fi

"$bin" --policy sglang-dynamic --concurrency 256 $small --quiet --json "$tmp/short.json" >/dev/null 2>&1
f=$(json "$tmp/short.json" fetch_bytes sglang-dynamic)
if awk -v f="$f" 'BEGIN { exit !(f > 0) }'; then echo "PASS sglang_dynamic_demotes_when_short"
else echo "FAIL sglang_dynamic_demotes_when_short (fetched $f)"; fi
