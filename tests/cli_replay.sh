#!/bin/sh
# GPU replay calibration and validation on the committed H200 data (no GPU needed):
# - the calibration (bin/dhcal calibrate) re-run on the committed CSVs reproduces
#   models/hw/h200.ini byte for byte, so the committed profile is the output of the data;
# - with that profile the simulator reproduces every step's misses exactly and meets the
#   latency targets on the held-out configurations (kernels/replay/validate.sh);
# - planted faults are caught: one step's miss count off by one row, the datasheet profile
#   (no kernel-fitted keys) missing the latency targets;
# - the replay refit never reads held-out configurations: scaling their measured times
#   leaves the refitted value unchanged, scaling a fitted one moves it.
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
R=measurements/h200/replay-glm53-16x100k.csv
ok() { echo "PASS $1"; }
bad() { echo "FAIL $1${2:+: $2}"; }

if bin/dhcal calibrate "$T/h200.ini" > "$T/cal.txt" 2>&1 && cmp -s "$T/h200.ini" models/hw/h200.ini
then ok calibrate_reproduces_profile; else bad calibrate_reproduces_profile "$(tail -3 "$T/cal.txt")"; fi

# Without the replay's diagnostics (fetch_interference's inputs): one error line, exit 1, no profile.
mkdir -p "$T/bench"
cp measurements/h200/default-*.csv measurements/h200/fetch-calib-b2b20.csv measurements/h200/fetch-beside-b2b20.csv measurements/h200/attention-attention-b2b20.csv \
   measurements/h200/topk-scale-b2b20.csv measurements/h200/indexer-topk6-b2b20.csv \
   measurements/h200/indexer-scale.csv "$T/bench/"
bin/dhcal calibrate "$T/nodiag.ini" "$T/bench" > "$T/nodiag.txt" 2>&1; rc=$?
if [ $rc -eq 1 ] && [ ! -e "$T/nodiag.ini" ] && [ "$(grep -c '^dhcal: calibrate: ' "$T/nodiag.txt")" -eq 1 ] &&
   grep -q "fetch-beside.csv: cannot read the replay diagnostic" "$T/nodiag.txt"
then ok calibrate_needs_diagnostics; else bad calibrate_needs_diagnostics "rc=$rc $(tail -2 "$T/nodiag.txt")"; fi

