#!/bin/sh
# cli_dhtrace.sh: bin/dhtrace end to end (run from the repository root).
# Prints one "PASS name" or "FAIL name" line per case.
DH=${DHTRACE:-bin/dhtrace}
PY=/usr/bin/python3
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
SHAPE="--preset glm51-longbench --requests 2 --layers 8 --group-every 4 --k 128 --prompt 2000 --output 100"
TINY="$SHAPE --keyframe-interval 16"

pass() { echo "PASS $1"; }
fail() { echo "FAIL $1${2:+: $2}"; }
# ok NAME CMD...: the command exits 0.
ok() { n=$1; shift; if "$@" >"$T/out" 2>"$T/err"; then pass "$n"; else fail "$n" "$(head -c 300 "$T/err")"; fi; }
# exits NAME CODE CMD...: the command exits with CODE and prints exactly one line on stderr.
exits() {
  n=$1; code=$2; shift 2
  "$@" >"$T/out" 2>"$T/err"; rc=$?
  lines=$(wc -l <"$T/err")
  if [ "$rc" -eq "$code" ] && [ "$lines" -eq 1 ] && grep -q '^dhtrace: ' "$T/err"; then pass "$n"
  else fail "$n" "exit $rc (want $code), $lines stderr lines: $(head -c 300 "$T/err")"; fi
}

[ -x "$DH" ] || { fail "dhtrace built"; exit 1; }

for c in "" gen info check stats; do
  if $DH $c --help >"$T/out" 2>&1 && grep -q '^usage: dhtrace' "$T/out"; then pass "help${c:+ $c}"; else fail "help${c:+ $c}"; fi
done

ok "gen tiny trace" $DH gen $TINY --seed 3 -o "$T/a.h5"
ok "info" $DH info "$T/a.h5"
if grep -q '^format_version *1$' "$T/out" && grep -q '^preset *glm51-longbench$' "$T/out" && grep -q '^bytes/stored row' "$T/out"
then pass "info content"; else fail "info content" "$(cat "$T/out")"; fi
ok "check" $DH check "$T/a.h5"

# More than a second later: HDF5 would record object times in seconds.
sleep 1.1
ok "gen same seed" $DH gen $TINY --seed 3 -o "$T/b.h5"
if cmp -s "$T/a.h5" "$T/b.h5"; then pass "same seed, same bytes"; else fail "same seed, same bytes"; fi
ok "gen other seed" $DH gen $TINY --seed 4 -o "$T/c.h5"
if cmp -s "$T/a.h5" "$T/c.h5"; then fail "other seed, other bytes"; else pass "other seed, other bytes"; fi

if h5dump -A "$T/a.h5" >"$T/out" 2>&1 && grep -q 'ATTRIBUTE "format_version"' "$T/out" &&
   h5dump -d /req/1/g/1/index "$T/a.h5" >/dev/null 2>&1; then pass "h5dump reads it"; else fail "h5dump reads it"; fi

# An independent decoder in h5py (the README's recipe): every selection has
# min(k, context rows) distinct rows inside the context, a delta removes only
# selected rows and adds only unselected ones, keyframes fall every
# keyframe_interval positions.
cat >"$T/decode.py" <<'PYEOF'
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
assert f.attrs["format_version"] == 1 and f.attrs["row_coding"] == "delta"
k, comp = f["group_k"][:], f["group_compress"][:]
prompt, out = f["requests/prompt_len"][:], f["requests/output_len"][:]
run = lambda a: np.cumsum(a, dtype=np.uint32)
checked = 0
for r in range(f.attrs["n_requests"]):
    for g in range(f.attrs["n_groups"]):
        ix, rows = f[f"req/{r}/g/{g}/index"][:], f[f"req/{r}/g/{g}/rows"][:]
        assert len(ix) == out[r]
        sel = set()
        for p, e in enumerate(ix):
            a, n, m = int(e["offset"]), int(e["n_added"]), int(e["n_removed"])
            added, removed = run(rows[a:a + n]), run(rows[a + n:a + n + m])
            nrows = -(-(int(prompt[r]) + p) // int(comp[g]))
            assert bool(e["keyframe"]) == (p % f.attrs["keyframe_interval"] == 0), (r, g, p)
            if e["keyframe"]:
                assert m == 0 and len(set(added.tolist())) == n, (r, g, p)
                sel = set(added.tolist())
            else:
                assert not (set(removed.tolist()) - sel) and not (set(added.tolist()) & sel), (r, g, p)
                sel = (sel - set(removed.tolist())) | set(added.tolist())
            assert len(sel) == min(int(k[g]), nrows) and max(sel) < nrows, (r, g, p)
            checked += 1
print(checked)
PYEOF
if [ -x "$PY" ] && $PY "$T/decode.py" "$T/a.h5" >"$T/out" 2>"$T/err" && [ "$(cat "$T/out")" -eq 400 ]
then pass "h5py decodes it"; else fail "h5py decodes it" "$(tail -c 300 "$T/err")"; fi

# Damaged files: one error line naming the file, exit 1.
size=$(wc -c <"$T/a.h5")
cp "$T/a.h5" "$T/cut.h5" && truncate -s $((size / 2)) "$T/cut.h5"
exits "truncated file" 1 $DH check "$T/cut.h5"
grep -q "cut.h5" "$T/err" || fail "truncated file names it"
exits "truncated file, info" 1 $DH info "$T/cut.h5"
head -c 20000 /dev/urandom >"$T/junk.h5"
exits "garbage file" 1 $DH check "$T/junk.h5"
exits "missing file" 1 $DH info "$T/nothing.h5"

# Usage errors exit 2; configuration errors exit 1 and write nothing.
exits "bad option" 2 $DH gen --no-such-option
exits "bad number" 2 $DH gen $TINY --k 12x -o "$T/d.h5"
exits "missing -o" 2 $DH gen $TINY
exits "unknown command" 2 $DH frobnicate
exits "unknown --set key" 1 $DH gen $TINY --set selection.no_such_key=1 -o "$T/e.h5"
if [ -e "$T/e.h5" ] || ls "$T" | grep -q '\.tmp\.'; then fail "failed gen leaves no file"; else pass "failed gen leaves no file"; fi
exits "unknown preset" 1 $DH gen --preset no-such-preset -o "$T/f.h5"

# stats on the tiny trace: the table, JSON that parses, TSV blocks.
ok "stats table" $DH stats "$T/a.h5"
ok "stats json" $DH stats --json "$T/a.h5"
if $PY -c 'import json,sys; json.load(open(sys.argv[1]))' "$T/out" 2>/dev/null; then pass "stats json parses"; else fail "stats json parses"; fi
ok "stats tsv" $DH stats --tsv --budgets 1k,2k "$T/a.h5"
ok "stats sampled" $DH stats --requests-sample 1 --groups-sample 1 --positions 50 "$T/a.h5"
if grep -qi 'sampl' "$T/out"; then pass "stats states sampling"; else fail "stats states sampling"; fi
ok "stats preset in memory" $DH stats $SHAPE --no-belady
exits "stats damaged file" 1 $DH stats "$T/cut.h5"
