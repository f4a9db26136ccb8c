#!/bin/sh
# tests/cli_dhbench.sh: bin/dhbench's command line and the grid points' device-free checks,
# which run before any CUDA call, so this runs where nvcc exists and no GPU does. Each bad
# option or value gives one error line naming it and exit status 2, and no output file.
# Prints PASS/FAIL per case.
bin=./bin/dhbench
# The kernels' layout (kernels/README.md), checked with or without nvcc: no .cu file includes
# another; the library (kernels/lib/, kernels/dhk.h) includes nothing of the versions, the
# benchmarks or the simulator; the stand-alone build scripts run the Makefile, which alone
# lists the files.
cu_inc=$(grep -rlE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]*\.cu"' kernels 2>/dev/null)
if [ -z "$cu_inc" ]; then echo "PASS kernels_no_cu_included"; else echo "FAIL kernels_no_cu_included ($cu_inc)"; fi
lib_inc=$(grep -hE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' kernels/dhk.h kernels/lib/* |
  grep -vE '"kernels/(dhk\.h|kref\.h|lib/[a-z0-9_]+\.cuh)"')
if [ -z "$lib_inc" ]; then echo "PASS kernels_lib_self_contained"; else echo "FAIL kernels_lib_self_contained ($lib_inc)"; fi
compiles=$(grep -v '^[[:space:]]*#' kernels/build.sh kernels/replay/build.sh kernels/a2a/build.sh | grep -E -- ' -(c|o) ')
if [ -z "$compiles" ] && grep -q '^exec make' kernels/build.sh && grep -q '^exec make' kernels/replay/build.sh &&
   grep -q '^exec make' kernels/a2a/build.sh; then
  echo "PASS kernels_build_scripts_run_make"
else echo "FAIL kernels_build_scripts_run_make ($compiles)"; fi
. tests/gpu_tool.sh
gpu_tool_present || exit 0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
BAD_OUT=$tmp/out   # bad NAME WANT ARGS...: exit 2, one stderr line naming the option, nothing in $tmp/out
bad b2b_zero "--b2b '0'" --suite default --b2b 0
bad b2b_trailing "--b2b '5x'" --suite default --b2b 5x
bad b2b_negative "--b2b '-2'" --suite default --b2b -2
bad reps_word "--reps 'many'" --suite default --reps many
bad reps_huge "--reps '99999999999'" --suite default --reps 99999999999
# Grid values, on the command line and in a suite file: checked for every point before the device.
# one past the last attention version (kernels/bench.cuh; the ring runs the same versions)
amax=$(sed -n 's/.*ATTN_MAX_VERSION = \([0-9]*\).*/\1/p' kernels/bench.cuh); apast=$((amax + 1))
bad attn_version "version $apast is not 1 to $amax" --kernel attention version=8,$apast
bad attn_diag_name "diag=bogus" --kernel attention version=8 diag=bogus
bad attn_diag_version "diag=producer: need" --kernel attention version=6 diag=producer
bad attn_diag_qhi_version "diag=qhi: need" --kernel attention version=10 diag=qhi
bad attn_format "format 'fp4'" --kernel attention format=fp8,fp4
# Versions 33-36 (kernels/versions/attn33_wgmma.cu): the prefetch variant A33_PF and the shapes of
# their producer alone, checked before the device; the other versions ignore A33_PF.
(export A33_PF=bulk:3; bad attn33_pf_name "A33_PF=bulk:3: need" --kernel attention version=33)
(export A33_PF=bulk:3; bad verify33_pf_name "A33_PF=bulk:3: need" --kernel verify version=34)
(export A33_PF=bulk:2; bad attn33_producer_variant "v33 diag=producer: need" --kernel attention version=33 diag=producer)
(export A33_PF=none; bad attn33_producer_bf16 "v33 diag=producer: need" --kernel attention version=33 diag=producer format=bf16)
bad attn34_producer "diag=producer" --kernel attention version=34 diag=producer
bad attn36_producer_bf16 "v36 diag=producer: need format=fp8" --kernel attention version=36 diag=producer format=bf16
bad attn37_producer "diag=producer" --kernel attention version=37 diag=producer
for v in 31 35 36 37 38 39 40 41 42 43; do
  if A33_PF=bulk:3 $bin --kernel attention version=$v diag=none --check-only >/dev/null 2>&1; then echo "PASS attn${v}_ignores_a33_pf"
  else echo "FAIL attn${v}_ignores_a33_pf"; fi
