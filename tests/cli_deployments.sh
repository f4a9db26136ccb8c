#!/bin/sh
# cli_deployments.sh: bin/dhcal deployments on the committed data points
# (analysis/deployments/): one row per file, the same table twice (deterministic),
# the CSV, the README's recorded table, a planted wrong published number that moves
# its ratio (the check can fail), and bad files that are one error line and a
# non-zero exit. Prints one PASS/FAIL line per case.
dhcal=bin/dhcal
dir=analysis/deployments
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass() { echo "PASS deployments_$1"; }
fail() { echo "FAIL deployments_$1${2:+: $2}"; }

# The committed table: exit 0, one row per .ini file, in name order.
$dhcal deployments "$dir" --csv "$tmp/t.csv" >"$tmp/t.txt" 2>"$tmp/err"; rc=$?
n=$(ls "$dir"/*.ini | wc -l)
rows=0
for f in "$dir"/*.ini; do
  id=$(basename "$f" .ini)
  grep -q "^$id " "$tmp/t.txt" && rows=$((rows + 1))
done
if [ $rc -eq 0 ] && [ "$n" -ge 5 ] && [ "$rows" -eq "$n" ] && [ "$(grep -c ' | ' "$tmp/t.txt")" -eq $((n + 2)) ]
then pass table; else fail table "rc=$rc files=$n rows=$rows $(cat "$tmp/err")"; fi

# The CSV: a header and one line per file.
if [ "$(wc -l < "$tmp/t.csv")" -eq $((n + 1)) ] && head -1 "$tmp/t.csv" | grep -q '^point,policy,sim_output_per_gpu,'
then pass csv; else fail csv; fi

# Deterministic: the same rows on a second run, of every point but the colocated HiSparse
# one (80 s of CPU; tests/cli_serving.sh runs a smaller colocated HiSparse configuration
# twice, with and without shared stream records, and compares the figures).
mkdir "$tmp/again"
for f in "$dir"/*.ini; do case $f in *glm51-lmsys-hisparse-c256.ini) ;; *) ln -s "$PWD/$f" "$tmp/again/";; esac; done
if $dhcal deployments "$tmp/again" >"$tmp/t2.txt" 2>&1 && grep -v '^glm51-lmsys-hisparse-c256 ' "$tmp/t.txt" | grep ' | ' > "$tmp/t1rows" &&
   grep ' | ' "$tmp/t2.txt" > "$tmp/t2rows" && cmp -s "$tmp/t1rows" "$tmp/t2rows"
then pass deterministic; else fail deterministic; fi

# The intervals in the CSV: each row's method follows its random inputs (analysis/deploy.h):
# none -> deterministic with half-width 0 and one run; acceptance -> 30 replications with a
# positive half-width; selections -> one run, the trend-robust batch means, a positive one.
if awk -F, 'NR > 1 {
      # the quoted gap and source fields may hold commas: count from the end
      m = $(NF - 3); r = $(NF - 2); runs = $(NF - 1); h = $(NF - 7)
      if (r == "none") ok = (m == "deterministic" && h == 0 && runs == 1)
      else if (r == "acceptance") ok = (m == "replications" && h > 0 && runs == 30)
      else if (r == "selections") ok = (m == "trend_batch_means" && h > 0 && runs == 1)
      else ok = 0
      if (!ok) { bad = bad " " $1 }; n++
    } END { if (bad != "" || n == 0) { print "rows:" bad; exit 1 } }' "$tmp/t.csv" &&
   head -1 "$tmp/t.csv" | grep -q ',sim_output_ci95_half,output_ratio_ci95_half,sim_tpot_ci95_half,tpot_ratio_ci95_half,ci_method,random_inputs,sim_runs,verdict_flips$'
then pass csv_intervals; else fail csv_intervals; fi

# The classification can fail: another [trace] seed in the instance leaves a point called
# exact (resident, MTP accepting with probability 1) byte-identical, and moves a replicated
# one (the 30 runs count from the instance's seed).
mkdir "$tmp/seed1" "$tmp/seed2"
for f in glm52-cookbook-h200-fp8-bal-c64 glm52-cookbook-h200-fp8-ll-c1; do
  inst=$(sed -n 's/^instance = //p' "$dir/$f.ini")
  sed 's/^seed = 1$/seed = 2/' "$inst" > "$tmp/inst-$f.ini"
  cp "$dir/$f.ini" "$tmp/seed1/"
  sed "s|^instance = .*|instance = $tmp/inst-$f.ini|" "$dir/$f.ini" > "$tmp/seed2/$f.ini"
done
$dhcal deployments "$tmp/seed1" --csv "$tmp/s1.csv" >/dev/null 2>&1
$dhcal deployments "$tmp/seed2" --csv "$tmp/s2.csv" >/dev/null 2>&1
b1=$(grep '^glm52-cookbook-h200-fp8-bal-c64,' "$tmp/s1.csv" | cut -d, -f3,7); b2=$(grep '^glm52-cookbook-h200-fp8-bal-c64,' "$tmp/s2.csv" | cut -d, -f3,7)
l1=$(grep '^glm52-cookbook-h200-fp8-ll-c1,' "$tmp/s1.csv" | cut -d, -f3); l2=$(grep '^glm52-cookbook-h200-fp8-ll-c1,' "$tmp/s2.csv" | cut -d, -f3)
if [ -n "$b1" ] && [ "$b1" = "$b2" ] && [ -n "$l1" ] && [ -n "$l2" ] && [ "$l1" != "$l2" ]
then pass seed_classification; else fail seed_classification "bal $b1 / $b2, ll $l1 / $l2"; fi

# The README records the table the command prints.
sed -n '/^<!-- deployments: begin -->$/,/^<!-- deployments: end -->$/p' "$dir/README.md" | sed '1,2d;$d' | sed '$d' > "$tmp/readme.txt"
if cmp -s "$tmp/readme.txt" "$tmp/t.txt"; then pass readme; else fail readme "README.md's table differs from the command's output"; fi

# A planted wrong published number: the simulation is unchanged, so its ratio moves
# by the factor planted (184.0 -> 92.0 doubles it) and the row misses its target.
mkdir "$tmp/planted"
cp "$dir/glm52-cookbook-h200-fp8-ht.ini" "$tmp/planted/"
sed -i 's/^output_per_gpu = 184.0$/output_per_gpu = 92.0/' "$tmp/planted/glm52-cookbook-h200-fp8-ht.ini"
$dhcal deployments "$tmp/planted" --csv "$tmp/p.csv" >"$tmp/p.txt" 2>&1
r1=$(grep '^glm52-cookbook-h200-fp8-ht,' "$tmp/t.csv" | cut -d, -f6)
r2=$(grep '^glm52-cookbook-h200-fp8-ht,' "$tmp/p.csv" | cut -d, -f6)
if [ -n "$r1" ] && awk -v a="$r1" -v b="$r2" 'BEGIN { exit !(b > 1.99 * a && b < 2.01 * a) }' &&
   grep '^glm52-cookbook' "$tmp/p.csv" | grep -q ',missed,' && grep -q '^0 of 1 points within targets' "$tmp/p.txt"
then pass planted_ratio_moves; else fail planted_ratio_moves "ratio $r1 -> $r2"; fi

# An unknown key: one error line naming the file and the key, exit 1.
mkdir "$tmp/unknown"
sed 's/^tpot_stat = p50$/tpot_stat = p50\ntpot_satt = p50/' "$dir/glm52-cookbook-h200-fp8-ht.ini" > "$tmp/unknown/a.ini"
out=$($dhcal deployments "$tmp/unknown" 2>&1); rc=$?
if [ $rc -eq 1 ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] && printf '%s' "$out" | grep -q "^dhcal: .*a.ini: unknown key 'tpot_satt' in \[published\]"
then pass unknown_key; else fail unknown_key "rc=$rc out=$out"; fi

# A missing source: one error line, exit 1.
mkdir "$tmp/nosource"
grep -v '^source = ' "$dir/glm52-cookbook-h200-fp8-ht.ini" > "$tmp/nosource/a.ini"
out=$($dhcal deployments "$tmp/nosource" 2>&1); rc=$?
if [ $rc -eq 1 ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] && printf '%s' "$out" | grep -q "^dhcal: .*a.ini.*source"
then pass missing_source; else fail missing_source "rc=$rc out=$out"; fi

# An empty source is as bad as none.
mkdir "$tmp/emptysource"
sed 's/^source = .*/source =/' "$dir/glm52-cookbook-h200-fp8-ht.ini" > "$tmp/emptysource/a.ini"
out=$($dhcal deployments "$tmp/emptysource" 2>&1); rc=$?
if [ $rc -eq 1 ] && printf '%s' "$out" | grep -q "source is empty"
then pass empty_source; else fail empty_source "rc=$rc out=$out"; fi

# A folder without data points, and a bad simulator override: one line, exit 1.
mkdir "$tmp/empty"
out=$($dhcal deployments "$tmp/empty" 2>&1); rc=$?
if [ $rc -eq 1 ] && printf '%s' "$out" | grep -q "holds no .ini file"; then pass empty_dir; else fail empty_dir "rc=$rc out=$out"; fi
mkdir "$tmp/badset"
sed 's/^set = /set = instance.no_such_key=1 /' "$dir/glm52-cookbook-h200-fp8-ht.ini" > "$tmp/badset/a.ini"
out=$($dhcal deployments "$tmp/badset" 2>&1); rc=$?
if [ $rc -eq 1 ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] && printf '%s' "$out" | grep -q "no_such_key"
then pass bad_override; else fail bad_override "rc=$rc out=$out"; fi
