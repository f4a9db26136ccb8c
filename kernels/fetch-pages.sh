#!/bin/sh
# Miss fetch on 64 GB host pools of each page size: the same grid on a pinned pool of small
# pages (cudaHostAlloc), then on explicit 2 MB huge pages, then on 1 GB pages where the kernel
# offers them, each in its own dhbench process (a 64 GB pool of reserved huge pages and a
# 64 GB pinned pool do not fit in memory together). Needs root: it reserves the huge pages in
# /sys/kernel/mm/hugepages/ before each huge-page phase and releases them after it. A
# reservation that falls short is reported and that phase runs on what was reserved (1 GB
# pages) or is skipped.
#   sh kernels/fetch-pages.sh OUTDIR [GRID]   (PHASE_TIMEOUT=S bounds each phase, default 600)
# GRID pages (default): versions 1, 5, 7 and the window sweep of 8 on pinned, 2 MB and 1 GB
# pages. GRID host: the host-gather versions 6, 9, 10 on 2 MB pages, then 9, 10 and 1 on a
# cudaHostRegister'd pool of 4 KB pages.
out=${1:?usage: fetch-pages.sh OUTDIR [pages|host]}
grid=${2:-pages}
t=${PHASE_TIMEOUT:-600}
hp=/sys/kernel/mm/hugepages
mkdir -p "$out" || exit 1
[ -x bin/dhbench ] || sh kernels/build.sh || exit 1
common="row_bytes=656 sms=8 window_rows=100000 miss_per_window=291"
stamp() { echo "== $(date +%T) $*"; }

stamp "host: $(uname -r), $(nproc) cores, $(grep MemTotal /proc/meminfo | tr -s ' '), THP $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)"
stamp "huge page sizes: $(ls $hp 2>/dev/null | tr '\n' ' ')"

# reserve SIZE_KB COUNT: writes the count (retrying: the kernel may free and compact memory
# between attempts) and prints how many pages the kernel reserved.
reserve() {
  f=$hp/hugepages-$1kB/nr_hugepages
  [ -w "$f" ] || { echo 0; return; }
  for i in 1 2 3 4 5; do
    echo "$2" > "$f" 2>/dev/null
    [ "$(cat "$f")" -ge "$2" ] && break
    sync; echo 1 > /proc/sys/vm/compact_memory 2>/dev/null
  done
  cat "$f"
}

# phase NAME POOL_GB PAGES: the grid's lines (in $lines, one per line, without pool and pages)
# on one pool, in one process so the pool is made once; CSV in OUTDIR/NAME/fetch-pages-NAME.csv.
phase() {
  stamp "phase $1: pool_gb=$2 pages=$3"
  mkdir -p "$out/$1"
  s=${TMPDIR:-/tmp}/fetch-pages-$1.suite
  echo "$lines" | awk -v p="fetch pool_gb=$2 pages=$3 $common" 'NF {print p, $0}' > "$s"
  timeout "$t" bin/dhbench --suite "$s" --out "$out/$1"
  stamp "phase $1 done"
}

if [ "$grid" = pages ]; then
  lines="version=1,5 pattern=uniform,serving rows=4700,16384,131072
version=7 host_threads=15 host_share=0.3,0.5 pattern=uniform,serving rows=16384,131072
version=8 window=32,64,128,256,512 pattern=uniform,serving rows=16384,131072"
  phase pinned 64 pinned
  n2=$(reserve 2048 30600)
  stamp "2 MB pages reserved: $n2 of 30600"
  if [ "$n2" -ge 30518 ]; then phase huge2m 64 huge2m; else stamp "skipped huge2m: too few 2 MB pages"; fi
  echo 0 > $hp/hugepages-2048kB/nr_hugepages 2>/dev/null
  if [ -d $hp/hugepages-1048576kB ]; then
    n1=$(reserve 1048576 60)
    stamp "1 GB pages reserved: $n1 of 60"
    if [ "$n1" -ge 60 ]; then phase huge1g 64 huge1g
    elif [ "$n1" -ge 8 ]; then phase huge1g $((n1 - 1)) huge1g
    else stamp "skipped huge1g: too few 1 GB pages"; fi
    echo 0 > $hp/hugepages-1048576kB/nr_hugepages 2>/dev/null
  else
    stamp "no 1 GB pages on this kernel"
  fi
elif [ "$grid" = host ]; then
  lines="version=6 host_threads=15 pattern=serving rows=16384,131072
version=9 host_threads=14,15 prefetch=0,16 pattern=serving,uniform rows=16384,131072
version=9 host_threads=15 prefetch=4,32 pattern=serving rows=131072
version=10 host_threads=15 prefetch=16 host_share=0.4,0.5,0.6,0.7 pattern=serving rows=4700,16384,131072
version=10 host_threads=15 prefetch=16 host_share=0.5,0.7 pattern=uniform rows=131072"
  n2=$(reserve 2048 30600)
  stamp "2 MB pages reserved: $n2 of 30600"
  if [ "$n2" -ge 30518 ]; then phase hosthuge2m 64 huge2m; else stamp "skipped hosthuge2m: too few 2 MB pages"; fi
  echo 0 > $hp/hugepages-2048kB/nr_hugepages 2>/dev/null
  lines="version=1 pattern=serving rows=16384,131072
version=9 host_threads=15 prefetch=0,16 pattern=serving rows=131072
version=10 host_threads=15 prefetch=16 host_share=0.5,0.6 pattern=serving rows=131072"
  phase hostregister 64 register
else
  echo "fetch-pages.sh: unknown grid '$grid' (pages or host)" >&2; exit 1
fi
stamp "all done"
