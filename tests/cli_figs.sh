#!/bin/sh
# tests/cli_figs.sh: make figs (paper-figs/make-figs.sh) on a short setting, written to a
# temporary folder (FIGS_OUT), never over paper-figs/:
#   - every figure's PNG and PDF is written (their magic bytes), the data files have the
#     columns that the gnuplot scripts and paper-figs/results.py read, and the script prints
#     its progress (a line per chain step, the status line) and its wall and CPU time;
#   - figure 2's searches share their runs: a bound that the lower bounds' runs settle is not
#     searched again, and its row and JSON are what the search itself gives at that bound
#     (dhsim --search-latency, compared field by field and byte for byte); for every bound that
#     was searched, paper-figs/searchlog.awk on the search's own progress lines gives its row;
#     on planted logs it settles a bound, marks one inside the CI, and gives nothing against
#     monotonicity or without the run one above;
#   - a chain that fails makes the script fail with the tool's error line and leaves no half
#     of that chain's table; an unknown figure is an error.
# About 30 CPU s (a search and the figures' short runs). Runs from the repository root.
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
ok() { echo "PASS $1"; }
bad() { echo "FAIL $1${2:+: $2}"; }

# A short setting: figure 1 over 20 steps, figure 2 on 8K prompts with short outputs and
# 122 GB of weights per GPU (Adaptive + DFlash2 is memory-bound at 4 requests per GPU under
# 28 ms, which settles 30 ms), figure 3 over 10 steps, figure 4 over 1 simulated second.
sets="workload.prompt_len=8000 workload.output_len=8 workload.output_len_max=16 instance.weights_per_gpu_bytes=122e9"
mkdir -p "$T/f"
if FIGS_OUT="$T/f" FIG1_STEPS=20 FIG1_WARMUP=5 FIG2_STEPS=40 BOUNDS="28 30" FIG2_SETS="$sets" FIG3_STEPS=10 \
    FIG4_END_S=1 FIG4_TIMES=0,0.2,0.4 STATUS_S=2 sh paper-figs/make-figs.sh > "$T/out" 2> "$T/err"; then
  ok figs_short_run
else bad figs_short_run "$(tail -n 3 "$T/err")"; fi

# Every figure in both formats, each a real PNG / PDF.
miss=
for f in fig1-headline fig2-latency fig3-dsv41 fig4-loadstep; do
  [ "$(head -c 4 "$T/f/$f.png" 2> /dev/null | od -An -c | tr -d ' ')" = '211PNG' ] || miss="$miss $f.png"
  [ "$(head -c 5 "$T/f/$f.pdf" 2> /dev/null)" = '%PDF-' ] || miss="$miss $f.pdf"
done
if [ -z "$miss" ]; then ok figs_png_pdf; else bad figs_png_pdf "missing or not an image:$miss"; fi

# The data files' columns: the header of each TSV, and the column count of every row.
cols() { # cols FILE EXPECTED_HEADER: the header matches and every data row has as many fields
  awk -F'\t' -v want="$2" 'NR == 1 { if ($0 != want) { print "header: " $0; bad = 1 } n = NF; next }
      NF != n { print "row " NR " has " NF " fields"; bad = 1 } END { exit bad }' "$1"
}
e=
cols "$T/f/data/headline.tsv" "$(printf 'label\ttok_s_per_gpu\tci95_half')" > "$T/c" || e="$e headline.tsv ($(cat "$T/c"))"
[ "$(awk 'END { print NR }' "$T/f/data/headline.tsv")" -eq 12 ] || e="$e headline.tsv (not 11 columns of figure 1)"
cols "$T/f/data/latency.tsv" "$(printf 'bound_ms\thisparse_conc\thisparse_tok\tadaptive_dflash2_conc\tadaptive_dflash2_tok\thisparse_stop\tadaptive_dflash2_stop\thisparse_noisy\tadaptive_dflash2_noisy')" > "$T/c" ||
  e="$e latency.tsv ($(cat "$T/c"))"
[ "$(awk 'END { print NR }' "$T/f/data/latency.tsv")" -eq 3 ] || e="$e latency.tsv (not one row per bound)"
cols "$T/f/data/dsv41.tsv" "$(printf 'placement\tresident_dspark\tadaptive_dspark\tresident_conc\tadaptive_conc\tresident_ci95_half\tadaptive_ci95_half\tsteps')" > "$T/c" ||
  e="$e dsv41.tsv ($(cat "$T/c"))"
# Figure 4's gnuplot inputs: two blocks (adaptive, hisparse) of t, value; Adaptive's HBM by part.
for f in loadstep-fetch loadstep-active; do
  awk -F'\t' 'NF > 0 && NF != 2 { exit 1 }' "$T/f/data/$f.tsv" && [ "$(grep -c . "$T/f/data/$f.tsv")" -gt 4 ] || e="$e $f.tsv"
done
awk -F'\t' 'NF != 5 { exit 1 }' "$T/f/data/loadstep-hbm.tsv" || e="$e loadstep-hbm.tsv"
for k in levels times end_s step1_s step2_s steps_adaptive steps_hisparse; do
  grep -q "^$k	" "$T/f/data/loadstep-marks.tsv" || e="$e loadstep-marks.tsv ($k)"
done
for k in steps measured_steps warmup_steps; do grep -q "^$k	" "$T/f/data/headline-marks.tsv" || e="$e headline-marks.tsv ($k)"; done
if [ -z "$e" ]; then ok figs_data_columns; else bad figs_data_columns "$e"; fi

