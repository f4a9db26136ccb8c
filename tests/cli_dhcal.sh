#!/bin/sh
# cli_dhcal.sh: bin/dhcal end to end on committed data: probe import, fetch fit
# into a profile, idempotent refit, check-profile, check-range, malformed input
# and validation of the small replay example.  Prints one PASS/FAIL line per case.
dhcal=bin/dhcal
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass() { echo "PASS dhcal_$1"; }
fail() { echo "FAIL dhcal_$1${2:+: $2}"; }
probes="analysis/data/pcie_probe.h200.2026-11-29.txt analysis/data/pool_probe.h200.4k-pages.2026-11-29.txt analysis/data/pool_probe.h200.serving-layout.2026-11-29.txt analysis/data/pool_probe.h200.thp.2026-11-29.txt"

# The converter's output reads back (it reruns the reader) and matches the
# committed CSV apart from the first line, which records the command.
if $dhcal import-probe $probes -o "$tmp/probes.csv" >/dev/null 2>"$tmp/err" &&
   tail -n +2 "$tmp/probes.csv" > "$tmp/a" && tail -n +2 analysis/data/h200_probes.csv > "$tmp/b" && cmp -s "$tmp/a" "$tmp/b"
then pass import_probe; else fail import_probe "$(cat "$tmp/err")"; fi

# Fit the probes into a copy of the base profile; the result passes check-profile
# and has the fitted form's keys and a [fit_range].
cp tests/data/hw_base.ini "$tmp/h200.ini"
fit="$dhcal fit --bench $tmp/probes.csv --holdout sms>=66 -o $tmp/h200.ini"
if $fit >"$tmp/fit.txt" 2>"$tmp/err" && $dhcal check-profile "$tmp/h200.ini" >/dev/null 2>>"$tmp/err" &&
   grep -q '^fetch_pool_bytes = ' "$tmp/h200.ini" && grep -q '^sm_row_s = ' "$tmp/h200.ini" && ! grep -q '^row_bw = ' "$tmp/h200.ini" && grep -q '^; dhcal: from .*kernel fetch version probe_zc4' "$tmp/h200.ini" &&
   grep -q 'held out: 68 lines' "$tmp/fit.txt"
then pass fit_probes; else fail fit_probes "$(cat "$tmp/err")"; fi

# Refitting the fitted profile (its own base) gives the same bytes.
cp "$tmp/h200.ini" "$tmp/first.ini"
if $fit >/dev/null 2>&1 && cmp -s "$tmp/h200.ini" "$tmp/first.ini"; then pass refit_idempotent; else fail refit_idempotent; fi

# Unfitted keys and their comments survive.
if grep -q '^; datasheet: H200 SXM dense FP8' "$tmp/h200.ini" && grep -q '^fetch_sms = 8' "$tmp/h200.ini"
then pass keeps_unfitted; else fail keeps_unfitted; fi

# A malformed CSV: one line naming file, line and column; no profile written.
{ head -2 "$tmp/probes.csv"; echo "probe,fetch,probe_zc4,NVIDIA H200,fp8,656,16384,8,2147483648,uniform,,,,,,,,,,,,,slow,,,37.6,,h2d,55.5,,1"; } > "$tmp/bad.csv"
out=$($dhcal fit --bench "$tmp/bad.csv" --base tests/data/hw_base.ini -o "$tmp/new.ini" 2>&1); rc=$?
if [ $rc -eq 1 ] && [ "$out" = "dhcal: file '$tmp/bad.csv' line 3: column 'median_us' is not a number: 'slow'" ] && [ ! -e "$tmp/new.ini" ]
then pass malformed_csv; else fail malformed_csv "rc=$rc out=$out"; fi

# A non-physical fit (time falls as bytes grow) fails and leaves the profile untouched.
{ sed -n 2p "$tmp/probes.csv"; i=1; while [ $i -le 12 ]; do
    echo "t,attention,1,H200,fp8,,,,,,1,1,,,,,,,,$((i * 1000000)),,5,$((2000 - i * 100)),,,,,,,,1"; i=$((i + 1)); done; } > "$tmp/neg.csv"
cp "$tmp/h200.ini" "$tmp/before.ini"
out=$($dhcal fit --bench "$tmp/neg.csv" -o "$tmp/h200.ini" 2>&1); rc=$?
if [ $rc -eq 1 ] && echo "$out" | grep -q "non-physical: hbm_gbps" && cmp -s "$tmp/h200.ini" "$tmp/before.ini" && ! ls "$tmp"/h200.ini.tmp* >/dev/null 2>&1
then pass nonphysical_fit; else fail nonphysical_fit "rc=$rc out=$out"; fi

