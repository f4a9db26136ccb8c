#!/bin/sh
# make-figs.sh: regenerate the paper's four results as figures (make figs).
#
#     sh paper-figs/make-figs.sh           figures 1-4, PNG and PDF, data in paper-figs/data/
#     FIGS="1 4" sh paper-figs/make-figs.sh  some of them (spec: figspec.sh, not in the default)
#     sh paper-figs/make-figs.sh draw      the figures again from the data, without running
#
# Each figure runs bin/dhsim (figure 3, two placements, is one bin/dhsweep
# sweep), keeps the figures it reads under data/ (JSON from dhsim and dhsweep,
# TSV for gnuplot) and draws a PNG and a PDF with gnuplot. Every run is
# deterministic: the same seed gives the same data files (a sweep's table
# also records the commit that made it).
#
# The work is a few independent chains (figure 1; figure 2's search for each
# policy; figure 3; figure 4), run two at a time (JOBS) longest first, so two
# cores stay busy; each chain's simulations use two threads where they have
# two columns or more. A line every STATUS_S seconds (default 15) says what
# is running and for how long, the latency searches print one line per run,
# and the last line gives the wall and CPU time.
#
# Cost, measured with `/usr/bin/time -f '%e %U %S' sh paper-figs/make-figs.sh`: 277 CPU s
# (268 user + 9 sys; per chain, as the script prints: figure 1 117, figure 2 111 for
# Adaptive + DFlash2 and 24 for HiSparse, figure 3 9, figure 4 14), 440 s wall on two cores
# shared with other work (load 8-10). On two free cores that is about 2.5 minutes: the CPU
# time over two lanes, the longest chain (figure 2's Adaptive + DFlash2, one thread) 111 s.
# Measured again on the merged tree (`/usr/bin/time -f '%e %U %S' make figs`, two cores with
# one fuzzing job beside it at nice 10, load about 2): 120 s wall, 222 s CPU (215 user + 7 sys).
# Before: 6-15 minutes (figure 1 alone 234 CPU s at make run's length, figure 2 eight full
# searches of 150-step runs).
#
# Run lengths (the captions in the README state them, results.py reads them
# from the data), chosen so that `make figs` takes about 3 minutes on two
# free cores and every interval stays small beside what a figure shows:
# FIG1_STEPS, FIG1_WARMUP (figure 1: 900 steps, 600 of them measured after a
# 300-step warm-up; make run measures 1500 and gives the same figures within
# the intervals), FIG2_STEPS (each latency-search run: 100 steps; the search
# states its minimum, 50), FIG3_STEPS (60), FIG4_END_S and FIG4_TIMES
# (figure 4's simulated seconds, 20, and the load steps' times, 0,6,12),
# BOUNDS (figure 2's latency bounds, ms), FIG2_SETS (KEY=VALUE overrides of figure 2's
# searches, as --set; tests use them). FIGS_OUT=DIR writes the figures and DIR/data/
# there instead (tests/cli_figs.sh runs a short setting so).
set -eu
FIGDIR=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$FIGDIR")
cd "$ROOT"
OUT=${FIGS_OUT:-paper-figs}
D=$OUT/data
FIG1_STEPS=${FIG1_STEPS:-900}
FIG1_WARMUP=${FIG1_WARMUP:-300}
FIG2_STEPS=${FIG2_STEPS:-100}
FIG3_STEPS=${FIG3_STEPS:-60}
FIG4_END_S=${FIG4_END_S:-20}
FIG4_TIMES=${FIG4_TIMES:-0,6,12}
BOUNDS=${BOUNDS:-"30 40 60 90"}
FIG2_SETS=${FIG2_SETS:-}
JOBS=${JOBS:-2}
STATUS_S=${STATUS_S:-15}
export OUT D FIG1_STEPS FIG1_WARMUP FIG2_STEPS FIG2_SETS FIG3_STEPS FIG4_END_S FIG4_TIMES BOUNDS
[ -x bin/dhsim ] && [ -x bin/dhsweep ] || { echo "make-figs: build first (make bin/dhsim bin/dhsweep)" >&2; exit 1; }
command -v gnuplot > /dev/null || { echo "make-figs: gnuplot not found (apt-get install gnuplot-nox)" >&2; exit 1; }

