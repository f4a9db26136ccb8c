#!/bin/sh
# cli_ci.sh: the confidence intervals and the equal-token speculative column of
# bin/dhsim --compare (sim/metrics.c, sim/out.c, common/stats.h).
#   - the speculative column is measured over as many output tokens as the
#     plain Adaptive column (at most one step's tokens more), not over fewer
#     steps;
#   - that column equals the same policy run alone with the overrides --compare
#     gives it (the figure no longer depends on being run beside others);
#   - every run of the JSON has a 95 % half-width for tokens/s that is positive
#     where the steps vary, a batch plan of 10 to 30 batches covering the
#     measured steps, and fetched rows and bytes per output token that are the
#     whole run's ratios (missed rows / tokens over the measured steps);
#   - the table prints the intervals and the legend, one extrapolation line per
#     policy at most, and the headline's agreement line;
#   - the speculative column's tokens/s is the control-variate estimate
#     (common/stats.h): its plain twin and interval are in the JSON, the
#     controlled interval is narrower and the controlled estimate lies inside
#     the plain interval; the plain columns have no control;
#   - the demotions: exactly the policies that demote report them, their rate
#     is the measured count per 1000 measured steps, within the run's count;
#   - make run's committed output (tests/golden/run-compare.json, the default
#     length) has every column's tokens/s half-width at most 1 % of its value.
bin=./bin/dhsim
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1"; }
steps=120
$bin --compare --steps $steps --json "$tmp/c.json" > "$tmp/c.txt" || { fail "compare ran"; exit 0; }
read -r tok warm <<EOF
$(python3 -c 'import json, sys
r = {x["policy"]: x for x in json.load(open(sys.argv[1]))["runs"]}["adaptive+dflash2"]
print(int(r["measured_tokens"]), r["warmup_steps"])' "$tmp/c.json")
EOF
python3 - "$tmp/c.json" <<'EOF' && pass "speculative column over as many tokens" || fail "speculative column over as many tokens"
import json, sys
r = {x["policy"]: x for x in json.load(open(sys.argv[1]))["runs"]}
plain, sp = r["adaptive"]["measured_tokens"], r["adaptive+dflash2"]["measured_tokens"]
per_step = r["adaptive+dflash2"]["per_gpu"] * 8   # at most gamma + 1 = 8 tokens per request and step
ok = plain <= sp < plain + per_step and r["adaptive+dflash2"]["measured_steps"] < r["adaptive"]["measured_steps"]
print("plain %d, speculative %d tokens" % (plain, sp))
sys.exit(0 if ok else 1)
EOF
$bin --policy adaptive+dflash2 --steps $steps --set workload.measure_tokens=$(python3 -c "
import json; r={x['policy']: x for x in json.load(open('$tmp/c.json'))['runs']}; print((r['adaptive']['steps'] - r['adaptive']['warmup_steps']) * r['adaptive']['per_gpu'])") \
    --set workload.warmup_steps=$warm --quiet --json "$tmp/alone.json"
python3 - "$tmp/c.json" "$tmp/alone.json" <<'EOF' && pass "speculative column equals its run alone" || fail "speculative column equals its run alone"
import json, sys
a = {x["policy"]: x for x in json.load(open(sys.argv[1]))["runs"]}["adaptive+dflash2"]
b = json.load(open(sys.argv[2]))["runs"][0]
keys = ("tok_s_per_gpu", "measured_tokens", "measured_steps", "ci95_half", "fetched_rows_per_token")
sys.exit(0 if all(a[k] == b[k] for k in keys) else 1)
EOF
python3 - "$tmp/c.json" <<'EOF' && pass "intervals and per-token fetches in the JSON" || fail "intervals and per-token fetches in the JSON"
import json, sys
bad = []
for r in json.load(open(sys.argv[1]))["runs"]:
    h, b = r["ci95_half"]["tok_s_per_gpu"], r["batches"]
    if h is None or h < 0 or (r["policy"] != "resident" and not h > 0): bad.append((r["policy"], "half", h))
    if not (10 <= b["count"] <= 30) or b["count"] * b["steps_each"] + b["first_measured_step_used"] != r["measured_steps"]:
        bad.append((r["policy"], "batches", b))
    if r["measured_tokens"] > 0 and r["policy"] != "resident":
        if not r["fetched_rows_per_token"] > 0 or not r["fetched_bytes_per_token"] > 0: bad.append((r["policy"], "per token"))
print(bad)
sys.exit(1 if bad else 0)
EOF
if grep -q "output tokens/s per GPU .*±" "$tmp/c.txt" && grep -q "^±: 95 % confidence half-width" "$tmp/c.txt" &&
   grep -q "^  agreement: " "$tmp/c.txt" && [ "$(grep '^note: ' "$tmp/c.txt" | cut -d: -f2 | sort | uniq -d | wc -l)" -eq 0 ]; then
  pass "table: intervals, legend, one extrapolation line per policy, agreement"
else fail "table: intervals, legend, one extrapolation line per policy, agreement"; fi
python3 - "$tmp/c.json" <<'EOF' && pass "control variate on the speculative column" || fail "control variate on the speculative column"
import json, sys
bad = []
for r in json.load(open(sys.argv[1]))["runs"]:
    cv = r.get("control_variate")
    if ("spec" in r) != (cv is not None): bad.append((r["policy"], "control present", cv))
    if cv is None: continue
    h, hp, t, tp = r["ci95_half"]["tok_s_per_gpu"], cv["ci95_half_plain"], r["tok_s_per_gpu"], cv["tok_s_per_gpu_plain"]
    if not (0 < h < hp) or not abs(t - tp) <= hp: bad.append((r["policy"], t, h, tp, hp))
print(bad)
sys.exit(1 if bad else 0)
EOF
python3 - "$tmp/c.json" <<'EOF' && pass "demotions where the policy demotes" || fail "demotions where the policy demotes"
import json, sys
bad = []
for r in json.load(open(sys.argv[1]))["runs"]:
    d = r.get("demotions")
    if (r["policy"] in ("sglang-dynamic", "sglang-watermark")) != (d is not None): bad.append((r["policy"], d))
    if d is None: continue
    if not (0 <= d["measured"] <= d["count"]) or abs(d["per_1k_steps"] - 1000 * d["measured"] / r["measured_steps"]) > 1e-9:
        bad.append((r["policy"], d))
print(bad)
sys.exit(1 if bad else 0)
EOF
python3 - tests/golden/run-compare.json <<'EOF' && pass "make run: every tokens/s within 1 %" || fail "make run: every tokens/s within 1 %"
import json, sys
bad = [(r["policy"], r["ci95_half"]["tok_s_per_gpu"] / r["tok_s_per_gpu"])
       for r in json.load(open(sys.argv[1]))["runs"] if not r["ci95_half"]["tok_s_per_gpu"] <= 0.01 * r["tok_s_per_gpu"]]
print(bad)
sys.exit(1 if bad else 0)
EOF
