#!/bin/sh
# cli_harden.sh: crafted inputs of every fault class of the hardening issue, each giving one
# error line naming the file and the problem and a non-zero exit, never a crash, a hang, a
# half-written output or a silent wrong value. Crafted traces come from tests/harden_craft.py
# (h5py). The tools are bin/... unless DHTRACE, DHSIM or DHCAL name others.
# Prints one "PASS name" or "FAIL name" line per case.
DHT=${DHTRACE:-bin/dhtrace}; DHS=${DHSIM:-bin/dhsim}; DHC=${DHCAL:-bin/dhcal}
PY=/usr/bin/python3
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1${2:+: $2}"; }
# err1 NAME NEEDLE CMD...: non-zero exit (no signal), one stderr line containing NEEDLE.
err1() {
  n=$1; needle=$2; shift 2
  timeout 60 "$@" >"$T/out" 2>"$T/err"; rc=$?
  lines=$(wc -l <"$T/err")
  if [ "$rc" -ge 1 ] && [ "$rc" -lt 124 ] && [ "$lines" -eq 1 ] && grep -q -- "$needle" "$T/err"; then pass "$n"
  else fail "$n" "exit $rc, $lines stderr lines: $(head -c 300 "$T/err")"; fi
}

$DHT gen --preset glm51-longbench --requests 2 --layers 2 --group-every 1 --k 80 --prompt 100 --output 9 \
  --keyframe-interval 4 --seed 5 -o "$T/a.h5" >/dev/null 2>"$T/err" || { fail harden_base_trace "$(cat "$T/err")"; exit 0; }
# A trace of the default model's shape, for the simulator.
$DHT gen --preset glm51-longbench --requests 2 --prompt 3000 --output 12 -o "$T/b.h5" >/dev/null 2>"$T/err" ||
  { fail harden_base_trace_sim "$(cat "$T/err")"; exit 0; }
craft() { $PY tests/harden_craft.py "$1" "$T/${2:-a}.h5" "$T/$1.h5" || fail "craft $1"; }

# The trace reader trusts no shape or type: attributes, index fields, trailing rows.
for m in attr_array attr_empty attr_str_array attr_wide_str index_signed index_missing index_wide rows_after_last \
         many_requests huge_output; do craft $m; done
$PY tests/harden_craft.py rows_after_last "$T/b.h5" "$T/rows_after_last_sim.h5" || fail "craft rows_after_last_sim"
err1 attr_array_check "attribute 'n_requests' holds 4 values, expected one" $DHT check "$T/attr_array.h5"
err1 attr_empty_info "attribute 'model' holds 0 values, expected one" $DHT info "$T/attr_empty.h5"
err1 attr_str_array_check "attribute 'generator' holds 3 values, expected one" $DHT check "$T/attr_str_array.h5"
err1 attr_wide_str_check "attribute 'preset' is a string of 1048576 bytes" $DHT check "$T/attr_wide_str.h5"
err1 index_signed_check "/req/0/g/0/index field 'n_added' is not an unsigned integer" $DHT check "$T/index_signed.h5"
err1 index_missing_field "/req/0/g/0/index has 3 fields" $DHT check "$T/index_missing.h5"
err1 index_wide_field "field 'n_added' is not an unsigned integer of at most 32 bits" $DHT stats "$T/index_wide.h5"
# A stream's rows chunk whose deflate stream is valid but inflates to a quarter of the chunk:
# HDF5 alone returns the rest of its chunk buffer as rows (h5py reads it silently).
craft rows_short_chunk
err1 rows_short_chunk_check "a chunk inflates to 16384 bytes where the dataset's chunks hold 65536" $DHT check "$T/rows_short_chunk.h5"
err1 rows_short_chunk_stats "cannot read /req/0/g/0/rows 0..384" $DHT stats "$T/rows_short_chunk.h5"
err1 rows_after_last_check "/req/0/g/0/rows has 387 entries, its index accounts for 384" $DHT check "$T/rows_after_last.h5"
# The simulator reads exactly output_len positions of a stream, never past the last.
err1 rows_after_last_dhsim "rows has" $DHS --trace "$T/rows_after_last_sim.h5" --policy hisparse --steps 40 --concurrency 2 --quiet