# ---------------------------------------------------------------- helpers

T0=${MAKE_FIGS_T0:-$(date +%s)}
export MAKE_FIGS_T0=$T0
say() { echo "make-figs: [$(( $(date +%s) - T0 )) s] $*" >&2; }
# status CHAIN TEXT: what a chain is doing now (the status line reads it).
status() { [ -d "${MAKE_FIGS_RUN:-}" ] && printf '%s\t%s\n' "$(date +%s)" "$2" > "$MAKE_FIGS_RUN/$1"; say "$1: $2"; }
# done_chain CHAIN: the chain's end, with the CPU time of its processes (`times`, second line).
done_chain() {
    [ -d "${MAKE_FIGS_RUN:-}" ] && rm -f "$MAKE_FIGS_RUN/$1"
    cpu_s
    say "$1: done ($CPU s CPU)"
}
# cpu_s: CPU, the user + sys seconds of the processes this shell waited for. `times` runs in
# this shell (in a $(...) subshell it would count the subshell's children only: none).
cpu_s() {
    tf=${MAKE_FIGS_RUN:-/tmp}/.times.$$
    times > "$tf"
    CPU=$(awk 'NR == 2 { for (i = 1; i <= 2; i++) { split($i, ms, "m"); s += ms[1] * 60 + ms[2] } printf "%.0f", s }' "$tf")
    rm -f "$tf"
}
paper() { # paper SECTION KEY: a published figure from models/paper-results.ini
    awk -v s="[$1]" -v k="$2" '$0 == s { in_s = 1; next } /^\[/ { in_s = 0 }
        in_s && $1 == k { print $3; found = 1 } END { exit !found }' models/paper-results.ini
}
jget() { sh "$FIGDIR/jget.sh" "$@"; }
tlcols() { sh "$FIGDIR/tlcols.sh" "$@"; }
# jci FILE POLICY KEY: the 95 % half-width of one figure of a `dhsim --json` file or a dhsweep
# point ("ci95_half").
jci() {
    python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
# dhsim --json has "runs"; a dhsweep point has "results", each holding its "run".
runs = d["runs"] if "runs" in d else [x["run"] for x in d["results"]]
r = {x["policy"]: x for x in runs}[sys.argv[2]]
v = r["ci95_half"][sys.argv[3]]
print(0 if v is None else v)' "$@"
}
# draw NAME: OUT/NAME.png and OUT/NAME.pdf from NAME.gp (term.gp picks the terminal). gnuplot runs
# in OUT, where the scripts read data/; the loadpath finds term.gp. The PDF's creation date is
# set to the commit's (cairo 1.16 writes the time of the run and ignores SOURCE_DATE_EPOCH; the
# date has the same length, so the PDF's offsets hold), so the same data give the same bytes.
draw() {
    stamp=$(TZ=UTC git log -1 --date=format-local:%Y%m%d%H%M%S --format=%cd 2> /dev/null || echo 20000101000000)
    for fmt in png pdf; do
        (cd "$OUT" && gnuplot -e "set loadpath '$FIGDIR'" -e "fmt='$fmt'" "$FIGDIR/$1.gp")
    done
    LC_ALL=C sed -i "s|/CreationDate (D:[0-9]\{14\}Z)|/CreationDate (D:${stamp}Z)|" "$OUT/$1.pdf"
    say "$OUT/$1.png, $OUT/$1.pdf"
}
ini() { # ini FILE SECTION KEY: one value of an INI file (the first word after "=")
    awk -v s="[$2]" -v k="$3" '$0 == s { in_s = 1; next } /^\[/ { in_s = 0 }
        in_s && $1 == k { print $3; found = 1; exit } END { exit !found }' "$1"
}

