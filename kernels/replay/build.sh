#!/bin/sh
# Builds bin/dhreplay with nvcc, a C compiler and make only (no pkg-config, no Debian
# packages): the Makefile's rule, which holds the file lists (kernels/README.md, "Build").
#   sh kernels/replay/build.sh
# Needs the headers and library of libinih (ini.h, libinih.so) and the Random123 headers, as
# the trace generator and the configuration reader use them: from the system by default, or
# from a copy: INIH_INC=DIR INIH_LIB=DIR R123_INC=DIR (DIR/Random123/philox.h). NVCC,
# CUDA_ARCHS (the architectures, default every one from sm_80 that nvcc supports) and CC may be set.
set -e
cd "$(dirname "$0")/../.."
exec make bin/dhreplay ${NVCC:+NVCC="$NVCC"} ${CUDA_ARCHS:+CUDA_ARCHS="$CUDA_ARCHS"} ${CC:+CC="$CC"} \
  ${INIH_INC:+INIH_INC="$INIH_INC"} ${INIH_LIB:+INIH_LIB="$INIH_LIB"} ${R123_INC:+R123_INC="$R123_INC"} "$@"
