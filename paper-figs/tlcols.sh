#!/bin/sh
# tlcols.sh FILE POLICY COLUMN... : the named columns of one policy's block of a
# `dhsim --timeline` TSV (blocks start with "# policy NAME", then a header line).
f=$1; pol=$2; shift 2
awk -F'\t' -v pol="$pol" -v cols="$*" '
  BEGIN { n = split(cols, want, " ") }
  /^# policy / { split($0, w, " "); inblk = (w[3] == pol); hdr = 0; next }
  !inblk || NF == 0 { next }
  !hdr { for (i = 1; i <= NF; i++) idx[$i] = i; hdr = 1
         for (j = 1; j <= n; j++) if (!(want[j] in idx)) { print "tlcols: no column " want[j] > "/dev/stderr"; exit 1 }
         next }
  { line = ""; for (j = 1; j <= n; j++) line = line (j > 1 ? "\t" : "") $(idx[want[j]]); print line }
' "$f"