# Work sized by the file only after the file is validated: stats rejects what check rejects, fast.
err1 many_requests_stats "dataset '/req/2/g/0/index' is missing" $DHT stats "$T/many_requests.h5"
s0=$(date +%s)
err1 huge_output_stats "has 9 positions, expected output_len 2147483648" $DHT stats "$T/huge_output.h5"
if [ $(( $(date +%s) - s0 )) -le 10 ]; then pass huge_output_stats_fast; else fail huge_output_stats_fast "$(( $(date +%s) - s0 )) s"; fi

# One error line: a truncated trace gives no HDF5 shutdown messages.
head -c 9000 "$T/a.h5" >"$T/trunc.h5"
err1 truncated_one_line "truncated file" $DHS --trace "$T/trunc.h5" --policy hisparse --steps 4 --concurrency 2 --quiet

# Outputs: checked before the run, written whole or not at all, JSON escaped.
small="--policy hisparse --steps 6 --concurrency 4 --set workload.output_len=4 --set workload.output_len_max=8"
err1 json_folder_checked_first "folder '$T/nodir' does not exist" $DHS $small --json "$T/nodir/x.json"
if [ ! -s "$T/out" ]; then pass json_folder_checked_before_run; else fail json_folder_checked_before_run "the run printed its table"; fi
err1 timeline_fails_no_json "folder '$T/nodir' does not exist" $DHS $small --quiet --json "$T/j.json" --timeline "$T/nodir/tl"
if [ ! -e "$T/j.json" ] && [ -z "$(ls "$T" | grep tmp)" ]; then pass timeline_fails_leaves_nothing
else fail timeline_fails_leaves_nothing "$(ls "$T")"; fi
err1 json_is_a_folder "it is a folder" $DHS $small --quiet --json "$T"
cp "$T/b.h5" "$T/q\"uo\\te.h5"
if $DHS --trace "$T/q\"uo\\te.h5" --policy hisparse --steps 4 --concurrency 2 --quiet --json "$T/q.json" 2>"$T/err" &&
   $PY -c 'import json,sys; r=json.load(open(sys.argv[1]))["runs"][0]; assert "q\"uo\\te.h5" in r["source"], r["source"]' "$T/q.json" 2>>"$T/err"
then pass json_escapes_path; else fail json_escapes_path "$(head -c 300 "$T/err")"; fi
mkdir "$T/gen"
$DHT gen --preset glm51-longbench --requests 64 --prompt 20000 --output 400 -o "$T/gen/big.h5" >/dev/null 2>&1 &
pid=$!
sleep 1.5
kill -TERM $pid 2>/dev/null; wait $pid; rc=$?
if [ "$rc" -ne 0 ] && [ -z "$(ls "$T/gen")" ]; then pass gen_killed_leaves_nothing; else fail gen_killed_leaves_nothing "exit $rc: $(ls "$T/gen")"; fi

# Configs: overlong lines, blank values, model keys of reusing kinds, bounds.
{ sed -n '1,/^\[workload\]/p' models/instances/glm53-h200x8.ini
  printf '; %0230d concurrency = 3\n' 0
  sed -n '/^\[workload\]/,$p' models/instances/glm53-h200x8.ini | tail -n +2; } >"$T/long.ini"
err1 cfg_long_line "config '$T/long.ini': line " $DHS --config "$T/long.ini" --steps 2 --quiet
err1 cfg_blank_value "concurrency = ' ' is not a number" $DHS --set "workload.concurrency= " --steps 2 --quiet
sed 's|^select = reuse$|select = reuse\nindexer_heads = nan|' models/glm53.ini >"$T/model.ini"
sed "s|^model = .*|model = $T/model.ini|" models/instances/glm53-h200x8.ini >"$T/inst.ini"
err1 cfg_reuse_kind_nan "indexer_heads = 'nan' is not a number" $DHS --config "$T/inst.ini" --steps 2 --quiet
err1 search_latency_inf "--search-latency 'inf'" $DHS --search-latency inf
err1 search_latency_huge "--search-latency '1e300'" $DHS --search-latency 1e300
long=$(printf 'a%.0s' $(seq 1 5000))
err1 config_path_long "is longer than" $DHS --config "$long"
err1 trace_path_long "aaaa" $DHS --trace "$long" --steps 2