done
# Versions 35 and 36's latent stores against the stage's layout (a6_swz), checked on the host.
if $bin --kernel attention version=35,36 --check-only >/dev/null 2>"$tmp/err"; then echo "PASS attn35_36_store_layout"
else echo "FAIL attn35_36_store_layout ($(head -c 200 "$tmp/err"))"; fi
# Version 37's wgmma descriptors stepped in their low half against the ones built from each address.
if $bin --kernel attention version=37,38,39,40,41,42,43 --check-only >/dev/null 2>"$tmp/err"; then echo "PASS attn37_desc_steps"
else echo "FAIL attn37_desc_steps ($(head -c 200 "$tmp/err"))"; fi
if A33_PF=none $bin --kernel attention version=31,33,35,36,39,40,41,42,43 diag=producer --check-only >/dev/null 2>&1; then echo "PASS attn31_33_35_36_39_to_43_producer_ok"
else echo "FAIL attn31_33_35_36_39_to_43_producer_ok"; fi
bad verify_version "verify: version 0" --kernel verify version=0
bad ring_version "ring: version $apast" --kernel ring version=$apast
bad not_integer "version=x is not an integer" --kernel attention version=x
bad gather_version "gather: version 5" --kernel gather version=5
bad gather_row_bytes "row_bytes 700" --kernel gather row_bytes=700
bad gather_warps "warps=1 rows=" --kernel gather version=4 warps=1
bad gather_pool "need rows <= slots" --kernel gather rows=1000 pool_gb=0.0001
bad topk_version "topk: version 7 is not 1 to 6" --kernel topk version=1,7
bad topk_k_over_ctx "batch=16 ctx=100 k=200" --kernel topk ctx=100 k=200
bad topk_k_zero "k=0: need" --kernel topk k=0
bad topk_dist "dist 'zipf'" --kernel topk dist=normal,zipf
bad indexer_version "version 6 is not 1 to 5" --kernel indexer version=6
bad indexer_tiles_version "version 5 only" --kernel indexer version=4 tiles=8
bad indexer_tiles_negative "tiles=-1" --kernel indexer version=5 tiles=-1
bad indexer_queries_many "need 1 to 8 queries" --kernel indexer version=4 queries=9
bad as_arch_bad "--as-arch: 'sm_75' is not an architecture" --suite default --as-arch sm_75
bad indexer_queries_wide "queries=8 heads=64" --kernel indexer version=5 heads=64 queries=8
bad indexer_queries_odd "queries=3 heads=32" --kernel indexer version=5 heads=32 queries=3
bad indexer_topk "topk version 9 is not 1 to 6" --kernel indexer topk=9
bad indexer_heads "heads 48 is not 32 or 64" --kernel indexer heads=48
bad indexer_k "ctx=1000 k=2048" --kernel indexer ctx=1000
bad fetch_version "version 11 is not 1 to 10" --kernel fetch version=5,11
bad fetch_pages "unknown pages 'huge4k'" --kernel fetch pages=huge4k
bad fetch_pattern "pattern 'zipf'" --kernel fetch pattern=zipf
bad fetch_miss_per_window "miss_per_window 500 must be in" --kernel fetch window_rows=400 miss_per_window=291,500
bad fetch_miss_beyond_rows "window_rows 100000, rows 100)" --kernel fetch rows=100
bad fetch_beside "beside 'gemm' is not none, hbm or alu" --kernel fetch beside=none,gemm
bad fetch_beside_host "beside=hbm needs a version timed on its stream" --kernel fetch version=5,7 beside=hbm
bad fetch_pool_windows "too few 100000-row windows" --kernel fetch version=3 pool_gb=4 rows=16384 pattern=serving
printf 'gather version=1 row_bytes=656\nattention version=8 diag=consumers,sideways\n' > "$tmp/bad.suite"
bad suite_value "diag=sideways" --suite "$tmp/bad.suite"
# The persistent attention versions (25, 26) have no one-side diagnostic variant.
bad attention_diag_v26 "diag=producer: need none" --kernel attention version=23,26 diag=producer
# Nor the versions that merge their splits in the kernel (27-29).
bad attention_diag_v28 "diag=consumers: need none" --kernel attention version=18,28,29 diag=consumers
# A good value gets past the option checks (to the suite, or to the missing device here).
"$bin" --suite default --b2b 20 --reps 3 --out "$tmp/ok" >/dev/null 2>"$tmp/err"
if ! grep -q 'need an integer' "$tmp/err"; then echo "PASS b2b_accepted"; else echo "FAIL b2b_accepted ($(cat "$tmp/err"))"; fi
# --timing: events or kernel; kernel only in a build with CUPTI (else one line naming it, exit 2).
bad timing_word "--timing 'cupti'" --suite default --timing cupti
"$bin" --suite default --timing kernel --check-only >/dev/null 2>"$tmp/err"; rc=$?
if [ -n "$(make -s --no-print-directory print-CUPTI_LIB)" ]; then
  if [ "$rc" -eq 0 ]; then echo "PASS timing_kernel_with_cupti"; else echo "FAIL timing_kernel_with_cupti ($(cat "$tmp/err"))"; fi
