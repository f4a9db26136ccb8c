#!/bin/sh
# Builds bin/dhbench with nothing but the CUDA toolkit, a C compiler and make: no pkg-config,
# no Debian packages. The Makefile is the one build path (its file lists, flags and the
# sm_90a rule for *_wgmma.cu); this script is kept for the command line earlier notes give.
#   sh kernels/build.sh            (NVCC=..., CUDA_ARCHS="80 90", CC=... may be set)
set -e
cd "$(dirname "$0")/.."
exec make bin/dhbench ${NVCC:+NVCC="$NVCC"} ${CUDA_ARCHS:+CUDA_ARCHS="$CUDA_ARCHS"} ${CC:+CC="$CC"} "$@"
