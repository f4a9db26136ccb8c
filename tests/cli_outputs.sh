#!/bin/sh
# tests/cli_outputs.sh: dhsim's outputs for scripts (sim/out.h, docs/OUTPUTS.md).
#   - the timeline TSV is one table in long form: one header, the policy and its
#     speculative mode first, steps x policies rows, each policy's steps 0..N-1 in
#     order; csv (or pandas where installed) reads it in one call; its numbers
#     equal the HDF5 timeline's datasets column by column;
#   - the HDF5 timeline: every dataset has a unit and a description, the root
#     names the tool, the commit (the one dhsim --version prints), the seed and the
#     steps; each policy's group holds its configuration as INI text that
#     re-parses to exactly the entries the JSON records for that run, the defaults
#     its loaders took likewise, and the same digest (h5py; h5dump -A where h5py
#     is missing); docs/OUTPUTS.md lists every column with the same unit and meaning;
#   - the JSON's inputs reproduce the run: the recorded files written out and run
#     again give the same figures, and so do they with the recorded defaults
#     written in as well; one recorded value changed gives other figures and
#     another digest (so the comparison can fail);
#   - strings are escaped: a trace path with a quote and a backslash survives
#     json.load and the HDF5 attribute as it was given;
#   - the JSON and the TSV do not depend on the thread count (it is not recorded).
bin=./bin/dhsim
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
ok() { echo "PASS $1"; }
bad() { echo "FAIL $1${2:+: $2}"; }
# h5py is installed for the system Python (Debian python3-h5py), which may not be the first python3.
PY=python3
for p in /usr/bin/python3 python3; do if $p -c 'import h5py' 2>/dev/null; then PY=$p; break; fi; done
steps=12
pols=hisparse,adaptive+dflash2,hisparse-spec
if ! $bin --policy $pols --steps $steps --seed 3 --set workload.concurrency=64 --timeline "$T/tl" --quiet \
       --json "$T/a.json" 2> "$T/err"; then
  bad outputs_run "$(cat "$T/err")"; exit 0
fi

# The long-form TSV, read as a script would.
cat > "$T/tsv.py" <<'EOF'
import csv, sys
path, steps, pols = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",")
with open(path, newline="") as f:
    rows = list(csv.reader(f, delimiter="\t"))
head, body = rows[0], rows[1:]
assert head[:3] == ["policy", "spec_mode", "step"], head[:3]
assert all(r != head for r in body), "a header repeated"
assert all(len(r) == len(head) for r in body), "ragged rows"
assert len(body) == steps * len(pols), (len(body), steps * len(pols))
for p in pols:
    mine = [r for r in body if r[0] == p]
    assert [int(float(r[2])) for r in mine] == list(range(steps)), p
mode = {r[0]: r[1] for r in body}
assert mode == {"hisparse": "none", "adaptive+dflash2": "dflash2", "hisparse-spec": "dflash2"}, mode
try:
    import pandas
    d = pandas.read_csv(path, sep="\t")
    assert len(d) == steps * len(pols) and list(d.columns) == head
except ImportError:
    pass
print("ok")
EOF
if $PY "$T/tsv.py" "$T/tl.tsv" $steps $pols > "$T/out" 2>&1; then ok outputs_tsv_long_form; else bad outputs_tsv_long_form "$(tail -3 "$T/out")"; fi
# Planted: the former layout (a "# policy" line and a header per policy) fails the same check.
awk -F'\t' 'NR == 1 { h = $0; next } $1 != p { p = $1; printf "# policy %s\n%s\n", p, h } { print }' "$T/tl.tsv" > "$T/old.tsv"
if ! $PY "$T/tsv.py" "$T/old.tsv" $steps $pols > /dev/null 2>&1; then ok outputs_tsv_planted_caught; else bad outputs_tsv_planted_caught; fi

# HDF5: units, inputs and the TSV's numbers.
commit=$($bin --version | awk '{print $2}')
if $PY -c 'import h5py' 2>/dev/null; then
  if $PY - "$T/tl.h5" "$T/tl.tsv" "$T/a.json" "$commit" $steps <<'EOF' > "$T/out" 2>&1; then ok outputs_h5_attributes; else bad outputs_h5_attributes "$(tail -3 "$T/out")"; fi
