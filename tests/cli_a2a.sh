#!/bin/sh
# tests/cli_a2a.sh: bin/dha2a without a GPU (--host moves the bytes with memcpy through the same
# block layout and checker the NCCL path uses; --fit-from refits a CSV). Prints PASS/FAIL per case.
# Byte counts are checked against the message formula of kernels/a2a/README.md recomputed here
# from shapes.ini, for routings whose fan-out is known without running the router.
bin=./bin/dha2a
shapes=kernels/a2a/shapes.ini
if [ ! -x "$bin" ]; then
  # The Makefile builds it whenever it found nvcc and NCCL; ask it what it found.
  if [ "$(make -s --no-print-directory print-BUILD_CUDA)" = 1 ] && [ -n "$(make -s --no-print-directory print-NCCL_LIB)" ]; then
    echo "FAIL a2a_built (nvcc and NCCL exist but bin/dha2a was not built)"
  else
    echo "PASS a2a_not_built_without_nvcc_or_nccl"
  fi
  exit 0
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ok() { echo "PASS $1"; }
bad() { echo "FAIL $1${2:+ ($2)}"; }

# One value of a model section of shapes.ini.
key() { awk -F'[=;]' -v s="[$1]" -v k="$2" '/^\[/{in_s=($0==s)} in_s && $1 ~ "^"k" *$" {gsub(/ /,"",$2); print $2}' "$shapes"; }
dmsg() { echo $(( $(key "$1" dispatch_header_bytes) + $(key "$1" hidden) * $(key "$1" dispatch_elem_bytes) \
  + $(key "$1" hidden) / $(key "$1" dispatch_scale_group) * $(key "$1" dispatch_scale_bytes) \
  + $(key "$1" topk) * $(key "$1" dispatch_route_bytes) )); }
cmsg() { echo $(( $(key "$1" hidden) * $(key "$1" combine_elem_bytes) )); }
# bytes_per_rank of one CSV row: model phase gpus tokens.
bpr() { awk -F, -v m="$2" -v p="$3" -v g="$4" -v t="$5" '$1==m && $2==p && $3==g && $4==t {print $7}' "$1"; }

# 1. Every model, phase, rank count and token count passes the host exchange and check.
if $bin --host --gpus 1,2,4,8 --tokens 1,3,64 --out "$tmp/all.csv" 2>"$tmp/err" &&
   [ "$(tail -n +2 "$tmp/all.csv" | wc -l)" -eq $((2 * 2 * 4 * 3)) ] &&
   ! cut -d, -f13 "$tmp/all.csv" | tail -n +2 | grep -qv '^host$'; then ok a2a_host_all_points
else bad a2a_host_all_points "$(cat "$tmp/err")"; fi

# 2. Byte counts against the formula. Expert dedup sends k copies of every token whatever the
# routing; one rank receives each token once under rank dedup; balanced routing on 8 ranks sends
# every GLM-5.3 token to 8 distinct ranks (experts E/k apart, E/8 experts per rank).
fails=""
for m in glm-5.3 deepseek-v4.1-flash; do
  k=$(key $m topk); d=$(dmsg $m); c=$(cmsg $m)
  $bin --host --gpus 4 --tokens 5 --models $m --dedup expert --seed 7 --out "$tmp/e.csv" 2>/dev/null || fails="$fails $m-expert-run"
  [ "$(bpr "$tmp/e.csv" $m dispatch 4 5)" = $((5 * k * d)) ] || fails="$fails $m-expert-dispatch"
  [ "$(bpr "$tmp/e.csv" $m combine 4 5)" = $((5 * k * c)) ] || fails="$fails $m-expert-combine"
  $bin --host --gpus 1 --tokens 9 --models $m --out "$tmp/r.csv" 2>/dev/null || fails="$fails $m-rank-run"
  [ "$(bpr "$tmp/r.csv" $m dispatch 1 9)" = $((9 * d)) ] || fails="$fails $m-rank-dispatch"
  [ "$(bpr "$tmp/r.csv" $m combine 1 9)" = $((9 * c)) ] || fails="$fails $m-rank-combine"
done
$bin --host --gpus 8 --tokens 16 --models glm-5.3 --routing balanced --out "$tmp/b.csv" 2>/dev/null
[ "$(bpr "$tmp/b.csv" glm-5.3 dispatch 8 16)" = $((16 * 8 * $(dmsg glm-5.3))) ] || fails="$fails balanced"
if [ -z "$fails" ]; then ok a2a_bytes_match_formula; else bad a2a_bytes_match_formula "$fails"; fi

# 3. A planted fault (one flipped byte after the exchange) is caught, with no CSV written.
if ! $bin --host --gpus 8 --tokens 4 --plant-fault --out "$tmp/f.csv" 2>"$tmp/err" &&
   grep -q 'check failed on rank' "$tmp/err" && [ ! -e "$tmp/f.csv" ]; then ok a2a_planted_fault_caught