# check-profile rejects a negative bandwidth and a missing key, naming them.
sed 's/^h2d_bw = .*/h2d_bw = -55.5e9/' "$tmp/h200.ini" > "$tmp/negbw.ini"
out=$($dhcal check-profile "$tmp/negbw.ini" 2>&1); rc=$?
if [ $rc -eq 1 ] && echo "$out" | grep -q "h2d_bw" && [ "$(echo "$out" | wc -l)" -eq 1 ]; then pass check_negative_bw; else fail check_negative_bw "$out"; fi
grep -v '^hbm_bw = ' "$tmp/h200.ini" > "$tmp/missing.ini"
out=$($dhcal check-profile "$tmp/missing.ini" 2>&1); rc=$?
if [ $rc -eq 1 ] && echo "$out" | grep -q "hbm_bw"; then pass check_missing_key; else fail check_missing_key "$out"; fi
sed 's/^fetch_sms = 4, 32/fetch_sms = 32, 4/' "$tmp/h200.ini" > "$tmp/range.ini"
out=$($dhcal check-profile "$tmp/range.ini" 2>&1); rc=$?
if [ $rc -eq 1 ] && echo "$out" | grep -q "fit_range\] fetch_sms"; then pass check_bad_range; else fail check_bad_range "$out"; fi

# check-range: inside exits 0, outside exits 2 and says so.
$dhcal check-range "$tmp/h200.ini" fetch_row_bytes=656 fetch_sms=8 >/dev/null 2>&1; rc1=$?
out=$($dhcal check-range "$tmp/h200.ini" fetch_sms=132 2>&1); rc2=$?
if [ $rc1 -eq 0 ] && [ $rc2 -eq 2 ] && echo "$out" | grep -q OUTSIDE; then pass check_range; else fail check_range "$rc1 $rc2 $out"; fi

# validate on the committed small example: held-out row as computed by hand
# (median 4 %, p95 30 %, misses 15 vs 16 on one step); targets and exact misses fail.
out=$($dhcal validate --replay tests/data/replay_small.csv --sim tests/data/sim_small.tsv 2>&1); rc=$?
held=$(echo "$out" | grep '^ALL held-out')
if [ $rc -eq 0 ] && echo "$held" | awk '{exit !($4 == 3 && $7 == "4.00" && $8 == "30.00" && $10 == 15 && $11 == 16 && $12 == 1)}'
then pass validate_small; else fail validate_small "$out"; fi
$dhcal validate --replay tests/data/replay_small.csv --sim tests/data/sim_small.tsv --exact-misses >/dev/null 2>&1; rc1=$?
$dhcal validate --replay tests/data/replay_small.csv --sim tests/data/sim_small.tsv --max-median 0.05 --max-p95 0.5 >/dev/null 2>&1; rc2=$?
$dhcal validate --replay tests/data/replay_small.csv --sim tests/data/sim_small.tsv --max-median 0.03 >/dev/null 2>&1; rc3=$?
if [ $rc1 -eq 2 ] && [ $rc2 -eq 0 ] && [ $rc3 -eq 2 ]; then pass validate_targets; else fail validate_targets "$rc1 $rc2 $rc3"; fi
# A replay step without a prediction is an error naming it.
head -7 tests/data/sim_small.tsv > "$tmp/short.tsv"
out=$($dhcal validate --replay tests/data/replay_small.csv --sim "$tmp/short.tsv" 2>&1); rc=$?
if [ $rc -eq 1 ] && echo "$out" | grep -q "step 2 of config 'b' policy 'adaptive' mode 'verify' has no prediction"
then pass validate_missing_step; else fail validate_missing_step "$out"; fi

# A dhsim per-step timeline (config a, given on the command line) plus a TSV for
# config b gives the same comparison as the TSV for both (the mean predicted
# time, column 6, may differ in its last printed digit: times from seconds).
a=$($dhcal validate --replay tests/data/replay_small.csv --sim tests/data/sim_small.tsv 2>&1 | grep '^ALL' | awk '{$6 = ""; print}')
b=$($dhcal validate --replay tests/data/replay_small.csv --sim-timeline tests/data/timeline_small.tsv:a:plain --sim tests/data/sim_small_b.tsv 2>&1 | grep '^ALL' | awk '{$6 = ""; print}')
if [ -n "$a" ] && [ "$a" = "$b" ]; then pass validate_dhsim_timeline; else fail validate_dhsim_timeline "$b"; fi
# A verify-mode timeline: the replay of verification steps runs no draft model, so the step's
# draft_s is taken out (here 1 ms drafts on top of sim_small_b.tsv's 102 / 96 / 130 us steps:
# the same comparison); without a draft_s column it is an error.
printf '# policy adaptive+dflash2\nstep\tt_start_s\tt_end_s\tmissed_rows\tdraft_s\n0\t0\t0.001102\t5\t0.001\n1\t0.001102\t0.002198\t6\t0.001\n2\t0.002198\t0.003328\t5\t0.001\n' > "$tmp/tl_b.tsv"
sed 's/^b,adaptive,/b,adaptive+dflash2,/' tests/data/replay_small.csv > "$tmp/replay_v.csv"
sed 's/^b\tadaptive\t/b\tadaptive+dflash2\t/' tests/data/sim_small_b.tsv > "$tmp/sim_v.tsv"
c=$($dhcal validate --replay "$tmp/replay_v.csv" --sim-timeline tests/data/timeline_small.tsv:a:plain --sim "$tmp/sim_v.tsv" 2>&1 | grep '^ALL' | awk '{$6 = ""; print}')
d=$($dhcal validate --replay "$tmp/replay_v.csv" --sim-timeline tests/data/timeline_small.tsv:a:plain --sim-timeline "$tmp/tl_b.tsv:b:verify" 2>&1 | grep '^ALL' | awk '{$6 = ""; print}')
if [ -n "$c" ] && [ "$c" = "$d" ]; then pass validate_verify_draft; else fail validate_verify_draft "$c | $d"; fi
cut -f1-4 "$tmp/tl_b.tsv" > "$tmp/tl_nodraft.tsv"
out=$($dhcal validate --replay "$tmp/replay_v.csv" --sim-timeline tests/data/timeline_small.tsv:a:plain --sim-timeline "$tmp/tl_nodraft.tsv:b:verify" 2>&1); rc=$?
if [ $rc -eq 1 ] && echo "$out" | grep -q "needs the draft_s column"; then pass validate_verify_needs_draft; else fail validate_verify_needs_draft "$out"; fi

