#!/bin/sh
# profile.sh: Nsight Compute on one warm launch of one dhbench grid point: the speed-of-light,
# launch, occupancy, warp-state and scheduler sections as text, and the SASS lines with their
# stall samples as CSV (built with -lineinfo, so each line names its source line).
#   sh kernels/profile.sh OUT KERNEL_REGEX KERNEL key=value ...
#   sh kernels/profile.sh prof/v6b1 attn6 attention version=6 format=fp8 batch=1 k=2048
# Writes OUT.ncu-rep, OUT.txt (the sections) and OUT-sass.csv. The clocks are left as they are
# (--clock-control none), so durations match what dhbench measures. The first two launches of
# the regex are skipped: the first is the launch dhbench checks against the CPU reference.
out=${1:?usage: profile.sh OUT KERNEL_REGEX KERNEL key=value ...}
regex=${2:?kernel regex}
shift 2
[ $# -ge 1 ] || { echo "profile.sh: no dhbench kernel given" >&2; exit 2; }
command -v ncu >/dev/null 2>&1 || { echo "profile.sh: ncu (Nsight Compute) not on PATH" >&2; exit 1; }
[ -x bin/dhbench ] || sh kernels/build.sh || exit 1
mkdir -p "$(dirname "$out")"
ncu --clock-control none -f -o "$out" -k "regex:$regex" --launch-skip 2 --launch-count 1 \
  --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
  --section SchedulerStats --section MemoryWorkloadAnalysis --section SourceCounters \
  ./bin/dhbench --kernel "$@" --reps 1 --quick >/dev/null || exit 1
ncu --import "$out.ncu-rep" --page details > "$out.txt" || exit 1
ncu --import "$out.ncu-rep" --page source --csv --print-source sass > "$out-sass.csv" 2>/dev/null ||
  echo "profile.sh: this ncu cannot print the source page; $out.ncu-rep holds it" >&2
echo "profile.sh: wrote $out.txt"
