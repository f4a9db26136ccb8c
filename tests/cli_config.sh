#!/bin/sh
# docs/CONFIG.md is generated from the tables the config loaders validate with
# (bin/dhconfig schema, common/cfgkey.h): the committed page must be that output, and a
# page with one row changed must be caught (the comparison can fail). Every shipped
# hardware profile loads (the tables accept what the repository ships).
cd "$(dirname "$0")/.." || exit 1
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
ok() { echo "PASS $1"; }
bad() { echo "FAIL $1: $2"; }
if bin/dhconfig schema > "$T/CONFIG.md" && cmp -s "$T/CONFIG.md" docs/CONFIG.md
then ok config_doc_matches_tables; else bad config_doc_matches_tables "regenerate: bin/dhconfig schema > docs/CONFIG.md"; fi
# A planted drift: one range edited in a copy of the page.
sed 's/| 1000000 .. 1e+15 |/| 1000000 .. 2e+15 |/' docs/CONFIG.md > "$T/drift.md"
if ! cmp -s "$T/drift.md" docs/CONFIG.md && ! cmp -s "$T/CONFIG.md" "$T/drift.md"
then ok config_doc_drift_caught; else bad config_doc_drift_caught "the planted edit went unnoticed"; fi
# Every key the page lists is one the tables hold, once per section.
dups=$(grep '^| `\[' docs/CONFIG.md | awk -F'|' '{print $2 $3}' | sort | uniq -d)
if [ -z "$dups" ]; then ok config_doc_keys_unique; else bad config_doc_keys_unique "$dups"; fi
for p in models/hw/h200.ini models/hw/h200-datasheet.ini models/hw/h100-sxm.ini models/hw/b200.ini; do
  if bin/dhcal check-profile $p > /dev/null 2> "$T/err"
  then ok "profile_loads_$(basename $p .ini)"; else bad "profile_loads_$(basename $p .ini)" "$(cat "$T/err")"; fi
done
out=$(bin/dhconfig nonsense 2>&1); rc=$?
if [ $rc -eq 1 ] && [ "$out" = "usage: dhconfig schema | dhconfig check FILE..." ]; then ok dhconfig_usage; else bad dhconfig_usage "rc=$rc out=$out"; fi
# Every key of every shipped config file has its row in the page's tables; a planted key
# that no table has is named.
if bin/dhconfig check models/*.ini models/hw/*.ini models/instances/*.ini models/drafts/*.ini sweeps/*.ini \
     kernels/replay/configs.ini traces/presets/*.ini analysis/deployments/*.ini 2> "$T/err"
then ok config_every_shipped_key_documented; else bad config_every_shipped_key_documented "$(cat "$T/err")"; fi
mkdir -p "$T/models/hw"
sed 's/^sms = 132$/sms = 132\nsm_count = 132/' models/hw/h200-datasheet.ini > "$T/models/hw/planted.ini"
out=$(bin/dhconfig check "$T/models/hw/planted.ini" 2>&1); rc=$?
if [ $rc -eq 1 ] && [ "$out" = "dhconfig: $T/models/hw/planted.ini: [hw] sm_count is in no schema of this file (models/hw/NAME.ini)" ]
then ok config_check_names_undocumented_key; else bad config_check_names_undocumented_key "rc=$rc out=$out"; fi
# docs/HARDWARE.md's worked example: a scaled H200 with 6 TB/s of HBM (written here with an
# absolute base) runs, is faster than the H200, and by less than its bandwidth ratio (the
# launches and the PCIe fetch do not scale); an unchanged scaled copy gives the H200's figure.
printf '[profile]\nbase = %s/models/hw/h200.ini\n\n[hw]\nname = h200-hbm6\nhbm_bw = 6e12\n' "$PWD" > "$T/h200-hbm6.ini"
printf '[profile]\nbase = %s/models/hw/h200.ini\n\n[hw]\nname = h200\n' "$PWD" > "$T/same.ini"
tok() { bin/dhsim --policy hisparse --steps 40 --quiet --json - "$@" | sed -n 's/.*"tok_s_per_gpu": \([0-9.e+-]*\).*/\1/p'; }
a=$(tok); b=$(tok --set instance.hw="$T/h200-hbm6.ini"); c=$(tok --set instance.hw="$T/same.ini")
if [ -n "$a" ] && [ -n "$b" ] && awk -v a="$a" -v b="$b" 'BEGIN { exit !(b > a * 1.01 && b < a * 6 / 4.8) }' && [ "$a" = "$c" ]
then ok hardware_doc_example_scales; else bad hardware_doc_example_scales "h200 $a, hbm6 $b, unchanged copy $c"; fi