# ---------------------------------------------------------------- figure 1

fig1() {
    # Result 1: throughput per decode GPU at 100K context, concurrency 128.
    # --compare runs every built-in policy and Adaptive + DFlash2: SGLang's
    # HiSparse as shipped (static, watermark, dynamic) stands beside Adaptive;
    # hisparse-spec is HiSparse with speculation but none of the paper's mechanisms.
    len=
    [ -n "$FIG1_STEPS" ] && len="--steps $FIG1_STEPS"
    [ -n "$FIG1_WARMUP" ] && len="$len --set workload.warmup_steps=$FIG1_WARMUP"
    status fig1 "dhsim --compare $len (every policy and Adaptive + DFlash2)"
    ./bin/dhsim --compare --quiet $len --json "$D/headline.json"
    # The other speculative columns over as many output tokens as the plain
    # ones, after the same warm-up as --compare's speculative column.
    tokens=$(jget "$D/headline.json" adaptive measured_tokens)
    warm=$(jget "$D/headline.json" adaptive+dflash2 warmup_steps)
    steps=$(jget "$D/headline.json" adaptive steps)
    status fig1 "dhsim --policy hisparse-spec,hisparse+dflash2,resident+dflash2 (over $tokens tokens per GPU)"
    ./bin/dhsim --policy hisparse-spec,hisparse+dflash2,resident+dflash2 --quiet --steps "$steps" \
        --set workload.measure_tokens="$tokens" --set workload.warmup_steps="$warm" \
        --json "$D/headline-spec.json"
    {
        printf 'label\ttok_s_per_gpu\tci95_half\n'
        for p in resident hisparse oracle sglang-hisparse sglang-watermark sglang-dynamic adaptive adaptive+dflash2; do
            printf '%s\t%s\t%s\n' "$p" "$(jget "$D/headline.json" $p tok_s_per_gpu)" "$(jci "$D/headline.json" $p tok_s_per_gpu)"
        done
        for p in hisparse-spec hisparse+dflash2 resident+dflash2; do
            printf '%s\t%s\t%s\n' "$p" "$(jget "$D/headline-spec.json" $p tok_s_per_gpu)" \
                "$(jci "$D/headline-spec.json" $p tok_s_per_gpu)"
        done
    } > "$D/headline.tsv"
    hs=$(jget "$D/headline.json" hisparse tok_s_per_gpu)
    ad=$(jget "$D/headline.json" adaptive tok_s_per_gpu)
    {
        printf 'paper_tok\t%s\n' "$(paper headline adaptive_dflash2_tok_s_per_gpu)"
        printf 'paper_vs_hisparse_tok\t%s\n' "$(awk -v h="$hs" -v r="$(paper headline ratio_vs_hisparse)" 'BEGIN { print h * r }')"
        printf 'paper_vs_adaptive_tok\t%s\n' "$(awk -v a="$ad" -v r="$(paper headline ratio_vs_adaptive_plain)" 'BEGIN { print a * r }')"
        printf 'steps\t%s\nmeasured_steps\t%s\nwarmup_steps\t%s\n' "$steps" \
            "$(jget "$D/headline.json" adaptive measured_steps)" "$(jget "$D/headline.json" adaptive warmup_steps)"
    } > "$D/headline-marks.tsv"
    draw fig1-headline
    done_chain fig1
}

# ---------------------------------------------------------------- figure 2

