#!/bin/sh
# Sums a bin/dhreplay --timeline file per configuration: what the fetch overlapped, layer by layer.
#   sh kernels/replay/timeline.sh TIMELINE.csv [ALONE.csv] [FIRST_STEP] [LAST_STEP]   (steps 4-11 by default)
# Per configuration and step (means over the steps): the fetch launches' time on their stream,
# the part of it with the compute stream busy (the layer's work before its fetch wait, and from
# the wait's end to the layer's end), launches and rows per launch. With ALONE (the same run
# with --fetch-only --timeline), the same launches' time alone and the extra time beside compute
# per unit of overlap: the fetch's slowdown beside what the steps compute.
set -e
[ $# -ge 1 ] || { echo "usage: timeline.sh TIMELINE.csv [ALONE.csv] [FIRST_STEP] [LAST_STEP]" >&2; exit 1; }
TL=$1; ALONE=${2:-}; FIRST=${3:-4}; LAST=${4:-11}
for f in "$TL" $ALONE; do [ -r "$f" ] || { echo "timeline.sh: cannot read '$f'" >&2; exit 1; }; done
awk -F, -v first="$FIRST" -v last="$LAST" -v alone="$ALONE" '
  function busy_overlap(c, s, a, b,   l, o, lo, hi) {
    o = 0
    for (l = 0; l < nl[c, s]; l++) {
      lo = (l ? le[c, s, l - 1] : 0); hi = pw[c, s, l]
      if (hi > lo) o += ov(a, b, lo, hi)
      o += ov(a, b, as[c, s, l], le[c, s, l])
    }
    return o
  }
  function ov(a, b, x, y,   lo, hi) { lo = a > x ? a : x; hi = b < y ? b : y; return hi > lo ? hi - lo : 0 }
  /^#/ || $1 == "config_id" {next}
  $3 < first || $3 > last {next}
  FILENAME == alone { if ($6 != "") da[$1, $3, $4] = $7 - $6; next }
  {
    c = $1; s = $3; l = $4
    if (!((c, s) in seen)) { seen[c, s] = 1; steps[c]++; if (!(c in order)) { order[c] = ++nc; name[nc] = c } }
    if (l + 1 > nl[c, s]) nl[c, s] = l + 1
    pw[c, s, l] = $8; as[c, s, l] = $9; le[c, s, l] = $10
    if ($6 != "") { n++; fc[n] = c; fs_[n] = s; fl[n] = l; fa[n] = $6; fb[n] = $7; fr[n] = $5 }
  }
  END {
    for (i = 1; i <= n; i++) {
      c = fc[i]; d = fb[i] - fa[i]
      t[c] += d; o[c] += busy_overlap(c, fs_[i], fa[i], fb[i]); k[c]++; rows[c] += fr[i]
      if ((c, fs_[i], fl[i]) in da) { ta[c] += da[c, fs_[i], fl[i]]; ka[c]++ }
    }
    printf "%-10s %6s %12s %12s %9s %10s", "config", "steps", "fetch_ms", "overlap_ms", "fetches", "rows/fetch"
    if (alone != "") printf " %12s %14s", "alone_ms", "extra/overlap"
    printf "\n"
    for (j = 1; j <= nc; j++) {
      c = name[j]; ns = steps[c]
      printf "%-10s %6d %12.2f %12.2f %9.1f %10.0f", c, ns, t[c] / ns / 1000, o[c] / ns / 1000, k[c] / ns, k[c] ? rows[c] / k[c] : 0
      if (alone != "") {
        if (ka[c] == k[c] && o[c] > 0) printf " %12.2f %14.3f", ta[c] / ns / 1000, (t[c] - ta[c]) / o[c]
        else printf " %12s %14s", "-", "-"
      }
      printf "\n"
    }
  }' $ALONE "$TL"
