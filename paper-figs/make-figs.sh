#!/bin/sh
# make-figs.sh: regenerate the paper's four results as figures (make figs).
#
# Each figure runs bin/dhsim on its configuration (figure 3, two placements,
# is one bin/dhsweep sweep), keeps the figures it reads under paper-figs/data/
# (JSON from dhsim and dhsweep, TSV for gnuplot) and draws a PNG and a PDF with gnuplot.
# Run from the repository root; FIGS="1 4" picks figures. Every run is
# deterministic: the same seed gives the same data files (a sweep's table
# also records the commit that made it). Figure 2's loop stays a loop: each
# bound is a --search-latency bisection, runs that depend on each other, not
# a sweep of fixed points.
set -eu
cd "$(dirname "$0")"
SIM=../bin/dhsim
[ -x "$SIM" ] && [ -x ../bin/dhsweep ] || { echo "make-figs: build first (make)" >&2; exit 1; }
mkdir -p data
FIGS=${FIGS:-"1 2 3 4"}
paper() { # paper SECTION KEY: a published figure from models/paper-results.ini
    awk -v s="[$1]" -v k="$2" '$0 == s { in_s = 1; next } /^\[/ { in_s = 0 }
        in_s && $1 == k { print $3; found = 1 } END { exit !found }' ../models/paper-results.ini
}
run() { echo "make-figs: dhsim $*" >&2; (cd .. && ./bin/dhsim "$@"); }
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
# draw NAME: NAME.png and NAME.pdf from NAME.gp (term.gp picks the terminal).
draw() { gnuplot -e "fmt='png'" "$1.gp" && gnuplot -e "fmt='pdf'" "$1.gp"; echo "make-figs: $1.png, $1.pdf" >&2; }
sweep() { echo "make-figs: dhsweep run $1" >&2; (cd .. && ./bin/dhsweep run "$1" --quiet); }
ini() { # ini FILE SECTION KEY: one value of an INI file (the first word after "=")
    awk -v s="[$2]" -v k="$3" '$0 == s { in_s = 1; next } /^\[/ { in_s = 0 }
        in_s && $1 == k { print $3; found = 1; exit } END { exit !found }' "$1"
}

fig1() {
    # Result 1: throughput per decode GPU at 100K context, concurrency 128.
    # --compare runs every built-in policy and Adaptive + DFlash2: SGLang's
    # HiSparse as shipped (static, watermark, dynamic) stands beside Adaptive;
    # hisparse-spec is HiSparse with speculation but none of the paper's mechanisms.
    run --compare --quiet --json paper-figs/data/headline.json
    # The other speculative columns over as many output tokens as the plain
    # ones, after the same warm-up as --compare's speculative column.
    tokens=$(./jget.sh data/headline.json adaptive measured_tokens)
    warm=$(./jget.sh data/headline.json adaptive+dflash2 warmup_steps)
    run --policy hisparse-spec,hisparse+dflash2,resident+dflash2 --quiet \
        --set workload.measure_tokens="$tokens" --set workload.warmup_steps="$warm" \
        --json paper-figs/data/headline-spec.json
    {
        printf 'label\ttok_s_per_gpu\tci95_half\n'
        for p in resident hisparse oracle sglang-hisparse sglang-watermark sglang-dynamic adaptive adaptive+dflash2; do
            printf '%s\t%s\t%s\n' "$p" "$(./jget.sh data/headline.json $p tok_s_per_gpu)" "$(jci data/headline.json $p tok_s_per_gpu)"
        done
        for p in hisparse-spec hisparse+dflash2 resident+dflash2; do
            printf '%s\t%s\t%s\n' "$p" "$(./jget.sh data/headline-spec.json $p tok_s_per_gpu)" \
                "$(jci data/headline-spec.json $p tok_s_per_gpu)"
        done
    } > data/headline.tsv
    hs=$(./jget.sh data/headline.json hisparse tok_s_per_gpu)
    ad=$(./jget.sh data/headline.json adaptive tok_s_per_gpu)
    {
        printf 'paper_tok\t%s\n' "$(paper headline adaptive_dflash2_tok_s_per_gpu)"
        printf 'paper_vs_hisparse_tok\t%s\n' "$(awk -v h="$hs" -v r="$(paper headline ratio_vs_hisparse)" 'BEGIN { print h * r }')"
        printf 'paper_vs_adaptive_tok\t%s\n' "$(awk -v a="$ad" -v r="$(paper headline ratio_vs_adaptive_plain)" 'BEGIN { print a * r }')"
    } > data/headline-marks.tsv
    draw fig1-headline
}