# fig2_chain POLICY TAG: the searches of one policy over the bounds, lowest first.
#
# Result 2: under the same per-token latency bound (TPOT p90), the largest
# concurrency each system sustains in steady state and its output. Each point
# is one --search-latency (sim/search.h): its table row says why the search
# stopped -- the latency bound, or memory (admission could not hold one more
# request per GPU, whatever its latency) -- and whether the bound lies inside
# the statistic's CI (the answer may move by one per GPU).
#
# The searches share their runs: a run at a concurrency does not depend on the
# bound (only its judgement does), so where the runs of the lower bounds'
# searches already hold the answer of a higher bound -- the largest
# concurrency that meets it and the one above it failing (searchlog.awk) --
# that bound is not searched again: its row is built from those runs and its
# JSON is the answer's run (a previous answer's, or one plain run, the same
# bytes as the search's). The search's progress lines are kept
# (data/latency-TAG-B.log) for that; the .txt of a bound not searched says so.
fig2_chain() {
    pol=$1; tag=$2
    sets=; logs=; jsons=; hdr=
    for kv in $FIG2_SETS; do sets="$sets --set $kv"; done
    for b in $(printf '%s\n' $BOUNDS | sort -n); do
        json=$D/latency-$tag-$b.json; txt=$D/latency-$tag-$b.txt; log=$D/latency-$tag-$b.log
        rm -f "$log"
        known=
        [ -z "$logs" ] || known=$(awk -v pol="$pol" -v b="$b" -f "$FIGDIR/searchlog.awk" $logs)
        if [ -n "$known" ]; then
            set -- $known
            status "fig2-$tag" "bound $b ms: per GPU $1 met it and $6 failed ($5) in the runs so far: not searched again"
            from=
            for j in $jsons; do
                [ "$(jget "$j" "$pol" concurrency)" = "$2" ] && { from=$j; break; }
            done
            # The copy records the bound it stands for (the runs are the same).
            if [ -n "$from" ]; then sed "s/\"--search-latency\": [0-9.eE+-]*/\"--search-latency\": $b/" "$from" > "$json"
            else ./bin/dhsim --policy "$pol" --concurrency "$2" --steps "$FIG2_STEPS" $sets --quiet --json "$json"; fi
            tok=$(jget "$json" "$pol" tok_s_per_gpu)
            {
                echo "$hdr" | sed "s/ <= [0-9.]* ms / <= $b ms /; s/\$/: not searched again: the runs of the searches at the lower bounds hold the answer (per GPU $1 met $b ms, $6 failed) under the search's own assumption that failing is monotone in concurrency; paper-figs\/searchlog.awk/"
                sed -n 2p "$D/latency-$tag-$prev.txt"
                printf '%-18s %11.0f %7u %12.1f %9s %17s %8s %7s %9s %7u %8u %4u\n' "$pol" "$2" "$1" "$tok" "$3" "$4" "$5" "$6" "$7" "$8" "$9" 0
                [ "${10}" = 1 ] && echo "note: $pol: the bound lies inside the statistic's 95% CI at per GPU $1 or $6: another run length or seed may move the answer by one"
                grep '^stop: \|^run length: ' "$D/latency-$tag-$prev.txt"
            } > "$txt.tmp"
            mv "$txt.tmp" "$txt"
        else
            status "fig2-$tag" "bound $b ms: dhsim --policy $pol --search-latency $b --steps $FIG2_STEPS"
            # The table goes to a temporary file first (a failed search leaves no half of one);
            # the progress lines to the terminal and to the log.
            { rc=0; ./bin/dhsim --policy "$pol" --search-latency "$b" --steps "$FIG2_STEPS" $sets --json "$json" 2>&1 > "$txt.tmp" ||
                  rc=$?; echo $rc > "$txt.rc"; } | tee "$log.tmp" >&2
            rc=$(cat "$txt.rc" 2> /dev/null || echo 1); rm -f "$txt.rc"
            [ "$rc" = 0 ] || { rm -f "$txt.tmp" "$log.tmp"; exit 1; }
            mv "$log.tmp" "$log"; mv "$txt.tmp" "$txt"
            logs="$logs $log"
            hdr=$(sed -n 1p "$txt")
        fi
        prev=$b; jsons="$jsons $json"
        say "fig2-$tag: bound $b ms: concurrency $(jget "$json" "$pol" concurrency), stopped by $(awk -v p="$pol" '$1 == p { print $7; exit }' "$txt")"
    done
    done_chain "fig2-$tag"
}

