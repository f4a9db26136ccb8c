#!/bin/sh
# The simulator on configurations of the GPU replay (kernels/replay/configs.ini defines them), one
# per-step timeline each (OUTDIR/CONFIG.tsv), in-process in bin/dhcal:
#   sh kernels/replay/simrun.sh PROFILE OUTDIR CONFIG... [-- --set SECTION.KEY=VALUE...]
[ $# -ge 3 ] || { echo "usage: simrun.sh PROFILE OUTDIR CONFIG... [-- --set SECTION.KEY=VALUE...]" >&2; exit 1; }
P=$1 O=$2; shift 2; exec bin/dhcal simulate --profile "$P" --out "$O" "$@"
