#!/bin/sh
# kernels/a2a/build.sh: build bin/dha2a with nvcc, cc and make alone, for CUDA machines without
# the Debian packages `make` wants: it finds NCCL and runs the Makefile's rule. Usage (from anywhere):
#   sh kernels/a2a/build.sh
# NCCL is looked for, in order, in $NCCL_HOME, the CUDA toolkit beside nvcc, and Python's
# nvidia-nccl wheel (under site-packages/nvidia/); NCCL_INCLUDE names a header directory to use
# when none of them ships nccl.h (the wheel often ships only libnccl.so.2).
set -e
cd "$(dirname "$0")/../.."
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$NVCC")")}
CC=${CC:-cc}

# The first directory under a Python path's nvidia/ package tree that holds a file named $1
# (wheel layouts differ between CUDA majors: nvidia/nccl/lib, nvidia/cu13/lib, ...).
wheel_dir() {
  python3 - "$1" 2>/dev/null <<'PY' || true
import glob, os, sys
for p in sys.path:
    hits = sorted(glob.glob(os.path.join(p or ".", "nvidia", "**", sys.argv[1]), recursive=True))
    if hits:
        print(os.path.dirname(hits[0]))
        break
PY
}
wheel_inc=$(wheel_dir nccl.h)
wheel_lib=$(wheel_dir 'libnccl.so*')

inc=""
for d in ${NCCL_HOME:+$NCCL_HOME/include} "$CUDA_HOME/include" $wheel_inc ${NCCL_INCLUDE:-}; do
  if [ -f "$d/nccl.h" ]; then inc=$d; break; fi
done
lib=""
for d in ${NCCL_HOME:+$NCCL_HOME/lib64 $NCCL_HOME/lib} "$CUDA_HOME/lib64" $wheel_lib; do
  if ls "$d"/libnccl.so* >/dev/null 2>&1; then lib=$d; break; fi
done
[ -n "$inc" ] || { echo "build.sh: nccl.h not found (set NCCL_HOME or NCCL_INCLUDE)" >&2; exit 1; }
[ -n "$lib" ] || { echo "build.sh: libnccl.so not found (set NCCL_HOME)" >&2; exit 1; }
# A wheel ships libnccl.so.2 without the unversioned link name.
if [ -e "$lib/libnccl.so" ]; then nccl=libnccl.so; else nccl=libnccl.so.2; fi
echo "build.sh: nccl.h from $inc, libnccl from $lib" >&2

# The Makefile's rule builds it (its file list and flags), with NCCL where it was found here.
exec make bin/dha2a NVCC="$NVCC" ${CUDA_ARCHS:+CUDA_ARCHS="$CUDA_ARCHS"} CC="$CC" NCCL_LIB="$lib/$nccl" NCCL_INC="$inc"
