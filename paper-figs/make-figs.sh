#!/bin/sh
# make-figs.sh: regenerate the seed's four results as figures (make figs).
#
# Each figure runs bin/dhsim on its configuration, keeps the figures it reads
# under paper-figs/data/ (JSON from dhsim, TSV for gnuplot) and draws a PNG
# with gnuplot. Run from the repository root; FIGS="1 4" picks figures.
# Every run is deterministic: the same seed gives the same data files.
set -eu
cd "$(dirname "$0")"
SIM=../bin/dhsim
[ -x "$SIM" ] || { echo "make-figs: build first (make)" >&2; exit 1; }
mkdir -p data
FIGS=${FIGS:-"1 2 3 4"}
seed() { # seed SECTION KEY: a published figure from seed.ini
    awk -v s="[$1]" -v k="$2" '$0 == s { in_s = 1; next } /^\[/ { in_s = 0 }
        in_s && $1 == k { print $3; found = 1 } END { exit !found }' seed.ini
}
run() { echo "make-figs: dhsim $*" >&2; (cd .. && ./bin/dhsim "$@"); }

fig4() {
    # Low load (2 requests per GPU) long enough for optional residency to fill,
    # then the instance steps to concurrency 128 (16 per GPU).
    low=16; high=128; t_step=6
    run --policy adaptive,hisparse --steps 700 --quiet \
        --set workload.mode=step --set workload.step_times=0,$t_step \
        --set workload.step_concurrency=$low,$high --set workload.output_len=2000 \
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
    ./tlcols.sh data/loadstep.tsv adaptive t_start_s hbm_weights hbm_workspace hbm_indexer hbm_protected hbm_optional |
        awk -F'\t' '{ a = ($2 + $3) / 1e9; b = a + $4 / 1e9; c = b + $5 / 1e9; d = c + $6 / 1e9
                      printf "%.4f\t%.3f\t%.3f\t%.3f\t%.3f\n", $1, a, b, c, d }' > data/loadstep-hbm.tsv
    {
        printf 'step_time_s\t%s\nconc_low\t%s\nconc_high\t%s\n' $t_step $low $high
        printf 'seed_hisparse_pct\t%s\n' "$(seed result4 hisparse_budget_fetch_pct)"
        printf 'seed_adaptive_pct\t%s\n' "$(seed result4 adaptive_low_load_fetch_pct)"
    } > data/loadstep-marks.tsv
    gnuplot fig4-loadstep.gp
    echo "make-figs: fig4-loadstep.png" >&2
}

for f in $FIGS; do
    case $f in
        1) fig1 ;; 2) fig2 ;; 3) fig3 ;; 4) fig4 ;;
        *) echo "make-figs: no figure '$f' (1-4)" >&2; exit 2 ;;
    esac
done
