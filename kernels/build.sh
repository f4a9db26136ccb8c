#!/bin/sh
# Builds bin/dhbench with nothing but the CUDA toolkit and a C compiler: no pkg-config, no
# Debian packages (the kernels' CPU references and common/dh_err.c need only libc).
#   sh kernels/build.sh            (NVCC=..., CUDA_ARCH=sm_90 may be set)
set -e
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
ARCH=${CUDA_ARCH:-sm_90}
CC=${CC:-cc}
mkdir -p build/kernels-nvcc bin
objs=""
for c in kernels/*.c common/dh_err.c; do
  o=build/kernels-nvcc/$(basename "$c" .c).o
  $CC -O2 -std=c11 -D_GNU_SOURCE -I. -c "$c" -o "$o"
  objs="$objs $o"
done
cuobjs=""
pids=""
for cu in kernels/*.cu; do
  o=build/kernels-nvcc/$(basename "$cu" .cu).cu.o
  # wgmma (attention versions 6-10, indexer version 5) exists only for sm_90a; every other file
  # is built for $ARCH.
  case "$cu" in
    kernels/*_wgmma.cu) target="-gencode=arch=compute_90a,code=sm_90a" ;;
    *) target="-arch=$ARCH" ;;
  esac
  "$NVCC" -O3 -std=c++17 $target -lineinfo -I. -c "$cu" -o "$o" &
  pids="$pids $!"
  cuobjs="$cuobjs $o"
done
for p in $pids; do wait "$p"; done
"$NVCC" -arch="$ARCH" -o bin/dhbench $cuobjs $objs -lcublasLt -lpthread
echo "built bin/dhbench"
