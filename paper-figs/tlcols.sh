#!/bin/sh
# tlcols.sh FILE POLICY COLUMN... : the named columns of one policy's rows of a
# `dhsim --timeline` TSV (long form: one header line, then one row per policy and
# step, the policy in the column named "policy"). A missing column is an error; a
# policy with no row prints nothing and is an error too.
f=$1; pol=$2; shift 2
awk -F'\t' -v pol="$pol" -v cols="$*" '
  BEGIN { n = split(cols, want, " ") }
  NR == 1 { for (i = 1; i <= NF; i++) idx[$i] = i
            if (!("policy" in idx)) { print "tlcols: " FILENAME ": no policy column (not a dhsim timeline?)" > "/dev/stderr"; bad = 1; exit 1 }
            for (j = 1; j <= n; j++) if (!(want[j] in idx)) { print "tlcols: no column " want[j] > "/dev/stderr"; bad = 1; exit 1 }
            next }
  $(idx["policy"]) != pol { next }
  { rows++; line = ""; for (j = 1; j <= n; j++) line = line (j > 1 ? "\t" : "") $(idx[want[j]]); print line }
  END { if (!bad && !rows) { print "tlcols: " FILENAME ": no rows of policy " pol > "/dev/stderr"; exit 1 } }
' "$f"