fig2() {
    # Result 2: under the same per-token latency bound (TPOT p90), the largest
    # concurrency each system sustains in steady state and its output. Each
    # point is one --search-latency (sim/search.h): its table row says why the
    # search stopped -- the latency bound, or memory (admission could not hold
    # one more request per GPU, whatever its latency) -- and whether the bound
    # lies inside the statistic's CI (the answer may move by one per GPU).
    # The search prints one line per run on stderr (progress).
    steps=${FIG2_STEPS:-150}
    printf 'bound_ms\thisparse_conc\thisparse_tok\tadaptive_dflash2_conc\tadaptive_dflash2_tok\thisparse_stop\tadaptive_dflash2_stop\thisparse_noisy\tadaptive_dflash2_noisy\n' > data/latency.tsv
    for b in ${BOUNDS:-30 40 60 90}; do
        # The two searches of a bound run side by side (each is one thread).
        run --policy hisparse --search-latency $b --steps $steps --json paper-figs/data/latency-hs-$b.json > data/latency-hs-$b.txt &
        hs_pid=$!
        run --policy adaptive+dflash2 --search-latency $b --steps $steps --json paper-figs/data/latency-ad-$b.json > data/latency-ad-$b.txt
        wait $hs_pid
        # search_row FILE POLICY FIELD: a field of the search table's row (7: stop reason).
        search_row() { awk -v p="$2" -v f="$3" '$1 == p { print $f; exit }' "$1"; }
        noisy() { grep -q "^note: $2: the bound lies inside" "$1" && echo 1 || echo 0; }
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' $b \
            "$(./jget.sh data/latency-hs-$b.json hisparse concurrency)" "$(./jget.sh data/latency-hs-$b.json hisparse tok_s_per_gpu)" \
            "$(./jget.sh data/latency-ad-$b.json adaptive+dflash2 concurrency)" "$(./jget.sh data/latency-ad-$b.json adaptive+dflash2 tok_s_per_gpu)" \
            "$(search_row data/latency-hs-$b.txt hisparse 7)" "$(search_row data/latency-ad-$b.txt adaptive+dflash2 7)" \
            "$(noisy data/latency-hs-$b.txt hisparse)" "$(noisy data/latency-ad-$b.txt adaptive+dflash2)" \
            >> data/latency.tsv
        echo "make-figs: figure 2, bound $b ms: $(tail -1 data/latency.tsv | cut -f2,4,6,7 | tr '\t' ' ') (hisparse, adaptive+dflash2 concurrency; stop reasons)" >&2
    done
    {
        printf 'paper_conc_ratio\t%s\n' "$(paper result2 max_concurrency_ratio)"
        printf 'paper_out_low\t%s\n' "$(paper result2 output_ratio_low)"
        printf 'paper_out_high\t%s\n' "$(paper result2 output_ratio_high)"
        printf 'steps\t%s\n' "$steps"
    } > data/latency-marks.tsv
    draw fig2-latency
}

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
    host=$(cd .. && ./bin/dhsim --config $cfg --memory | awk '/weights computed from the model/ { print $(NF - 1) }')
    hbm=$(awk -v w="$host" 'BEGIN { printf "%.0f", w + 49e9 }')
    rm -rf data/dsv41-sweep
    cat > data/dsv41.sweep.ini <<EOF