# A malformed prefill.ini (the rates carried into the profile as they are): one error line
# naming that file and the key, exit 1, no profile.
cp measurements/h200/*.csv "$T/bench/"
for case in "prefill_attn_flops = fast:is not a number" "prefill_attn_flops = 1e30:is outside" \
            "prefill_magic = 3:is not a key of the profile schema" "prefill_gemm_m = 1024, x:prefill_gemm_m"; do
  line=${case%%:*}; needle=${case#*:}
  { sed '/^prefill_attn_flops/d' measurements/h200/prefill.ini; echo "$line"; } > "$T/bench/prefill.ini"
  [ "${line%% *}" = prefill_gemm_m ] && { sed '/^prefill_gemm_m/d' measurements/h200/prefill.ini; echo "$line"; } > "$T/bench/prefill.ini"
  bin/dhcal calibrate "$T/badcarry.ini" "$T/bench" > "$T/badcarry.txt" 2>&1; rc=$?
  if [ $rc -eq 1 ] && [ ! -e "$T/badcarry.ini" ] && tail -1 "$T/badcarry.txt" | grep -q "prefill.ini.*$needle"
  then ok "calibrate_rejects_bad_prefill_ini ${line%% *}"; else bad "calibrate_rejects_bad_prefill_ini $line" "rc=$rc $(tail -1 "$T/badcarry.txt")"; fi
done
rm -f "$T/bench/prefill.ini"

# The attention version: the fit takes the one the replay records on its "# device:" line, and
# the steps without the fetch and the fetch kernels' times in the steps must come from it.
# The replay with version 39 beside the committed diagnostics (version 8): one error line naming
# the file without the fetch, exit 1, no profile.
cp measurements/h200/prefill.ini "$T/bench/"
V39=measurements/h200/replay-glm53-16x100k-v39
bin/dhcal calibrate "$T/mix.ini" "$T/bench" "$V39-attn39.csv" > "$T/mix.txt" 2>&1; rc=$?
if [ $rc -eq 1 ] && [ ! -e "$T/mix.ini" ] && [ "$(grep -c '^dhcal: calibrate: ' "$T/mix.txt")" -eq 1 ] &&
   grep -q "fetch-beside.csv: attention version 8, where the replay .*attn39.csv ran version 39" "$T/mix.txt"
then ok calibrate_rejects_mixed_attention_versions; else bad calibrate_rejects_mixed_attention_versions "rc=$rc $(tail -2 "$T/mix.txt")"; fi
# Two versions on one file's device lines: one error line naming the file and the line.
{ cat "$V39-attn39.csv"; sed -n 2p $R; } > "$T/two.csv"
bin/dhcal calibrate "$T/two.ini" "$T/bench" "$T/two.csv" > "$T/two.txt" 2>&1; rc=$?
if [ $rc -eq 1 ] && [ ! -e "$T/two.ini" ] && grep -q "two.csv: line 164: attention version 8, where an earlier line of the file records 39" "$T/two.txt"
then ok calibrate_rejects_two_versions_in_a_file; else bad calibrate_rejects_two_versions_in_a_file "rc=$rc $(tail -2 "$T/two.txt")"; fi
# A device line whose version is not a number: one error line naming the file and the line.
sed '2s/; attention version 39 fp8;/; attention version fp8;/' "$V39-attn39.csv" > "$T/nover.csv"
bin/dhcal calibrate "$T/nover.ini" "$T/bench" "$T/nover.csv" > "$T/nover.txt" 2>&1; rc=$?
if [ $rc -eq 1 ] && [ ! -e "$T/nover.ini" ] && [ "$(grep -c '^dhcal: calibrate: ' "$T/nover.txt")" -eq 1 ] &&
   grep -q "nover.csv: line 2: no attention version after 'attention version'" "$T/nover.txt"
then ok calibrate_rejects_bad_attention_version; else bad calibrate_rejects_bad_attention_version "rc=$rc $(tail -2 "$T/nover.txt")"; fi
# Every file with version 39 (the replay and the fetch kernels' times as measured with it; the
# steps without the fetch as measured with 8, relabelled: a fixture, not a measurement) but no
# attention line of 39 among the benchmarks: an error naming the benchmark file. With the 39 lines
# of the calibration grid added, the fit follows the replay: attention version 39 in the profile,
# its attn_bw not version 8's.
sed 's/; attention version 8 fp8;/; attention version 39 fp8;/' measurements/h200/replay-glm53-16x100k-fetch-beside.csv \
  > "$T/bench/replay-glm53-16x100k-fetch-beside.csv"
{ cat "$V39-fetch-busy.csv"; sed -n '/--fetch-only --fetch-times/,$p' measurements/h200/replay-glm53-16x100k-fetch-busy.csv; } \
  > "$T/bench/replay-glm53-16x100k-fetch-busy.csv"
bin/dhcal calibrate "$T/no39.ini" "$T/bench" "$V39-attn39.csv" > "$T/no39.txt" 2>&1; rc=$?
if [ $rc -eq 1 ] && [ ! -e "$T/no39.ini" ] && grep -q "attention-attention-b2b20.csv: no attention line of version 39" "$T/no39.txt"
then ok calibrate_needs_the_replays_attention_version; else bad calibrate_needs_the_replays_attention_version "rc=$rc $(tail -2 "$T/no39.txt")"; fi
grep ',attention,39,' measurements/h200/attention-calib-v39-b2b20.csv | sed 's/,sm_90$//' >> "$T/bench/attention-attention-b2b20.csv"
bin/dhcal calibrate "$T/v39.ini" "$T/bench" "$V39-attn39.csv" > "$T/v39.txt" 2>&1; rc=$?
bw8=$(sed -n 's/^attn_bw = //p' models/hw/h200.ini); bw39=$(sed -n 's/^attn_bw = //p' "$T/v39.ini" 2>/dev/null)
if [ $rc -eq 0 ] && grep -q "kernel attention version 39 " "$T/v39.ini" && [ -n "$bw39" ] && [ "$bw39" != "$bw8" ]
then ok calibrate_follows_the_replays_attention_version; else bad calibrate_follows_the_replays_attention_version "rc=$rc bw $bw8 $bw39 $(tail -2 "$T/v39.txt")"; fi
cp measurements/h200/replay-glm53-16x100k-fetch-beside.csv measurements/h200/replay-glm53-16x100k-fetch-busy.csv \
   measurements/h200/attention-attention-b2b20.csv "$T/bench/"
rm -f "$T/bench/prefill.ini"

if sh kernels/replay/validate.sh models/hw/h200.ini $R "$T/a" > "$T/a.txt" 2>&1 &&
   grep -q "ALL held-out configurations" "$T/a.txt"; then ok replay_validate_default; else bad replay_validate_default; cat "$T/a.txt"; fi
# 64 requests x 25K, plain steps and verification steps of 512 tokens (x 8 queries): the targets
# hold there too.
for f in replay-glm53-64x25k.csv:hs4k-r64/hisparse/plain replay-glm53-64x25k-verify.csv:sa6k-r64/adaptive+dflash2/verify; do
  if sh kernels/replay/validate.sh models/hw/h200.ini "measurements/h200/${f%%:*}" "$T/r64" > "$T/r64.txt" 2>&1 &&
     grep -q "${f#*:} (held out)" "$T/r64.txt"; then ok "replay_validate ${f%%:*}"; else bad "replay_validate ${f%%:*}"; cat "$T/r64.txt"; fi
done

# The simulator run in-process (dhcal validate --simulate) and its timeline files joined
# afterwards (--sim-timeline) give the same table: the in-process join reads the values at the
# files' precision.
TL=
for c in hs4k hs2k hs3k ad6k hs4k-seed2; do TL="$TL --sim-timeline $T/a/$c.tsv:$c:plain"; done
bin/dhcal validate --replay $R $TL --exact-misses --max-median 0.05 --max-p95 0.10 > "$T/a2.txt" 2>&1
if cmp -s "$T/a.txt" "$T/a2.txt"; then ok replay_inprocess_equals_files; else bad replay_inprocess_equals_files "$(diff "$T/a.txt" "$T/a2.txt" | head -3)"; fi
# A configuration that kernels/replay/configs.ini does not define: one error line naming it.
out=$(bin/dhcal simulate --profile models/hw/h200.ini --out "$T/u" hs2k nosuch 2>&1); rc=$?
if [ $rc -eq 1 ] && [ "$(echo "$out" | wc -l)" -eq 1 ] && echo "$out" | grep -q "no replay configuration 'nosuch'" && [ ! -e "$T/u" ]
then ok replay_unknown_config; else bad replay_unknown_config "rc=$rc $out"; fi

# Planted fault: one step's miss count off by one row (same simulator runs).
awk -F, 'BEGIN{OFS=","} $1=="hs3k" && $4=="5" {$6=$6+1} {print}' $R > "$T/planted.csv"
TL=
for c in hs4k hs2k hs3k ad6k hs4k-seed2; do TL="$TL --sim-timeline $T/a/$c.tsv:$c:plain"; done
bin/dhcal validate --replay "$T/planted.csv" $TL --exact-misses > "$T/b.txt" 2>&1
rc=$?
if [ $rc -eq 2 ] && grep -q "miss counts differ on 1 steps" "$T/b.txt"; then ok replay_planted_miss_caught; else bad replay_planted_miss_caught "rc=$rc"; fi

# The datasheet profile (no kernel-fitted keys) misses the latency targets: the check can fail.
sh kernels/replay/validate.sh models/hw/h200-datasheet.ini $R "$T/c" > "$T/c.txt" 2>&1
rc=$?
if [ $rc -eq 2 ] && grep -q "target missed" "$T/c.txt"; then ok replay_datasheet_profile_fails; else bad replay_datasheet_profile_fails "rc=$rc"; fi

if bin/dhcal check-profile models/hw/h200.ini > /dev/null 2>&1 && bin/dhcal check-profile models/hw/h200-datasheet.ini > /dev/null 2>&1
then ok replay_profiles_check; else bad replay_profiles_check; fi

# The calibrated profile records the kernel versions it was fitted on ([fitted_kernels]); its
# attention version is the one the replay it was refitted on ran.
fv=$(sed -n '/^\[fitted_kernels\]/,/^\[/s/^attention = //p' models/hw/h200.ini)
rv=$(sed -n 's/^# device:.*; attention version \([0-9]*\) .*/\1/p' $R | head -1)
if [ -n "$fv" ] && [ "$fv" = "$rv" ]; then ok profile_records_fitted_attention; else bad profile_records_fitted_attention "profile '$fv', replay '$rv'"; fi
# A replay of another attention version than the profile's is refused before anything is
# simulated: one error line naming the replay and both versions, exit 1. The datasheet profile
# (no fitted kernels) takes it.
other=$((fv + 1))
sed "s/^\(# device:.*; attention version \)$fv /\1$other /" $R > "$T/otherattn.csv"
bin/dhcal validate --replay "$T/otherattn.csv" --simulate models/hw/h200.ini > "$T/oa.txt" 2>&1; rc=$?
if [ $rc -eq 1 ] && [ "$(wc -l < "$T/oa.txt")" -eq 1 ] &&
   grep -q "otherattn.csv: attention version $other, where the profile models/hw/h200.ini was fitted on version $fv" "$T/oa.txt"