# fig2_draw: the table of both chains and the figure.
fig2_draw() {
    # search_row FILE POLICY FIELD: a field of the search table's row (7: stop reason).
    search_row() { awk -v p="$2" -v f="$3" '$1 == p { print $f; exit }' "$1"; }
    noisy() { grep -q "^note: $2: the bound lies inside" "$1" && echo 1 || echo 0; }
    {
        printf 'bound_ms\thisparse_conc\thisparse_tok\tadaptive_dflash2_conc\tadaptive_dflash2_tok\thisparse_stop\tadaptive_dflash2_stop\thisparse_noisy\tadaptive_dflash2_noisy\n'
        for b in $(printf '%s\n' $BOUNDS | sort -n); do
            hs=$D/latency-hs-$b; ad=$D/latency-ad-$b
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' $b \
                "$(jget $hs.json hisparse concurrency)" "$(jget $hs.json hisparse tok_s_per_gpu)" \
                "$(jget $ad.json adaptive+dflash2 concurrency)" "$(jget $ad.json adaptive+dflash2 tok_s_per_gpu)" \
                "$(search_row $hs.txt hisparse 7)" "$(search_row $ad.txt adaptive+dflash2 7)" \
                "$(noisy $hs.txt hisparse)" "$(noisy $ad.txt adaptive+dflash2)"
        done
    } > "$D/latency.tsv"
    {
        printf 'paper_conc_ratio\t%s\n' "$(paper result2 max_concurrency_ratio)"
        printf 'paper_out_low\t%s\n' "$(paper result2 output_ratio_low)"
        printf 'paper_out_high\t%s\n' "$(paper result2 output_ratio_high)"
        printf 'steps\t%s\n' "$FIG2_STEPS"
        [ -z "$FIG2_SETS" ] || printf 'sets\t%s\n' "$FIG2_SETS"
    } > "$D/latency-marks.tsv"
    draw fig2-latency
}

# ---------------------------------------------------------------- figure 3

fig3() {
    # Result 3: DeepSeek-V4.1-Flash at 500K context, concurrency 512, DSpark:
    # Adaptive against resident serving. The model is DeepSeek-V4-Flash's public
    # configuration (models/dsv41flash.ini: no public V4.1-Flash was found), whose
    # weights per GPU the instance computes (bin/dhsim --memory). V4.1's Engram
    # tables (196B parameters, not in V4-Flash) are placed in host memory (the
    # computed weights alone) and in HBM: 196B at 1 byte (FP8, assumed) over 4 GPUs
    # = 49 GB more. The paper does not say where the tables live; both are shown.
    # The two placements are one sweep over weights_per_gpu_bytes (dhsweep). Its
    # points' JSON holds the same run objects as dhsim --json, which jget.sh reads.
    cfg=models/instances/dsv41flash-h200x4.ini
    host=$(./bin/dhsim --config $cfg --memory | awk '/weights computed from the model/ { print $(NF - 1) }')
    hbm=$(awk -v w="$host" 'BEGIN { printf "%.0f", w + 49e9 }')
    rm -rf "$D/dsv41-sweep"
    cat > "$D/dsv41.sweep.ini" <<EOF
; Written by make-figs.sh (figure 3): the Engram tables in host memory, then in HBM.
[sweep]
config = $cfg
policies = resident+dspark,adaptive+dspark
steps = $FIG3_STEPS
output = $D/dsv41-sweep
[axes]
instance.weights_per_gpu_bytes = $host,${ENGRAM_HBM_WEIGHTS:-$hbm}
EOF
    status fig3 "dhsweep run $D/dsv41.sweep.ini ($FIG3_STEPS steps, 2 points x 2 policies)"
    ./bin/dhsweep run "$D/dsv41.sweep.ini" --quiet --workers 2
    {
        printf 'placement\tresident_dspark\tadaptive_dspark\tresident_conc\tadaptive_conc\tresident_ci95_half\tadaptive_ci95_half\tsteps\n'
        i=0
        for v in host hbm; do
            j=$(ls "$D"/dsv41-sweep/points/p00000$i-s*.json)
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "Engram tables in $v" \
                "$(jget $j resident+dspark tok_s_per_gpu)" \
                "$(jget $j adaptive+dspark tok_s_per_gpu)" \
                "$(jget $j resident+dspark mean_active)" \
                "$(jget $j adaptive+dspark mean_active)" \
                "$(jci $j resident+dspark tok_s_per_gpu)" \
                "$(jci $j adaptive+dspark tok_s_per_gpu)" "$FIG3_STEPS"
            i=$((i + 1))
        done
    } > "$D/dsv41.tsv"
    printf 'paper_ratio\t%s\n' "$(paper result3 ratio_vs_resident_dspark)" > "$D/dsv41-marks.tsv"
    draw fig3-dsv41
    done_chain fig3
}