; Written by make-figs.sh (figure 3): the Engram tables in host memory, then in HBM.
[sweep]
config = $cfg
policies = resident+dspark,adaptive+dspark
steps = ${FIG3_STEPS:-60}
output = paper-figs/data/dsv41-sweep
[axes]
instance.weights_per_gpu_bytes = $host,${ENGRAM_HBM_WEIGHTS:-$hbm}
EOF
    sweep paper-figs/data/dsv41.sweep.ini
    {
        printf 'placement\tresident_dspark\tadaptive_dspark\tresident_conc\tadaptive_conc\tresident_ci95_half\tadaptive_ci95_half\n'
        i=0
        for v in host hbm; do
            j=$(ls data/dsv41-sweep/points/p00000$i-s*.json)
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "Engram tables in $v" \
                "$(./jget.sh $j resident+dspark tok_s_per_gpu)" \
                "$(./jget.sh $j adaptive+dspark tok_s_per_gpu)" \
                "$(./jget.sh $j resident+dspark mean_active)" \
                "$(./jget.sh $j adaptive+dspark mean_active)" \
                "$(jci $j resident+dspark tok_s_per_gpu)" \
                "$(jci $j adaptive+dspark tok_s_per_gpu)"
            i=$((i + 1))
        done
    } > data/dsv41.tsv
    printf 'paper_ratio\t%s\n' "$(paper result3 ratio_vs_resident_dspark)" > data/dsv41-marks.tsv
    draw fig3-dsv41
}

fig4() {
    # Low load (2 requests per GPU) long enough for optional residency to
    # fill, then the instance steps to concurrency 128 (16 per GPU), then to
    # 960 (120 per GPU), where admission needs the memory optional rows hold.
    # Both policies run for the same simulated time (their steps differ in length).
    levels="16,128,960"; times="0,6,12"; end_s=30
    run --policy adaptive,hisparse --steps 2000 --set workload.max_time_s=$end_s --quiet \
        --set workload.mode=step --set workload.step_times=$times \
        --set workload.step_concurrency=$levels --set workload.output_len=2000 \
        --set workload.output_len_max=2000 \
        --json paper-figs/data/loadstep.json --timeline paper-figs/data/loadstep
    for p in adaptive hisparse; do
        # Host fetches over a sliding window of 10 steps: missed / selected rows.
        ./tlcols.sh data/loadstep.tsv $p t_start_s selected_rows missed_rows | awk -F'\t' '
            { t[NR] = $1; s[NR] = $2; m[NR] = $3; S += $2; M += $3
              if (NR > 10) { S -= s[NR-10]; M -= m[NR-10] }
              if (NR >= 10 && S > 0) printf "%.4f\t%.4f\n", t[NR], 100 * M / S }'
        printf '\n\n'
    done > data/loadstep-fetch.tsv
    for p in adaptive hisparse; do
        ./tlcols.sh data/loadstep.tsv $p t_start_s active
        printf '\n\n'
    done > data/loadstep-active.tsv
    ./tlcols.sh data/loadstep.tsv adaptive t_start_s hbm_weights hbm_workspace hbm_indexer hbm_protected hbm_optional |
        awk -F'\t' '{ a = ($2 + $3) / 1e9; b = a + $4 / 1e9; c = b + $5 / 1e9; d = c + $6 / 1e9
                      printf "%.4f\t%.3f\t%.3f\t%.3f\t%.3f\n", $1, a, b, c, d }' > data/loadstep-hbm.tsv
    {
        printf 'levels\t%s\ntimes\t%s\nend_s\t%s\n' "$levels" "$times" "$end_s"
        echo "$times" | tr ',' '\n' | awk 'NR > 1 { printf "step%d_s\t%s\n", NR - 1, $1 }'
        printf 'paper_hisparse_pct\t%s\n' "$(paper result4 hisparse_budget_fetch_pct)"
        printf 'paper_adaptive_pct\t%s\n' "$(paper result4 adaptive_low_load_fetch_pct)"
    } > data/loadstep-marks.tsv
    draw fig4-loadstep
}

for f in $FIGS; do
    case $f in
        1) fig1 ;; 2) fig2 ;; 3) fig3 ;; 4) fig4 ;;
        spec) sh figspec.sh ;;  # the speculative gain against concurrency (FIGS=spec; figspec.sh)
        *) echo "make-figs: no figure '$f' (1-4, spec)" >&2; exit 2 ;;
    esac
done