then ok validate_refuses_other_attention_version; else bad validate_refuses_other_attention_version "rc=$rc $(head -2 "$T/oa.txt")"; fi
bin/dhcal validate --replay "$T/otherattn.csv" --simulate models/hw/h200-datasheet.ini > "$T/oa2.txt" 2>&1; rc=$?
if [ $rc -eq 0 ] && grep -q "ALL held-out configurations" "$T/oa2.txt"; then ok validate_datasheet_takes_any_version; else bad validate_datasheet_takes_any_version "rc=$rc"; fi
# A malformed version in the profile: one error line naming the profile and the key.
sed 's/^attention = [0-9]*$/attention = fast/' models/hw/h200.ini > "$T/badfk.ini"
out=$(bin/dhcal check-profile "$T/badfk.ini" 2>&1); rc=$?
if [ $rc -ne 0 ] && [ "$(echo "$out" | wc -l)" -eq 1 ] && echo "$out" | grep -q "badfk.ini.*attention"
then ok profile_rejects_bad_fitted_kernel; else bad profile_rejects_bad_fitted_kernel "rc=$rc $out"; fi

# The refit reads only fitted configurations (heldout = 0): simulator runs of those two at
# two values of layer_fixed_s are all it needs; held-out measurements do not move it.
sh kernels/replay/simrun.sh models/hw/h200.ini "$T/d1" hs2k hs4k -- --set hw.layer_fixed_s=6e-05 > /dev/null 2>&1
sh kernels/replay/simrun.sh models/hw/h200.ini "$T/d2" hs2k hs4k -- --set hw.layer_fixed_s=7e-05 > /dev/null 2>&1
refit() { bin/dhcal refit --replay "$1" --key hw.layer_fixed_s --at 6e-05 "$T/d1" --at 7e-05 "$T/d2" 2>&1 | sed -n 's/^value //p'; }
awk -F, 'BEGIN{OFS=","} /^[^#]/ && $8=="1" {$5=$5*1.5} {print}' $R > "$T/held.csv"
awk -F, 'BEGIN{OFS=","} /^[^#]/ && $1=="hs2k" {$5=$5*1.05} {print}' $R > "$T/fitted.csv"
v0=$(refit $R); vh=$(refit "$T/held.csv"); vf=$(refit "$T/fitted.csv")
if [ -n "$v0" ] && [ "$v0" = "$vh" ] && [ -n "$vf" ] && [ "$vf" != "$v0" ]
then ok refit_ignores_heldout; else bad refit_ignores_heldout "'$v0' '$vh' '$vf'"; fi

