#!/bin/sh
# heldout-bench.sh: the held-out GPU replays the validation reads beside the calibration's own
# (kernels/calib-bench.sh measures those), on the local GPU, into DIR under the names of
# measurements/h200/, with bin/dhreplay's default kernel versions (the calibrated profile's:
# kernels/replay/README.md); then, with PROFILE, each validated against it (validate.sh):
#   sh kernels/replay/heldout-bench.sh DIR [PROFILE]
# DHREPLAY_OPTS adds options to every replay (e.g. "--attention-version 39").
# The verification steps of HiSparse (budgets 4096, 2048) and of Adaptive + DFlash2 at 16 requests
# x 100K, and the 64 x 25K plain and verification steps (analysis/VALIDATION.md). A profile
# validates only replays of the attention version it was fitted on (dhcal validate refuses
# others), so these are re-run whenever the calibration moves to another version.
# Long: each replay pins an 82 GB host pool (several minutes on an H200 in all).
set -u
O=${1:?usage: heldout-bench.sh DIR [PROFILE]}
mkdir -p "$O"
[ -x bin/dhreplay ] || { echo "heldout-bench.sh: build first: make bin/dhreplay" >&2; exit 1; }
fail=0
# NAME, then dhreplay's options: NAME.csv and dhreplay's stderr in NAME.log.
run() {
  n=$1; shift
  bin/dhreplay ${DHREPLAY_OPTS:-} "$@" --out "$O/$n.csv" 2> "$O/$n.log" ||
    { echo "heldout-bench.sh: failed: bin/dhreplay ${DHREPLAY_OPTS:-} $* ($O/$n.log)" >&2; fail=1; }
}
run replay-glm53-16x100k-verify --steps 32 --run sp4k --run sp2k
run replay-glm53-16x100k-verify-adaptive --steps 32 --run sa6k
run replay-glm53-64x25k --run hs4k-r64
run replay-glm53-64x25k-verify --run sa6k-r64
if [ $# -ge 2 ]; then
  for n in replay-glm53-16x100k-verify replay-glm53-16x100k-verify-adaptive replay-glm53-64x25k replay-glm53-64x25k-verify; do
    [ -s "$O/$n.csv" ] || continue
    sh kernels/replay/validate.sh "$2" "$O/$n.csv" "$O/sim-$n" || fail=1
  done
fi
exit $fail
