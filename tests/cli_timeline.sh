#!/bin/sh
# tests/cli_timeline.sh: kernels/replay/timeline.sh on a hand-made timeline whose overlaps are
# worked out here: two layers of one step, the compute stream busy over [0, 50] and [100, 150]
# for layer 0, [150, 180] and [200, 260] for layer 1; fetches [0, 100] (overlap 50) and
# [100, 200] (overlap 50 + 30 = 80), 80 and 70 us alone: 200 us of fetch per step, 130 of it
# beside compute, 50 extra, 0.385 per unit of overlap. A step outside the range is left out;
# an unreadable file is one error line.
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
ok() { echo "PASS $1"; }
bad() { echo "FAIL $1${2:+: $2}"; }
H="config_id,mode,step,layer,fetch_rows,fetch_start_us,fetch_end_us,wait_us,attn_start_us,layer_end_us"
printf '# test\n%s\nc1,plain,4,0,1000,0,100,50,100,150\nc1,plain,4,1,3000,100,200,180,200,260\nc1,plain,2,0,9,0,900,1,900,901\n' "$H" > "$T/tl.csv"
printf '%s\nc1,plain-fetch-only,4,0,1000,0,80,0,80,81\nc1,plain-fetch-only,4,1,3000,81,151,90,151,152\n' "$H" > "$T/alone.csv"
out=$(sh kernels/replay/timeline.sh "$T/tl.csv" "$T/alone.csv" | awk '$1 == "c1"')
set -- $out
if [ "$2" = 1 ] && [ "$3" = 0.20 ] && [ "$4" = 0.13 ] && [ "$5" = 2.0 ] && [ "$6" = 2000 ] && [ "$7" = 0.15 ] && [ "$8" = 0.385 ]
then ok timeline_overlap; else bad timeline_overlap "$out"; fi
# Without the alone file: the same first six columns, no ratio.
out=$(sh kernels/replay/timeline.sh "$T/tl.csv" | awk '$1 == "c1"')
set -- $out
if [ "$3" = 0.20 ] && [ "$4" = 0.13 ] && [ $# -eq 6 ]; then ok timeline_without_alone; else bad timeline_without_alone "$out"; fi
sh kernels/replay/timeline.sh "$T/nothere.csv" > "$T/out" 2> "$T/err"; rc=$?
if [ $rc -ne 0 ] && [ "$(wc -l < "$T/err")" -eq 1 ] && grep -q "nothere.csv" "$T/err" && [ ! -s "$T/out" ]
then ok timeline_missing_file; else bad timeline_missing_file "rc=$rc $(cat "$T/err")"; fi