# A solution that was never simulated is not written (the statistics would be a guess).
out=$(bin/dhcal refit --replay $R --key hw.layer_fixed_s --at 6e-05 "$T/d1" --at 7e-05 "$T/d2" \
      --profile models/hw/h200.ini -o "$T/x.ini" 2>&1); rc=$?
if [ $rc -eq 1 ] && echo "$out" | grep -q "run the simulator at" && [ ! -e "$T/x.ini" ]
then ok refit_unconverged_not_written; else bad refit_unconverged_not_written "rc=$rc"; fi

# Every replay configuration the project's scripts and documents name (`--run ID`) is a section
# of kernels/replay/configs.ini, so that dhreplay on a GPU does not stop at the first of them.
# The check reads the IDs off the files, so a renamed section or a stale command fails it.
missing=""
for id in $(grep -hoE -- '--run [^[:space:]"`]+' kernels/*.sh kernels/replay/*.sh README.md kernels/*.md \
              kernels/replay/*.md analysis/*.md docs/*.md 2>/dev/null | awk '{print $2}' | sort -u); do
  [ "$id" = ID ] && continue
  grep -qx "\[$id\]" kernels/replay/configs.ini || missing="$missing $id"
done
if [ -z "$missing" ] && grep -q -- '--run hs4k' kernels/calib-bench.sh
then ok replay_run_ids_exist; else bad replay_run_ids_exist "not in configs.ini:$missing"; fi