# ---------------------------------------------------------------- figure 4

fig4() {
    # Low load (2 requests per GPU) long enough for optional residency to
    # fill, then the instance steps to concurrency 128 (16 per GPU), then to
    # 960 (120 per GPU), where admission needs the memory optional rows hold.
    # Both policies run for the same simulated time (their steps differ in
    # length): 20 s, 8 s of them at the highest load, where both are steady
    # from a second after the step on.
    end_s=$FIG4_END_S
    levels="16,128,960"
    times=$FIG4_TIMES
    status fig4 "dhsim --policy adaptive,hisparse, load steps $levels at $times s, $end_s simulated s"
    # The step cap: 40 a simulated second, above what either policy takes (about 28); the
    # run's cost grows with the cap (the trace holds requests for every step), and a run that
    # reached it before end_s is an error below, not a figure that stops early.
    cap=$(awk -v e="$end_s" 'BEGIN { printf "%d", 40 * e + 50 }')
    ./bin/dhsim --policy adaptive,hisparse --steps $cap --set workload.max_time_s=$end_s --quiet \
        --set workload.mode=step --set workload.step_times=$times \
        --set workload.step_concurrency=$levels --set workload.output_len=2000 \
        --set workload.output_len_max=2000 \
        --json "$D/loadstep.json" --timeline "$D/loadstep"
    for p in adaptive hisparse; do
        t=$(jget "$D/loadstep.json" $p sim_time_s)
        awk -v t="$t" -v e="$end_s" 'BEGIN { exit !(t >= e) }' ||
            { echo "make-figs: figure 4: $p stopped at $t s of $end_s s: the step cap ($cap) was reached" >&2; exit 1; }
    done
    for p in adaptive hisparse; do
        # Host fetches over a sliding window of 10 steps: missed / selected rows.
        tlcols "$D/loadstep.tsv" $p t_start_s selected_rows missed_rows | awk -F'\t' '
            { t[NR] = $1; s[NR] = $2; m[NR] = $3; S += $2; M += $3
              if (NR > 10) { S -= s[NR-10]; M -= m[NR-10] }
              if (NR >= 10 && S > 0) printf "%.4f\t%.4f\n", t[NR], 100 * M / S }'
        printf '\n\n'
    done > "$D/loadstep-fetch.tsv"
    for p in adaptive hisparse; do
        tlcols "$D/loadstep.tsv" $p t_start_s active
        printf '\n\n'
    done > "$D/loadstep-active.tsv"
    tlcols "$D/loadstep.tsv" adaptive t_start_s hbm_weights hbm_workspace hbm_indexer hbm_protected hbm_optional |
        awk -F'\t' '{ a = ($2 + $3) / 1e9; b = a + $4 / 1e9; c = b + $5 / 1e9; d = c + $6 / 1e9
                      printf "%.4f\t%.3f\t%.3f\t%.3f\t%.3f\n", $1, a, b, c, d }' > "$D/loadstep-hbm.tsv"
    {
        printf 'levels\t%s\ntimes\t%s\nend_s\t%s\n' "$levels" "$times" "$end_s"
        echo "$times" | tr ',' '\n' | awk 'NR > 1 { printf "step%d_s\t%s\n", NR - 1, $1 }'
        for p in adaptive hisparse; do printf 'steps_%s\t%s\n' $p "$(jget "$D/loadstep.json" $p steps)"; done
        printf 'paper_hisparse_pct\t%s\n' "$(paper result4 hisparse_budget_fetch_pct)"
        printf 'paper_adaptive_pct\t%s\n' "$(paper result4 adaptive_low_load_fetch_pct)"
    } > "$D/loadstep-marks.tsv"
    draw fig4-loadstep
    done_chain fig4
}

