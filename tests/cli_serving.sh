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

# MTP (kind = mtp, sim/spec.h): a draft whose every draft is rejected costs its draft forwards
# and a 4-token verification for nothing, so it is slower than plain decoding; one whose every
# draft is accepted emits num_steps + 1 = 4 tokens per request and step (30 steps: no request
# is near its end, where the positions left would cap the drafts).
mtp_draft() { # file, marginal
  sed -e '/^\[accept\./,$d' models/drafts/glm53-mtp.ini > "$1"
  printf '[accept.ctx_any]\nmarginal = %s\n' "$2" >> "$1"
}
mtp_draft "$T/zero.ini" "0, 0, 0"
mtp_draft "$T/one.ini" "1, 1, 1"
$S --quiet --policy hisparse --steps 30 --json "$T/plain.json" 2> "$T/err0"
$S --quiet --policy hisparse+mtp --draft "$T/zero.ini" --steps 30 --json "$T/zero.json" 2> "$T/err1"
$S --quiet --policy hisparse+mtp --draft "$T/one.ini" --steps 30 --json "$T/one.json" 2> "$T/err2"
# A run's figure (a key of "spec" when the run's own has none).
jv() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["runs"][0]; print(r[sys.argv[2]] if sys.argv[2] in r else r["spec"][sys.argv[2]])' "$1" "$2"; }
if python3 -c 'import sys; sys.exit(not float(sys.argv[1]) < float(sys.argv[2]))' "$(jv "$T/zero.json" tok_s_per_gpu)" "$(jv "$T/plain.json" tok_s_per_gpu)"
then ok mtp_accept_zero_slower; else bad mtp_accept_zero_slower "$(cat "$T/err0" "$T/err1")"; fi
if [ "$(jv "$T/one.json" tokens_per_step)" = 4 ] && [ "$(jv "$T/zero.json" tokens_per_step)" = 1 ]
then ok mtp_accept_one_steps_plus_one; else bad mtp_accept_one_steps_plus_one "$(jv "$T/one.json" tokens_per_step) $(cat "$T/err2")"; fi

# SGLang's adaptive rule turns speculation off from 64 requests per batch (its default table):
# at 512 requests on 8 GPUs every step is a plain one; at 128 (16 per GPU) it keeps 3 steps.
$S --quiet --policy hisparse+mtp --concurrency 512 --steps 20 --set spec.adaptive=models/spec/sglang-adaptive.ini \
   --json "$T/ad512.json" 2> "$T/err"
$S --quiet --policy hisparse+mtp --steps 20 --set spec.adaptive=models/spec/sglang-adaptive.ini --json "$T/ad128.json" 2>> "$T/err"
if [ "$(jv "$T/ad512.json" tokens_per_step)" = 1 ] && [ "$(jv "$T/ad512.json" mean_verify_len)" = 0 ] &&
   [ "$(jv "$T/ad128.json" mean_verify_len)" = 3 ]
then ok mtp_adaptive_off_at_load; else bad mtp_adaptive_off_at_load "$(cat "$T/err")"; fi
# vLLM V0's cut-off: more than 8 requests in the batch, no drafts.
$S --quiet --policy hisparse+mtp --steps 10 --set spec.disable_batch_size=8 --json "$T/dbs.json" 2> "$T/err"
if [ "$(jv "$T/dbs.json" mean_verify_len)" = 0 ]; then ok mtp_disable_batch_size; else bad mtp_disable_batch_size "$(cat "$T/err")"; fi

# Bad MTP drafts and rules: one error line each.
sed 's/^num_draft_tokens = 4/num_draft_tokens = 5/' models/drafts/glm53-mtp.ini > "$T/bad1.ini"
expect_err mtp_draft_tokens_rule "num_steps + 1" --policy hisparse+mtp --draft "$T/bad1.ini"
sed 's/^layer_kind = moe_own/layer_kind = nosuch/' models/drafts/glm53-mtp.ini > "$T/bad2.ini"
expect_err mtp_layer_kind "no layer of that kind" --policy hisparse+mtp --draft "$T/bad2.ini"
sed 's/^marginal = 0.750, 0.600, 0.450/marginal = 0.750, 0.800, 0.450/' models/drafts/glm53-mtp.ini > "$T/bad3.ini"
expect_err mtp_table_rises "cannot rise" --policy hisparse+mtp --draft "$T/bad3.ini"
sed 's/^\[bs.8\]/[bs.0]/' models/spec/sglang-adaptive.ini > "$T/ad.ini"
expect_err adaptive_bad_slot "bs.N" --policy hisparse+mtp --set spec.adaptive="$T/ad.ini"
expect_err adaptive_dspark "DSpark" --policy hisparse+dspark --set spec.adaptive=models/spec/sglang-adaptive.ini