import configparser, csv, json, sys, h5py
h5, tsv, js, commit, steps = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
f = h5py.File(h5, "r")
s = lambda v: v.decode() if isinstance(v, bytes) else str(v)
a = f.attrs
assert s(a["tool"]) == "dhsim" and s(a["commit"]) == commit, (a["tool"], a["commit"])
assert int(a["seed"]) == 3 and int(a["steps"]) == steps, (a["seed"], a["steps"])
runs = {r["policy"]: r for r in json.load(open(js))["runs"]}
rows = list(csv.DictReader(open(tsv, newline=""), delimiter="\t"))
def ini(text):
    c = configparser.ConfigParser(interpolation=None, delimiters=("=",), strict=True)
    c.optionxform = str
    c.read_string(text)
    return {sec: dict(c[sec]) for sec in c.sections()}
for pol, g in f["timeline"].items():
    assert s(g.attrs["policy"]) == pol
    r = runs[pol]["inputs"]
    assert s(g.attrs["config_digest"]) == r["config_digest"], pol
    for role in ("instance", "model", "hw"):
        # The INI text re-parses to exactly the entries the JSON records (empty sections included).
        want = r["config"][role]["values"]
        assert ini(s(g.attrs["config_" + role])) == want, (pol, role)
        assert s(g.attrs["config_%s_file" % role]) == r["config"][role]["file"]
        # The defaults the loaders took for keys the file does not give: the same both ways, none given too.
        d = r["config"][role]["defaults"]
        assert ini(s(g.attrs["config_%s_defaults" % role])) == d, (pol, role)
        assert not [(x, k) for x in d for k in d[x] if k in want.get(x, {})], (pol, role)
    mine = [x for x in rows if x["policy"] == pol]
    for name, ds in g.items():
        assert s(ds.attrs["unit"]) in ("", "1", "s", "tokens", "tokens/s", "rows", "bytes", "requests"), (name, ds.attrs["unit"])
        assert s(ds.attrs["description"]), name
        assert len(ds) == steps and all(float(x[name]) == float("%.10g" % v) for x, v in zip(mine, ds[()])), (pol, name)
    assert set(g.keys()) == set(rows[0].keys()) - {"policy", "spec_mode"}
for pol, g in f["requests"].items():
    for name, ds in g.items():
        assert "unit" in ds.attrs and s(ds.attrs["description"]), (pol, name)
# docs/OUTPUTS.md lists every column with the unit and meaning the file gives it.
doc = {}
for line in open("docs/OUTPUTS.md"):
    c = [x.strip() for x in line.strip().strip("|").split("|")]
    if len(c) == 3 and c[0].startswith("`") and c[0].endswith("`"):
        doc.setdefault(c[0].strip("`"), (c[1], c[2]))
for g in (f["timeline/hisparse"], f["requests/hisparse"]):
    for name, ds in g.items():
        want = (s(ds.attrs["unit"]) or "-", s(ds.attrs["description"]))
        assert doc.get(name) == want, ("docs/OUTPUTS.md", name, doc.get(name), want)
print("ok")
EOF
else
  # Without h5py: h5dump names the attributes.
  h5dump -A "$T/tl.h5" > "$T/dump" 2>&1
  if grep -q 'ATTRIBUTE "unit"' "$T/dump" && grep -q "\"$commit\"" "$T/dump" && grep -q 'ATTRIBUTE "config_hw"' "$T/dump"
  then ok outputs_h5_attributes; else bad outputs_h5_attributes "h5dump lacks unit, commit or config_hw"; fi
fi

# The JSON's inputs reproduce the run: write adaptive+dflash2's three files out of the record,
# point the instance at the copies, run that column again from them.
$PY - "$T/a.json" "$T" <<'EOF' > "$T/out" 2>&1
import json, sys
d, out = json.load(open(sys.argv[1])), sys.argv[2]
r = {x["policy"]: x for x in d["runs"]}["adaptive+dflash2"]["inputs"]
assert d["inputs"]["options"]["--policy"] == "hisparse,adaptive+dflash2,hisparse-spec"
for role in ("instance", "model", "hw"):
    v = r["config"][role]["values"]
    if role == "instance":
        v["instance"]["model"], v["instance"]["hw"] = out + "/model.ini", out + "/hw.ini"
    with open("%s/%s.ini" % (out, role), "w") as f:
        for sec, kv in v.items():
            f.write("[%s]\n" % sec + "".join("%s = %s\n" % (k, x) for k, x in kv.items()))