elif [ "$rc" -eq 2 ] && grep -q 'no CUPTI' "$tmp/err"; then echo "PASS timing_kernel_refused_without_cupti"
else echo "FAIL timing_kernel_refused_without_cupti (status $rc: $(cat "$tmp/err"))"; fi
# --timing graph: the attention benchmark's launches only (the others launch on the legacy stream,
# which a capture cannot record): any other kernel refused before the device, naming its line.
bad timing_graph_kernel "--timing graph: kernel 'fetch' launches on the legacy stream" --kernel fetch --timing graph
printf 'attention version=8 batch=16\nverify version=8\n' > "$tmp/graph.suite"
bad timing_graph_suite_line "--timing graph: $tmp/graph.suite:2: kernel 'verify'" --suite "$tmp/graph.suite" --timing graph
for args in "--suite attention-graph --timing graph" "--suite default --only attention --timing graph" \
            "--suite attention-graph --timing graph --timing events" "--suite default --timing kernel --timing graph --only attention"; do
  "$bin" $args --check-only >/dev/null 2>"$tmp/err"; rc=$?
  if [ "$rc" -eq 0 ] && grep -q 'pass the device-free checks' "$tmp/err"; then echo "PASS timing_graph_accepted ($args)"
  else echo "FAIL timing_graph_accepted ($args: status $rc: $(cat "$tmp/err"))"; fi
done
# The last --timing word counts: events after graph takes graph back, so a fetch line passes.
"$bin" --suite default --timing graph --timing events --check-only >/dev/null 2>"$tmp/err"; rc=$?
if [ "$rc" -eq 0 ]; then echo "PASS timing_last_word_counts"; else echo "FAIL timing_last_word_counts (status $rc: $(cat "$tmp/err"))"; fi
# Every committed suite passes the device-free checks of all its points (--check-only: exit 0,
# nothing written).
for f in kernels/suites/*.suite; do
  "$bin" --suite "$f" --check-only --out "$tmp/ok3" >/dev/null 2>"$tmp/err"; rc=$?
  if [ "$rc" -eq 0 ] && grep -q 'pass the device-free checks' "$tmp/err" && [ ! -e "$tmp/ok3" ]; then echo "PASS suite_checks ($f)"
  else echo "FAIL suite_checks ($f: status $rc: $(head -c 300 "$tmp/err"))"; fi
done
for args in "--kernel attention version=8,10 diag=producer,consumers" \
            "--kernel gather version=4 warps=2" "--kernel topk version=1,5 dist=binary,sorted" "--kernel indexer topk=1,5" "--kernel indexer version=5 tiles=0,8" "--kernel indexer version=5 heads=32 queries=1,2,4,8"; do
  "$bin" $args --out "$tmp/ok2" >/dev/null 2>"$tmp/err"; rc=$?
  if [ "$rc" -ne 2 ]; then echo "PASS good_values_pass ($args)"; else echo "FAIL good_values_pass ($args: $(cat "$tmp/err"))"; fi
done
