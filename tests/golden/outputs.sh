#!/bin/sh
# tests/golden/outputs.sh DIR: writes the project's reference outputs into DIR, one file each.
# tests/cli_golden.sh compares them with the committed copies in tests/golden/ byte for byte, so
# a change that moves any of them shows up; a change of output that is meant says why in its
# commit and refreshes the copies with `sh tests/golden/outputs.sh tests/golden`.
# Wall-clock figures are left out (dhsim's table prints them; the JSON has them only with --wall).
set -e
D=$1
[ -n "$D" ] && mkdir -p "$D" || { echo "usage: outputs.sh DIR" >&2; exit 2; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
nowall() { grep -v -e '^wall'; }
# The outputs record the commit the tools were built from (JSON "commit", HDF5 attribute
# "commit"); it changes with every commit, so the copies hold COMMIT in its place.
C=$(bin/dhsim --version | cut -d' ' -f2)
uncommit() { for f in "$D"/*; do case "$f" in *.sh) ;; *) sed -i "s|\"$C\"|\"COMMIT\"|g" "$f" ;; esac; done; }

# make run: the table and its JSON.
bin/dhsim --compare --json "$D/run-compare.json" | nowall > "$D/run-compare.txt"
# Timelines (TSV and the HDF5 file as h5dump prints it) of a plain and a speculative policy.
bin/dhsim --policy hisparse,adaptive+dflash2 --steps 40 --timeline "$T/tl" --quiet --json "$D/timeline.json"
cp "$T/tl.tsv" "$D/timeline.tsv"
h5dump "$T/tl.h5" | sed '1s/".*"/"timeline.h5"/' > "$D/timeline.h5dump"
# A load step, the other speculative mode, the oracle and hisparse-spec.
bin/dhsim --policy adaptive,hisparse --steps 160 --set workload.mode=step \
    --set workload.step_times=0,2 --set workload.step_concurrency=16,256 --quiet --json "$D/loadstep.json"
bin/dhsim --policy hisparse+dspark,hisparse-spec+dflash2,resident+dflash2 --steps 30 --quiet --json "$D/spec.json"
# DeepSeek-V4.1-Flash with DSpark.
bin/dhsim --config models/instances/dsv41flash-h200x4.ini --policy resident+dspark,adaptive+dspark \
    --steps 20 --quiet --json "$D/dsv41flash.json"
# A latency search (short runs: 60 steps hold a steady state for HiSparse, see sim/search.h).
bin/dhsim --policy hisparse --steps 60 --search-latency 40 --quiet --json "$D/search.json" > "$D/search.txt" 2> /dev/null
# Open-loop arrivals.
bin/dhsim --policy adaptive --steps 60 --set workload.mode=open --set workload.rate=400 --set workload.arrival=gamma --quiet --json "$D/open.json"
# Trace tools: a small generated trace, its info, check and statistics.
bin/dhtrace gen --preset glm51-longbench --requests 2 --output 40 -o "$T/small.h5" > /dev/null
bin/dhtrace info "$T/small.h5" | sed "s|$T/||g" > "$D/trace-info.txt"
bin/dhtrace stats "$T/small.h5" | sed "s|$T/||g" > "$D/trace-stats.txt"
bin/dhsim --trace "$T/small.h5" --policy hisparse,adaptive,oracle --steps 30 --concurrency 16 --quiet \
    --json - | sed "s|$T/||g; s|\"config_digest\": \"[0-9a-f]*\"|\"config_digest\": \"(of the trace's temporary path)\"|" > "$D/trace-replay.json"
# The replay validation tables (simulator against the committed GPU replays).
for r in replay-glm53-16x100k replay-glm53-16x100k-verify-adaptive replay-glm53-64x25k replay-glm53-64x25k-verify; do
  sh kernels/replay/validate.sh models/hw/h200.ini measurements/h200/$r.csv "$T/v-$r" > "$D/validate-$r.txt" 2>&1 || true
done
uncommit