else bad a2a_planted_fault_caught "$(cat "$tmp/err")"; fi

# 4. Same seed => byte-identical output; another seed routes differently.
$bin --host --gpus 8 --tokens 32 --seed 3 --out "$tmp/s1.csv" 2>/dev/null
$bin --host --gpus 8 --tokens 32 --seed 3 --out "$tmp/s2.csv" 2>/dev/null
$bin --host --gpus 8 --tokens 32 --seed 4 --out "$tmp/s3.csv" 2>/dev/null
if cmp -s "$tmp/s1.csv" "$tmp/s2.csv" && ! cmp -s "$tmp/s1.csv" "$tmp/s3.csv"; then ok a2a_deterministic
else bad a2a_deterministic; fi

# 5. Bad input: a misspelt key, a missing key, experts that do not split over the GPUs.
sed 's/^hidden = 6144/hiden = 6144/' "$shapes" >"$tmp/typo.ini"
sed '/^topk = 8/d' "$shapes" >"$tmp/missing.ini"
if ! $bin --host --gpus 2 --shapes "$tmp/typo.ini" --out "$tmp/x.csv" 2>"$tmp/e1" &&
   grep -q "typo.ini' line [0-9]*: unknown key 'hiden' in \[glm-5.3\]" "$tmp/e1" &&
   ! $bin --host --gpus 2 --shapes "$tmp/missing.ini" --out "$tmp/x.csv" 2>"$tmp/e2" &&
   grep -q "\[glm-5.3\] lacks key 'topk'" "$tmp/e2" &&
   ! $bin --host --gpus 3 --out "$tmp/x.csv" 2>"$tmp/e3" &&
   grep -q "do not split evenly over 3 GPUs" "$tmp/e3" && [ ! -e "$tmp/x.csv" ] &&
   [ "$(cat "$tmp/e1" "$tmp/e2" "$tmp/e3" | wc -l)" -eq 3 ]; then ok a2a_bad_input_one_line
else bad a2a_bad_input_one_line "$(cat "$tmp/e1" "$tmp/e2" "$tmp/e3")"; fi

# 6. The alpha-beta fit recovers a line it was given (latency 4 us, 250 GB/s = 250e3 B/us) and
# marks counts without rows unmeasured; an unchecked row is refused.
{ echo "model,phase,gpus,tokens_per_gpu,hidden,topk,bytes_per_rank,median_us,p10_us,p90_us,algbw_gbps,busbw_gbps,checked,device"
  for b in 1000 50000 200000 1000000; do
    for p in dispatch combine; do
      echo "m,$p,4,1,64,2,$b,$(awk -v b=$b 'BEGIN{printf "%.6f", 4 + b / 250e3}'),,,,,yes,test"
    done
  done; } >"$tmp/fit.csv"
if $bin --fit-from "$tmp/fit.csv" --fit-out "$tmp/fit.ini" 2>"$tmp/err" &&
   awk '/^\[gpus.4.dispatch\]/{s=1} s && /^latency_us/{print; exit}' "$tmp/fit.ini" | grep -q '= 4.000$' &&
   awk '/^\[gpus.4.combine\]/{s=1} s && /^bandwidth_gbps/{print; exit}' "$tmp/fit.ini" | grep -q '= 250.00$' &&
   awk '/^\[gpus.8.dispatch\]/{s=1} s && /^status/{print; exit}' "$tmp/fit.ini" | grep -q 'unmeasured' &&
   sed 's/,yes,test$/,no,test/' "$tmp/fit.csv" >"$tmp/unchecked.csv" &&
   ! $bin --fit-from "$tmp/unchecked.csv" --fit-out "$tmp/u.ini" 2>/dev/null && [ ! -e "$tmp/u.ini" ]
then ok a2a_fit_recovers_line; else bad a2a_fit_recovers_line "$(cat "$tmp/err")"; fi

# 7. Random routing reaches as many ranks per token as uniform top-k predicts:
# G * (1 - C(E - E/G, k) / C(E, k)), within 0.1 over 2048 tokens (standard error about 0.02).
$bin --host --gpus 8 --tokens 256 --out "$tmp/fan.csv" 2>/dev/null
fails=""
for m in glm-5.3 deepseek-v4.1-flash; do
  E=$(key $m experts); k=$(key $m topk)
  awk -v got="$(bpr "$tmp/fan.csv" $m dispatch 8 256)" -v msg="$(dmsg $m)" -v E=$E -v k=$k 'BEGIN {
    p = 1; for (i = 0; i < k; i++) p *= (E - E / 8 - i) / (E - i);
    want = 8 * (1 - p); have = got / 256 / msg;
    exit !(have - want < 0.1 && want - have < 0.1) }' || fails="$fails $m"
done
if [ -z "$fails" ]; then ok a2a_random_fanout_matches_theory; else bad a2a_random_fanout_matches_theory "$fails"; fi
