#!/bin/sh
# figspec.sh: the speculative gain against concurrency for DFlash2, DSpark and MTP (and MTP
# under SGLang's adaptive steps), GLM-5.3 on 8 x H200, 100K context, HiSparse's hot buffer.
# The gain is output tokens/s per GPU with speculation over the same run without it (the same
# seed: the same lengths and selections). Each point is the mean of SEEDS seeds, its bar their
# range. Run from the repository root after make:
#     sh paper-figs/figspec.sh            (SEEDS="1 2 3", CONCS="8 32 128 256 512", STEPS=40)
# It writes paper-figs/data/figspec-*.json (one per seed and concurrency), data/figspec.tsv
# and figspec.png / figspec.pdf. Deterministic: the same inputs give the same files.
set -eu
cd "$(dirname "$0")"
SIM=../bin/dhsim
[ -x "$SIM" ] || { echo "figspec: build first (make bin/dhsim)" >&2; exit 1; }
SEEDS=${SEEDS:-"1 2 3"}
CONCS=${CONCS:-"8 32 128 256 512"}
STEPS=${STEPS:-40}
mkdir -p data
for c in $CONCS; do
    for s in $SEEDS; do
        echo "figspec: concurrency $c seed $s" >&2
        (cd .. && ./bin/dhsim --quiet --policy hisparse,hisparse+dflash2,hisparse+dspark,hisparse+mtp \
            --concurrency "$c" --seed "$s" --steps "$STEPS" --json "paper-figs/data/figspec-c$c-s$s.json")
        (cd .. && ./bin/dhsim --quiet --policy hisparse+mtp --set spec.adaptive=models/spec/sglang-adaptive.ini \
            --concurrency "$c" --seed "$s" --steps "$STEPS" --json "paper-figs/data/figspec-c$c-s$s-adaptive.json")
    done
done
# One row per (concurrency, mode): gain mean, min, max over the seeds; accepted length mean.
python3 - "$CONCS" "$SEEDS" > data/figspec.tsv <<'PY'
import json, sys
concs, seeds = sys.argv[1].split(), sys.argv[2].split()
modes = [("dflash2", "hisparse+dflash2", ""), ("dspark", "hisparse+dspark", ""),
         ("mtp", "hisparse+mtp", ""), ("mtp-adaptive", "hisparse+mtp", "-adaptive")]
print("concurrency\tmode\tgain_mean\tgain_min\tgain_max\ttokens_per_step\tseeds")
for c in concs:
    for mode, pol, suffix in modes:
        gains, tps = [], []
        for s in seeds:
            base = {r["policy"]: r for r in json.load(open(f"data/figspec-c{c}-s{s}.json"))["runs"]}
            runs = {r["policy"]: r for r in json.load(open(f"data/figspec-c{c}-s{s}{suffix}.json"))["runs"]}
            gains.append(runs[pol]["tok_s_per_gpu"] / base["hisparse"]["tok_s_per_gpu"])
            tps.append(runs[pol]["spec"]["tokens_per_step"])
        print(f"{c}\t{mode}\t{sum(gains)/len(gains):.4f}\t{min(gains):.4f}\t{max(gains):.4f}\t{sum(tps)/len(tps):.4f}\t{len(seeds)}")
PY
gnuplot -e "fmt='png'" figspec.gp && gnuplot -e "fmt='pdf'" figspec.gp
echo "figspec: figspec.png, figspec.pdf" >&2
