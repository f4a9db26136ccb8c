#!/bin/sh
# Builds bin/dhreplay with nvcc and a C compiler only (no pkg-config).
#   sh kernels/replay/build.sh
# Needs the headers and library of libinih (ini.h, libinih.so) and the Random123 headers, as
# the trace generator and the configuration reader use them: from the Debian packages
# (libinih-dev, librandom123-dev) by default, or from a copy: INIH_INC=DIR INIH_LIB=DIR
# R123_INC=DIR (DIR/Random123/philox.h). NVCC, CUDA_ARCH (sm_90) and CC may be set.
# The kernels are the ones of bin/dhbench: dhreplay.cu includes their sources, and the
# driver's helpers come from kernels/dhbench.cu compiled with its main renamed.
set -e
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
ARCH=${CUDA_ARCH:-sm_90}
CC=${CC:-cc}
INC=""
[ -n "$INIH_INC" ] && INC="$INC -I$INIH_INC"
[ -n "$R123_INC" ] && INC="$INC -I$R123_INC"
LIBS="-linih"
[ -n "$INIH_LIB" ] && LIBS="-L$INIH_LIB -Xlinker -rpath -Xlinker $INIH_LIB -linih"
B=build/replay
mkdir -p $B bin
objs=""
for c in kernels/replay/rp_host.c analysis/rcfg.c sim/hotbuf.c sim/model.c sim/pol.c sim/pol_resident.c sim/pol_hisparse.c sim/pol_adaptive.c \
         sim/pol_oracle.c sim/mbatch.c sim/belady.c sim/spec.c sim/specrun.c sim/union.c \
         sim/hw.c sim/cost.c sim/step.c sim/res.c sim/evq.c traces/gen.c traces/sel.c common/cfg.c common/dh_err.c common/mem.c common/path.c \
         kernels/kref.c; do
  o=$B/$(echo "$c" | tr / _ | sed 's/\.c$/.o/')
  $CC -O2 -std=c11 -D_GNU_SOURCE -I. $INC -c "$c" -o "$o" &
  objs="$objs $o"
done
"$NVCC" -O3 -std=c++17 -arch="$ARCH" -lineinfo -I. -c kernels/replay/dhreplay.cu -o $B/dhreplay.cu.o &
"$NVCC" -O3 -std=c++17 -arch="$ARCH" -I. -Dmain=dhbench_main -c kernels/dhbench.cu -o $B/dhbench_lib.cu.o &
# Attention versions 6-10 and indexer version 5 use wgmma, which only the sm_90a target has (as
# in bin/dhbench).
wg=""
for cu in kernels/*_wgmma.cu; do
  o=$B/$(basename "$cu" .cu).cu.o
  "$NVCC" -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I. -c "$cu" -o "$o" &
  wg="$wg $o"
done
wait
for o in $objs $B/dhreplay.cu.o $B/dhbench_lib.cu.o $wg; do [ -f "$o" ] || { echo "build failed: $o"; exit 1; }; done
"$NVCC" -arch="$ARCH" -o bin/dhreplay $B/dhreplay.cu.o $B/dhbench_lib.cu.o $wg $objs -lcublasLt -lpthread -lm $LIBS
echo "built bin/dhreplay"