# dhcal: counts are integers in range, predicted times positive and finite.
sed 's/^a\thisparse\tplain\t0\t110\t10$/a\thisparse\tplain\t0\t110\t1e20/' tests/data/sim_small.tsv >"$T/miss.tsv"
err1 dhcal_misses_1e20 "column 'misses' is not a count" $DHC validate --replay tests/data/replay_small.csv --sim "$T/miss.tsv"
sed 's/^a\thisparse\tplain\t0\t110\t10$/a\thisparse\tplain\t0\t0\t10/' tests/data/sim_small.tsv >"$T/zero.tsv"
err1 dhcal_predicted_zero "predicted_us = 0 is outside" $DHC validate --replay tests/data/replay_small.csv --sim "$T/zero.tsv"
sed 's/^a\thisparse\tplain\t0\t110\t10$/a\thisparse\tplain\t0\t1e308\t10/' tests/data/sim_small.tsv >"$T/huge.tsv"
err1 dhcal_predicted_huge "predicted_us = 1e+308 is outside" $DHC validate --replay tests/data/replay_small.csv --sim "$T/huge.tsv"

# A top-k that covers the whole context is rejected, not generated for hours.
sed 's|^topk = 2048$|topk = 200000|' models/glm53.ini >"$T/topk.ini"
sed "s|^model = .*|model = $T/topk.ini|" models/instances/glm53-h200x8.ini >"$T/inst_topk.ini"
err1 topk_above_context "has k = 200000, not below the" $DHS --config "$T/inst_topk.ini" --steps 3 --concurrency 2 --policy hisparse --quiet

