#!/bin/sh
# Compares the device code of the kernels of two source trees, without a GPU: every .cu file
# under OLD/kernels and NEW/kernels (a2a/ aside: it needs NCCL) is compiled to a cubin with the
# Makefile's device flags for one architecture (sm_90, or CUDA_ARCH=sm_XY; *_wgmma.cu sm_90a), and every kernel or device function of
# NEW (an ELF section .text.NAME) must be byte for byte one of OLD's of the same name. This is
# how a move of kernel code (into kernels/lib/ or kernels/versions/) is shown to leave the
# measured instructions alone.
#   sh kernels/code-compare.sh OLD [NEW]      (NEW defaults to this tree; NVCC may be set)
# A tree is a checkout or an export (git archive REV | tar -x -C DIR). RENAMED="old=new ..."
# names functions that the move renamed (e.g. rp_residency_kernel=dhk_residency_kernel for the
# move of the replay's residency kernel into the library). Prints one line per kernel of NEW
# that differs or is new, then a count; exit 1 when any differs.
set -e
old=${1:?usage: code-compare.sh OLD [NEW]}
new=${2:-$(cd "$(dirname "$0")/.." && pwd)}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for side in old new; do
  eval "root=\$$side"
  mkdir -p "$tmp/$side"
  (cd "$root" && find kernels -name '*.cu' ! -path 'kernels/a2a/*' | sort) | while read -r cu; do
    case "$cu" in
      *_wgmma.cu) arch="-gencode=arch=compute_90a,code=sm_90a" ;;
      *) arch="-arch=${CUDA_ARCH:-sm_90}" ;;
    esac
    (cd "$root" && "$NVCC" -O3 -std=c++17 -lineinfo $arch -I. -cubin "$cu" -o "$tmp/$side/$(echo "$cu" | tr / _).cubin")
  done
done
python3 - "$tmp/old" "$tmp/new" ${RENAMED:-} <<'PY'
import glob, re, subprocess, sys

def sections(path):
    """Every .text.NAME section of a cubin: its bytes, by name."""
    out = subprocess.run(['readelf', '-W', '-S', path], capture_output=True, text=True, check=True).stdout
    data = open(path, 'rb').read()
    secs = {}
    for m in re.finditer(r'\]\s+(\.text\.\S+)\s+\S+\s+[0-9a-f]+\s+([0-9a-f]+)\s+([0-9a-f]+)', out):
        off, size = int(m.group(2), 16), int(m.group(3), 16)
        secs[m.group(1)] = data[off:off + size]
    return secs

old = {}
for f in glob.glob(sys.argv[1] + '/*.cubin'):
    for name, code in sections(f).items():
        old.setdefault(name, []).append(code)
renamed = [pair.split('=', 1) for pair in sys.argv[3:]]
same = differ = fresh = 0
for f in sorted(glob.glob(sys.argv[2] + '/*.cubin')):
    for name, code in sorted(sections(f).items()):
        for was, now in renamed:   # a mangled name spells an identifier's length before it
            name = name.replace('%d%s' % (len(now), now), '%d%s' % (len(was), was))
        if name not in old:
            fresh += 1
            print('new:', name[6:], 'in', f.rsplit('/', 1)[1])
        elif code in old[name]:
            same += 1
        else:
            differ += 1
            print('differs:', name[6:], 'in', f.rsplit('/', 1)[1])
print('%d identical, %d different, %d without a namesake in OLD' % (same, differ, fresh))
sys.exit(1 if differ else 0)
PY