# The column's own overrides (its speculative mode) are part of the recorded configuration.
assert r["sets"] == ["policy.name=adaptive", "spec.mode=dflash2"] and r["config"]["instance"]["values"]["spec"]["mode"] == "dflash2", r["sets"]
print("ok")
EOF
figs() { $PY -c 'import json, sys
r = {x["policy"]: x for x in json.load(open(sys.argv[1]))["runs"]}[sys.argv[2]]
r.pop("inputs"); print(json.dumps(r, sort_keys=True))' "$@"; }
if grep -q '^ok' "$T/out" && $bin --config "$T/instance.ini" --quiet --json "$T/b.json" 2> "$T/err" &&
   [ "$(figs "$T/a.json" adaptive+dflash2)" = "$(figs "$T/b.json" adaptive+dflash2)" ]
then ok outputs_json_inputs_reproduce; else bad outputs_json_inputs_reproduce "$(tail -2 "$T/out") $(cat "$T/err")"; fi
# The defaults are the values the loaders took: written into the files as well, the run is the same.
$PY - "$T/a.json" "$T" <<'EOF' > "$T/out" 2>&1
import json, sys
d, out = json.load(open(sys.argv[1])), sys.argv[2]
r = {x["policy"]: x for x in d["runs"]}["adaptive+dflash2"]["inputs"]
for role in ("instance", "model", "hw"):
    v = r["config"][role]["values"]
    for sec, kv in r["config"][role]["defaults"].items():
        v.setdefault(sec, {}).update(kv)
    if role == "instance":
        v["instance"]["model"], v["instance"]["hw"] = out + "/model-d.ini", out + "/hw-d.ini"
    with open("%s/%s-d.ini" % (out, role), "w") as f:
        for sec, kv in v.items():
            f.write("[%s]\n" % sec + "".join("%s = %s\n" % (k, x) for k, x in kv.items()))
# The warm-up a run takes when none is given: warmup_fraction of the steps (sim/wl.h).
w = r["config"]["instance"]["values"]["workload"]
assert int(r["config"]["instance"]["defaults"]["workload"]["warmup_steps"]) == int(float(w["warmup_fraction"]) * int(w["steps"]) + 1e-9)
print("ok")
EOF
if grep -q '^ok' "$T/out" && $bin --config "$T/instance-d.ini" --quiet --json "$T/d.json" 2> "$T/err" &&
   [ "$(figs "$T/a.json" adaptive+dflash2)" = "$(figs "$T/d.json" adaptive+dflash2)" ]
then ok outputs_json_defaults_reproduce; else bad outputs_json_defaults_reproduce "$(tail -2 "$T/out") $(cat "$T/err")"; fi
# Planted: one recorded value changed (56 requests in flight instead of 64) moves the figures and the digest.
sed -i 's/^concurrency = 64$/concurrency = 56/' "$T/instance.ini"
if $bin --config "$T/instance.ini" --quiet --json "$T/c.json" 2> "$T/err" &&
   [ "$(figs "$T/a.json" adaptive+dflash2)" != "$(figs "$T/c.json" adaptive+dflash2)" ] &&
   [ "$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["runs"][0]["inputs"]["config_digest"])' "$T/b.json")" != \
     "$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["runs"][0]["inputs"]["config_digest"])' "$T/c.json")" ]
then ok outputs_json_inputs_planted_caught; else bad outputs_json_inputs_planted_caught "$(cat "$T/err")"; fi

# Escaping: a trace path with a quote, a backslash and a tab.
odd="$T/q\"b\\s	t.h5"
if ./bin/dhtrace gen --preset glm51-longbench --requests 2 --output 20 -o "$odd" > /dev/null 2> "$T/err" &&
   $bin --trace "$odd" --policy hisparse --steps 8 --concurrency 16 --quiet --timeline "$T/odd" --json "$T/odd.json" 2>> "$T/err" &&
   $PY - "$T/odd.json" "$odd" "$T/odd.h5" <<'EOF' > "$T/out" 2>&1
import json, sys
d, want = json.load(open(sys.argv[1])), sys.argv[2]
assert d["runs"][0]["inputs"]["config"]["instance"]["values"]["trace"]["path"] == want
assert want in d["inputs"]["sets"][0], d["inputs"]["sets"]
try:
    import h5py
except ImportError:
    sys.exit(0)
text = h5py.File(sys.argv[3], "r")["timeline/hisparse"].attrs["config_instance"]
assert ("path = " + want + "\n") in text
EOF
then ok outputs_strings_escaped; else bad outputs_strings_escaped "$(cat "$T/err") $(tail -2 "$T/out")"; fi

# The thread count is not an input: the same JSON and TSV on one thread.
if $bin --policy $pols --steps $steps --seed 3 --set workload.concurrency=64 --timeline "$T/tl1" --quiet \
       --json "$T/a1.json" --threads 1 2> "$T/err" && cmp -s "$T/a.json" "$T/a1.json" && cmp -s "$T/tl.tsv" "$T/tl1.tsv" &&
   cmp -s "$T/tl.h5" "$T/tl1.h5"
then ok outputs_thread_count_not_recorded; else bad outputs_thread_count_not_recorded "$(cat "$T/err")"; fi