# Damaged HDF5 metadata (fuzzing found them: tests/fuzz/RESULTS.md). HDF5 1.10.8 itself loops
# forever or copies past a global heap collection, copies an attribute's data past its object
# header chunk or reads a global heap slot that does not exist (a crash in a plain build, a
# sanitizer report in the sanitized one); the reader's pre-check (traces/h5pre.c) gives one error
# line instead, in dhtrace and in the simulator's open. The needle names the damage found.
for f in tests/fuzz/hdf5-defects/*.h5; do
  d=$(basename "$f" .h5)
  case $d in
    *global-heap*) needle="damaged HDF5 global heap at byte 2048" ;;
    segv-dataset-compact-size-1) needle="object header at byte 1704 (dataset of 2 elements of 8 bytes in compact storage of 0 bytes)" ;;
    oom-dataset-type-size-1) needle="object header at byte 10600 (dataset of 9 elements of 2382364689 bytes in contiguous storage of 153 bytes)" ;;
    oom-attr-vlen-length-1) needle="attribute 'model' (variable-length value of 4294967285 bytes is stored as a heap object of 7)" ;;
    overflow-attr-read-vlen-size-1) needle="attribute 'generator' (variable-length datatype of 1 bytes, expected 16)" ;;
    overflow-attr-exists-1) needle="attribute 'generator' (dataspace of 15112 bytes runs past the message of 72)" ;;
    use-after-free-attr-exists-1) needle="attribute 'model' (datatype of 2836 bytes runs past the message of 64)" ;;
    segv-vlen-conv-1) needle="damaged HDF5 symbol table B-tree (child at byte 8192 is not a symbol node)" ;;
    segv-vlen-conv-2) needle="attribute 'generator_params' (variable-length value names object 63490 of the global heap at byte 2048, which has no such object)" ;;
    segv-dense-heap-address-1) needle="object header at byte 27896 (dense storage's fractal heap at byte 43448 is not one)" ;;
    segv-dense-heap-address-2) needle="object header at byte 15536 (dense storage's fractal heap at byte 18446744073709551360 is not one)" ;;
    segv-chunk-fletcher-size-1) needle="chunk B-tree node at byte 25800 (a chunk of 2 bytes at byte 9213, too small for its filters)" ;;
    oom-chunk-size-1) needle="chunk B-tree node at byte 41520 (a chunk of 4160749584 bytes, its filters make 4)" ;;
    overflow-chunk-skipped-filter-1) needle="chunk B-tree node at byte 17552 (a chunk of 28 bytes, its filters make 55)" ;;
    oom-chunk-size-2) needle="chunk B-tree node at byte 25800 (a chunk of 4194304068 bytes at byte 9341, past the end of the file)" ;;
    uninit-chunk-inflates-short-1) needle="cannot read dataset 'group_k' (HDF5: a chunk inflates to 4 bytes where the dataset's chunks hold 66060284: a damaged chunk or datatype size)" ;;
    oom-driver-info-size-1) needle="superblock (driver information block at byte 256 runs past the end of the file)" ;;
    *) needle="damaged HDF5" ;;
  esac
  err1 "hdf5_defect_$d" "$needle" $DHT check "$f"
  err1 "hdf5_defect_${d}_dhsim" "$needle" $DHS --trace "$f" --steps 2 --quiet
done
# A damaged message in a checksummed (version-2) object header, its checksum recomputed, as a
# crafted file can have it: HDF5's checksum passes, the pre-check finds the damage.
craft forged_compound
err1 forged_compound_members "object header at byte 9520 (compound member 4 has no terminated name)" $DHT check "$T/forged_compound.h5"
craft forged_dspace_rank
err1 forged_dataspace_rank "object header at byte 9520 (dataspace of rank 40)" $DHT check "$T/forged_dspace_rank.h5"
craft gcol_size
err1 gcol_size_past_eof "(a collection of 2147483648 bytes past the end of the file)" $DHT check "$T/gcol_size.h5"
craft forged_chunk_elem
err1 forged_chunk_element_size "object header at byte 9520 (dataset of 17-byte elements in chunks of 18-byte elements)" $DHT check "$T/forged_chunk_elem.h5"
# A version-1 header (no checksum) reached only through a dense group's fractal heap.
craft dense_v1_forged
err1 dense_group_member_header "(dataspace of rank 40)" $DHT check "$T/dense_v1_forged.h5"

# The pre-check is sound: it never rejects a file HDF5 wrote. The tools' own files (traces, one
# with dense groups, a timeline, a sweep table) and h5py files of every structure it walks
# (tests/h5_valid_zoo.py: both file formats, attributes of every class, chunked, compressed,
# compact and variable-length datasets, dense groups, links, deleted objects, grown headers):
# traces must check ok, other files must fail only on the trace schema.
$DHT gen --preset glm51-longbench --requests 12 --layers 2 --group-every 1 --k 80 --prompt 100 --output 9 \
  -o "$T/dense.h5" >/dev/null 2>"$T/err" || fail h5pre_dense_trace "$(cat "$T/err")"
$DHS $small --quiet --timeline "$T/tl" 2>"$T/err" || fail h5pre_timeline "$(cat "$T/err")"
. tests/sweep_fixture.sh
small_sweep "$T/sw.ini" "$T/sw" hisparse 1
bin/dhsweep run "$T/sw.ini" --quiet >/dev/null 2>"$T/err" || fail h5pre_sweep_table "$(cat "$T/err")"
$PY tests/h5_valid_zoo.py "$T/a.h5" "$T/zoo" 2>"$T/err" || fail h5pre_zoo "$(cat "$T/err")"
nt=0; no=0; bad=
craft dense_v1
for f in "$T/a.h5" "$T/b.h5" "$T/dense.h5" "$T/dense_v1.h5" "$T"/zoo/trace-*.h5; do
  nt=$((nt + 1)); $DHT check "$f" >/dev/null 2>"$T/err" || bad="$bad $(basename "$f"): $(head -c 200 "$T/err")"
done
for f in "$T/tl.h5" "$T/sw/results.h5" "$T"/zoo/zoo-*.h5; do
  no=$((no + 1)); $DHT check "$f" >/dev/null 2>"$T/err"; rc=$?
  if [ "$rc" -ge 2 ] || ! grep -q "attribute 'format_version' is missing" "$T/err"; then bad="$bad $(basename "$f"): exit $rc $(head -c 200 "$T/err")"; fi
done
if [ -z "$bad" ] && [ "$nt" -ge 13 ] && [ "$no" -ge 7 ]; then pass "h5pre_accepts_valid_files ($nt traces, $no other files)"
else fail h5pre_accepts_valid_files "$nt traces, $no others:$bad"; fi
