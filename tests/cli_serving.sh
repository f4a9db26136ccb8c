#!/bin/sh
# tests/cli_serving.sh: bin/dhsim's serving modes from the command line: tensor-parallel
# attention (sim/tp.h) -- attn_tp = 1 given explicitly is today's model byte for byte, a TP
# instance runs, its bad keys are one error line each.
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
ok() { echo "PASS $1"; }
bad() { echo "FAIL $1${2:+: $2}"; }
S=./bin/dhsim
[ -x "$S" ] || { echo "FAIL cli_serving: $S not built"; exit 1; }
TP8=models/instances/glm53-h200x8-tp8.ini

# One error line naming the file and the key, non-zero exit, no output file.
expect_err() { # name, pattern, dhsim args...
  name=$1; pat=$2; shift 2
  rm -f "$T/j.json"
  $S --quiet --steps 3 --json "$T/j.json" "$@" > "$T/out" 2> "$T/err"; rc=$?
  if [ $rc -ne 0 ] && [ "$(wc -l < "$T/err")" -eq 1 ] && grep -q -- "$pat" "$T/err" && [ ! -e "$T/j.json" ]
  then ok "$name"; else bad "$name" "rc=$rc $(cat "$T/err")"; fi
}

$S --quiet --policy hisparse,resident --steps 12 --json "$T/a.json" 2> "$T/e1" &&
  $S --quiet --policy hisparse,resident --steps 12 --json "$T/b.json" --set instance.attn_tp=1 2> "$T/e2"
if cmp -s "$T/a.json" "$T/b.json"; then ok tp1_is_todays_model; else bad tp1_is_todays_model "$(cat "$T/e1" "$T/e2")"; fi

# Eight ranks emit one group's tokens: tokens/s per GPU is the group's tokens over the measured
# time over 8.
if $S --quiet --config $TP8 --policy hisparse --steps 12 --json "$T/tp.json" 2> "$T/err" &&
   python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["runs"][0]
sys.exit(abs(r["tok_s_per_gpu"] - r["measured_tokens"] / r["measured_time_s"] / 8) > 1e-9 * r["tok_s_per_gpu"])' "$T/tp.json"
then ok tp8_tokens_per_gpu; else bad tp8_tokens_per_gpu "$(cat "$T/err")"; fi
expect_err tp_exceeds_gpus "attention_dp x attn_tp" --set instance.attn_tp=2
expect_err tp_not_whole "attn_tp = 2.5" --set instance.attention_dp=1 --set instance.attn_tp=2.5
expect_err tp_needs_allreduce "attn_tp_allreduce_us" --set instance.attention_dp=1 --set instance.attn_tp=8
expect_err tp1_rejects_allreduce "attn_tp = 1" --set instance.attn_tp_allreduce_us=10