# calibrate takes at most four paths; --configs and --timelines belong to validate --simulate.
out=$($dhcal calibrate a.ini b c.csv d.ini e 2>&1); rc=$?
if [ $rc -eq 1 ] && [ "$out" = "dhcal: calibrate: unknown or extra argument 'e'" ]; then pass calibrate_extra_argument; else fail calibrate_extra_argument "rc=$rc out=$out"; fi

# An output directory names the profile after the benchmarks' GPU (measured-<device>.ini); lines of
# two GPUs in one directory are an error naming both. (The calibration itself then fails here on a
# replay file that does not exist: nothing is written.)
mkdir -p "$tmp/a100" "$tmp/two" "$tmp/prof"
sed 's/,NVIDIA H200,/,NVIDIA A100-SXM4-80GB,/' measurements/h200/default-topk.csv > "$tmp/a100/default-topk.csv"
out=$($dhcal calibrate "$tmp/prof/" "$tmp/a100" "$tmp/none.csv" 2>&1); rc=$?
if [ $rc -eq 1 ] && echo "$out" | grep -q "the profile is $tmp/prof/measured-nvidia-a100-sxm4-80gb.ini" &&
   [ -z "$(ls "$tmp/prof")" ]; then pass calibrate_device_profile; else fail calibrate_device_profile "rc=$rc out=$out"; fi
cp "$tmp/a100/default-topk.csv" "$tmp/two/a.csv"; cp measurements/h200/default-topk.csv "$tmp/two/b.csv"
out=$($dhcal calibrate "$tmp/prof" "$tmp/two" 2>&1); rc=$?
if [ $rc -eq 1 ] && echo "$out" | grep -q "two devices ('NVIDIA A100-SXM4-80GB', 'NVIDIA H200')"; then pass calibrate_two_devices
else fail calibrate_two_devices "rc=$rc out=$out"; fi
out=$($dhcal validate --replay tests/data/replay_small.csv --sim tests/data/sim_small.tsv --timelines "$tmp/tl" 2>&1); rc=$?
if [ $rc -eq 1 ] && echo "$out" | grep -q "go with --simulate PROFILE" && [ ! -e "$tmp/tl" ]; then pass validate_timelines_need_simulate; else fail validate_timelines_need_simulate "rc=$rc out=$out"; fi
# A configurations file with a key the reader does not know is an error naming it.
{ sed -n '/^\[replay\]/,/^$/p' kernels/replay/configs.ini; printf '[a]\npolicy = hisparse\nbudget = 4096\nheldout = 0\nseed = 1\nrequests = 16\nprompt_len = 100000\nsteps = 32\noutput_len = 32\nsim = policy.hisparse_budget_k=2\nbudgte = 1\n'; } > "$tmp/cfg.ini"
out=$($dhcal simulate --profile models/hw/h200.ini --out "$tmp/sim" --configs "$tmp/cfg.ini" a 2>&1); rc=$?
if [ $rc -eq 1 ] && echo "$out" | grep -q "budgte" && [ ! -e "$tmp/sim" ]; then pass configs_unknown_key; else fail configs_unknown_key "rc=$rc out=$out"; fi
# The budget in rows and the simulator's policy settings must agree (planted: 3000 rows
# against hisparse_budget_k = 2, i.e. 4096).
sed 's/^budgte = 1$//; s/^budget = 4096$/budget = 3000/' "$tmp/cfg.ini" > "$tmp/cfg2.ini"
out=$($dhcal simulate --profile models/hw/h200.ini --out "$tmp/sim" --configs "$tmp/cfg2.ini" a 2>&1); rc=$?
if [ $rc -eq 1 ] && echo "$out" | grep -q "budget 3000 rows, but its simulator settings give 4096" && [ ! -e "$tmp/sim" ]
then pass configs_budget_mismatch; else fail configs_budget_mismatch "rc=$rc out=$out"; fi
