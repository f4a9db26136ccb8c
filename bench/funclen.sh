#!/bin/sh
# bench/funclen.sh [N] [DIR...]: the N longest C/CUDA functions (default 15) of the given folders
# (default sim analysis traces kernels common), as "lines file:function", from Universal Ctags'
# end: field (apt-get install universal-ctags). Used to record the restructuring's before/after.
n=${1:-15}; [ $# -gt 0 ] && shift
dirs=${*:-sim analysis traces kernels common}
ctags -x --_xformat='%N %F %n %{end}' --kinds-C=f --kinds-C++=f --languages=C,C++ --map-C++=+.cu -R $dirs 2>/dev/null |
  awk '$4 != "" { printf "%6d %s:%s\n", $4 - $3 + 1, $2, $1 }' | sort -rn | head -n "$n"