# Progress: every chain's steps, the status line, the time line; nothing written over paper-figs/.
if grep -q '^make-figs: \[[0-9]* s\] fig1: dhsim --compare' "$T/err" && grep -q '^make-figs: \[[0-9]* s\] fig4: done' "$T/err" &&
   grep -q '^make-figs: \[[0-9]* s\] running: ' "$T/err" && grep -q '^search: ' "$T/err" &&
   grep -q '^make-figs: \[[0-9]* s\] done: [0-9]* s wall, [0-9]* s CPU' "$T/err"; then ok figs_progress
else bad figs_progress "$(grep -c . "$T/err") lines"; fi

# Figure 2's shared runs against the search itself: the same row, and the same run as JSON.
row() { awk -v p="$2" '$1 == p { print $2, $3, $4, $5, $6, $7, $8, $9, $10, $11; exit }' "$1"; }
a=$T/f/data/latency-ad-30
if [ "$(row $a.txt adaptive+dflash2 | cut -d' ' -f6)" = memory ] && grep -q 'not searched again' $a.txt && [ ! -e $a.log ]; then
  s=; for kv in $sets; do s="$s --set $kv"; done
  ./bin/dhsim --policy adaptive+dflash2 --search-latency 30 --steps 40 $s --json "$T/d.json" > "$T/d.txt" 2> /dev/null
  if [ "$(row $a.txt adaptive+dflash2)" = "$(row "$T/d.txt" adaptive+dflash2)" ] && cmp -s $a.json "$T/d.json"; then
    ok figs_shared_runs_equal_search
  else bad figs_shared_runs_equal_search "shared: $(row $a.txt adaptive+dflash2); searched: $(row "$T/d.txt" adaptive+dflash2)"; fi
else bad figs_shared_runs_equal_search "30 ms was searched again or not memory-bound: $(cat $a.txt 2> /dev/null)"; fi
e=; n=0
for l in "$T"/f/data/latency-*.log; do
  [ -e "$l" ] || continue
  t=${l%.log}.txt; b=${l##*-}; b=${b%.log}; p=$(awk 'NR == 3 { print $1 }' "$t")
  got=$(awk -v pol="$p" -v b="$b" -f paper-figs/searchlog.awk "$l" | awk '{ print $2, $1, $3, $4, $5, $6, $7, $8, $9 }')
  want=$(row "$t" "$p" | awk '{ print $1, $2, $4, $5, $6, $7, $8, $9, $10 }')
  [ "$got" = "$want" ] || e="$e $(basename "$l"): '$got' vs '$want'"
  n=$((n + 1))
done
if [ -z "$e" ] && [ $n -ge 2 ]; then ok figs_searchlog_own_rows; else bad figs_searchlog_own_rows "$n logs;$e"; fi

# A failing chain: the tool's error line, a failing exit, no table left of that figure's search.
mkdir -p "$T/g"
if FIGS=2 FIGS_OUT="$T/g" FIG2_STEPS=40 BOUNDS=28 FIG2_SETS="$sets workload.no_such_key=1" STATUS_S=2 \
    sh paper-figs/make-figs.sh > /dev/null 2> "$T/err2"; then bad figs_chain_fails "exit 0"
elif grep -q "no_such_key" "$T/err2" && grep -q 'a chain failed' "$T/err2" && ! ls "$T/g/data/" | grep -q '^latency-.*\(txt\|log\)'; then
  ok figs_chain_fails
else bad figs_chain_fails "$(cat "$T/err2"; ls "$T/g/data")"; fi
if FIGS=7 FIGS_OUT="$T/g" sh paper-figs/make-figs.sh 2> "$T/err3"; then bad figs_unknown_figure "exit 0"
elif grep -q "no figure '7'" "$T/err3"; then ok figs_unknown_figure; else bad figs_unknown_figure "$(cat "$T/err3")"; fi

# searchlog.awk on planted logs: a settled bound; no answer where a run below the largest one
# that meets fails (against monotonicity) or where the run one above was never made.
line() { echo "search: hisparse per GPU $1 (concurrency $(($1 * 8))): token_p90 $2 ms [$3] over 84 measured steps (warm-up 16): $4"; }
{ line 1 10.00 9.00,11.00 meets; line 2 20.00 19.00,21.00 meets; line 4 40.00 39.00,41.00 exceeds; line 3 30.00 29.50,30.50 meets; } > "$T/l1"
{ line 1 10.00 9.00,11.00 meets; line 2 50.00 49.00,51.00 exceeds; line 4 30.00 29.00,31.00 meets; line 5 60.00 59.00,61.00 exceeds; } > "$T/l2"
r1=$(awk -v pol=hisparse -v b=35 -f paper-figs/searchlog.awk "$T/l1")
r2=$(awk -v pol=hisparse -v b=30.2 -f paper-figs/searchlog.awk "$T/l1")
r3=$(awk -v pol=hisparse -v b=45 -f paper-figs/searchlog.awk "$T/l2")
r4=$(awk -v pol=hisparse -v b=45 -f paper-figs/searchlog.awk "$T/l1")
if [ "$r1" = "3 24 30.00 [29.50,30.50] latency 4 40.00 16 84 0" ] && [ "$r2" = "3 24 30.00 [29.50,30.50] latency 4 40.00 16 84 1" ] &&
   [ -z "$r3" ] && [ -z "$r4" ]; then ok figs_searchlog_planted
else bad figs_searchlog_planted "'$r1' '$r2' '$r3' '$r4'"; fi