# ---------------------------------------------------------------- the chains

# `make-figs.sh chain NAME` runs one chain (the pool below calls the script so).
# `make-figs.sh draw` draws the figures again from the data (after an edit of a .gp script).
if [ "${1:-}" = draw ]; then
    for f in fig1-headline fig2-latency fig3-dsv41 fig4-loadstep; do draw $f; done
    exit 0
fi
if [ "${1:-}" = chain ]; then
    # A failed chain leaves no status behind (the status line would report it running).
    trap 'rm -f "${MAKE_FIGS_RUN:-/nonexistent}/$2"' EXIT
    case $2 in
        fig1) fig1 ;; fig3) fig3 ;; fig4) fig4 ;;
        fig2-hs) fig2_chain hisparse hs ;;
        fig2-ad) fig2_chain adaptive+dflash2 ad ;;
        *) echo "make-figs: no chain '$2'" >&2; exit 2 ;;
    esac
    exit 0
fi

FIGS=${FIGS:-"1 2 3 4"}
chains=
for f in $FIGS; do
    case $f in
        1) chains="$chains fig1" ;; 2) chains="$chains fig2-ad fig2-hs" ;;
        3) chains="$chains fig3" ;; 4) chains="$chains fig4" ;;
        spec) ;;  # the speculative gain against concurrency (FIGS=spec; figspec.sh), after the others
        *) echo "make-figs: no figure '$f' (1-4, spec)" >&2; exit 2 ;;
    esac
done
mkdir -p "$D"
MAKE_FIGS_RUN=$(mktemp -d)
export MAKE_FIGS_RUN
trap 'rm -rf "$MAKE_FIGS_RUN"' EXIT
# The status line: every STATUS_S seconds, each running chain, what it does and for how long.
(
    # One-second sleeps, so that nothing outlives the script by more than a second.
    n=0
    while sleep 1; do
        [ -d "$MAKE_FIGS_RUN" ] || exit 0
        n=$((n + 1)); [ $n -ge "$STATUS_S" ] || continue; n=0
        now=$(date +%s)
        line=$(for f in "$MAKE_FIGS_RUN"/*; do
                   [ -f "$f" ] && awk -F'\t' -v n="$(basename "$f")" -v now="$now" '{ printf "%s (%d s: %s); ", n, now - $1, $2 }' "$f"
               done)
        [ -n "$line" ] && say "running: ${line%; }"
    done
) &
ticker=$!
# (|| true: under set -e a failing command in the trap would be the script's exit status.)
trap 'kill $ticker 2> /dev/null || true; rm -rf "$MAKE_FIGS_RUN"' EXIT
rc=0
if [ -n "$chains" ]; then
    # Longest first (figure 1, then the searches), two at a time: the order above.
    say "chains:$chains ($JOBS at a time)"
    printf '%s\n' $chains | xargs -P "$JOBS" -n 1 sh "$FIGDIR/make-figs.sh" chain || rc=1
fi
[ $rc -eq 0 ] || { say "a chain failed (its message is above); the figures of the others are written"; exit 1; }
case " $FIGS " in *" 2 "*) fig2_draw ;; esac
case " $FIGS " in *" spec "*) say "figspec.sh"; sh "$FIGDIR/figspec.sh" ;; esac
# The CPU time of every process this script waited for.
cpu_s
say "done: $(( $(date +%s) - T0 )) s wall, $CPU s CPU (user + sys)"
