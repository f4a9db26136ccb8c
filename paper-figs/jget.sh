#!/bin/sh
# jget.sh FILE POLICY KEY: print one number from a `dhsim --json` file.
# dhsim writes one run object per policy, each starting with its "policy" key,
# with keys in "name": value form; this reads that layout and nothing more.
awk -v want="$2" -v key="$3" '
  /"policy": "/ { match($0, /"policy": "[^"]*"/); cur = substr($0, RSTART + 11, RLENGTH - 12) }
  cur == want {
    s = $0
    while ((i = index(s, "\"" key "\": ")) > 0) {
      v = substr(s, i + length(key) + 4); sub(/[,} ].*/, "", v); print v; found = 1; exit
    }
  }
  END { if (!found) { print "jget: no key \"" key "\" for policy \"" want "\"" > "/dev/stderr"; exit 1 } }
' "$1"
