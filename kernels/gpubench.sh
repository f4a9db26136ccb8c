#!/bin/sh
# Runs a dhbench suite on the local CUDA GPU, one process per kernel (so that a kernel that
# faults cannot take the others' results with it), and writes one CSV per kernel to DIR.
#   sh kernels/gpubench.sh DIR [SUITE] [extra dhbench options]
# Builds bin/dhbench with kernels/build.sh (nvcc only) when it is missing. DHBENCH_TIMEOUT=S
# stops any one kernel's process after S seconds (its measurements so far stay in DIR/*.csv.tmp).
dir=${1:?usage: gpubench.sh DIR [SUITE] [options]}
suite=${2:-default}
[ $# -ge 2 ] && shift 2 || shift $#
[ -x bin/dhbench ] || sh kernels/build.sh || exit 1
mkdir -p "$dir"
status=0
for k in $(sed -e 's/#.*//' "kernels/suites/$suite.suite" | awk 'NF {print $1}' | awk '!seen[$0]++'); do
  if [ -n "$DHBENCH_TIMEOUT" ]; then
    timeout "$DHBENCH_TIMEOUT" ./bin/dhbench --suite "$suite" --only "$k" --out "$dir" "$@" || status=1
  else
    ./bin/dhbench --suite "$suite" --only "$k" --out "$dir" "$@" || status=1
  fi
done
exit $status
