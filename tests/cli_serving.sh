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

# The figures of a --json file without what it records of its inputs (which name the command line).
figs() { python3 -c 'import json, sys
d = json.load(open(sys.argv[1])); d.pop("inputs", None)
for r in d["runs"]: r.pop("inputs", None)
print(json.dumps(d, sort_keys=True))' "$1"; }
$S --quiet --policy hisparse,resident --steps 12 --json "$T/a.json" 2> "$T/e1" &&
  $S --quiet --policy hisparse,resident --steps 12 --json "$T/b.json" --set instance.attn_tp=1 2> "$T/e2"
if [ -s "$T/b.json" ] && [ "$(figs "$T/a.json")" = "$(figs "$T/b.json")" ]; then ok tp1_is_todays_model; else bad tp1_is_todays_model "$(cat "$T/e1" "$T/e2")"; fi

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
expect_err tp1_rejects_table "attn_tp = 1" --set instance.attn_tp_allreduce=models/hw/allreduce-h200x8.ini
expect_err tp_table_or_nccl "both given" --config $TP8 --set instance.attn_tp_allreduce_us=10
expect_err tp_table_needs_curve "attn_tp_allreduce_curve" --config $TP8 --set instance.attn_tp_allreduce_curve=
expect_err tp_table_unknown_curve "no \[curve.ring\]" --config $TP8 --set instance.attn_tp_allreduce_curve=ring
expect_err tp_table_ranks "attn_tp = 4" --config $TP8 --set instance.attn_tp=4
# Tensor-parallel MoE (sim/cost.h moe_tp): exclusive with expert parallelism, a whole number,
# the whole instance, with its all-reduce table; moe_tp = 1 given explicitly is today's model.
MTP=models/instances/glm53-h200x8-sglang-moetp.ini
expect_err moetp_with_ep "not both" --config $MTP --set instance.moe_ep=8
expect_err moetp_not_whole "moe_tp = 2.5 is not a whole number" --config $MTP --set instance.moe_tp=2.5
expect_err moetp_zero "moe_tp = 0 is outside" --config $MTP --set instance.moe_tp=0
expect_err moetp_not_gpus "moe_tp = 4 is not gpus" --config $MTP --set instance.moe_tp=4
expect_err moetp_needs_whole_group "attention_dp x attn_tp = gpus" --config $MTP --set instance.attention_dp=4
expect_err moetp_unknown_curve "no \[curve.ring\]" --config $MTP --set instance.moe_tp_allreduce_curve=ring
expect_err moetp1_rejects_table "moe_tp = 1" --set instance.moe_tp_allreduce=models/hw/allreduce-h200x8.ini
expect_err head_multiple_whole "prefill_attn_head_multiple = 2.5 is not a whole number" --set instance.prefill_attn_head_multiple=2.5
expect_err head_multiple_range "prefill_attn_head_multiple" --set instance.prefill_attn_head_multiple=0
# The measured fused_moe table (sim/fmoe.h): tokens beyond its last M are extrapolated and the
# run says so, under moe_tp_experts_m with the table's range; inside it, no such note.
$S --config $MTP --policy resident --steps 4 --concurrency 800 --set workload.prompt_len=2000 > "$T/fm_out.txt" 2>&1
$S --config $MTP --policy resident --steps 4 --concurrency 64 --set workload.prompt_len=2000 > "$T/fm_in.txt" 2>&1
if grep -q 'moe_tp_experts_m up to .* the fitted max 512' "$T/fm_out.txt" && ! grep -q moe_tp_experts_m "$T/fm_in.txt"
then ok moetp_table_range_noted; else bad moetp_table_range_noted "$(grep note "$T/fm_out.txt" "$T/fm_in.txt")"; fi
$S --quiet --policy resident --steps 12 --json "$T/m1.json" 2> "$T/e1" &&
  $S --quiet --policy resident --steps 12 --json "$T/m2.json" --set instance.moe_tp=1 2> "$T/e2"
if [ -s "$T/m2.json" ] && [ "$(figs "$T/m1.json")" = "$(figs "$T/m2.json")" ]; then ok moetp1_is_todays_model; else bad moetp1_is_todays_model "$(cat "$T/e1" "$T/e2")"; fi

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
# at 80 requests per GPU every step is a plain one; at 128 (16 per GPU) it keeps 3 steps.
# (80 per GPU need short prompts and a larger static share: the memory plan holds 17.6 GB of KV)
$S --quiet --policy hisparse+mtp --concurrency 640 --steps 20 --set spec.adaptive=models/spec/sglang-adaptive.ini \
   --set workload.prompt_len=8000 --set instance.mem_fraction_static=0.95 --json "$T/ad512.json" 2> "$T/err"
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
sed 's/^marginal = 0.720, 0.566, 0.420/marginal = 0.720, 0.800, 0.420/' models/drafts/glm53-mtp.ini > "$T/bad3.ini"
expect_err mtp_table_rises "cannot rise" --policy hisparse+mtp --draft "$T/bad3.ini"

# DeepSeek-V4-Flash (the V4.1 stand-in) with its own MTP draft (models/drafts/dsv41flash-mtp.ini,
# found from the model's name): MTP-1 verifies one draft per request and step, accepts it at
# most once (1 to 2 tokens per step), keeps the MTP layer's window KV only, and a draft whose
# window is absent keeps the whole context (more draft KV).
V4=models/instances/dsv41flash-h200x4.ini
$S --quiet --config $V4 --policy hisparse --spec mtp --steps 12 --concurrency 64 --json "$T/v4.json" 2> "$T/err"
sed '/^window = 128/d' models/drafts/dsv41flash-mtp.ini > "$T/v4whole.ini"
$S --quiet --config $V4 --policy hisparse --spec mtp --draft "$T/v4whole.ini" --steps 12 --concurrency 64 \
   --json "$T/v4w.json" 2>> "$T/err"
v4() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["runs"][0]; print(r["spec"]["mode"], r["spec"]["mean_verify_len"], 1 < r["spec"]["tokens_per_step"] < 2, r["spec"]["draft_peak"])' "$1"; }
if v4 "$T/v4.json" | grep -q '^mtp 1 True ' && python3 -c 'import sys; sys.exit(not float(sys.argv[1]) < float(sys.argv[2]))' \
   "$(v4 "$T/v4.json" | cut -d' ' -f4)" "$(v4 "$T/v4w.json" | cut -d' ' -f4)"
then ok mtp_v4_flash_draft; else bad mtp_v4_flash_draft "$(v4 "$T/v4.json") $(cat "$T/err")"; fi
sed 's/^\[bs.8\]/[bs.0]/' models/spec/sglang-adaptive.ini > "$T/ad.ini"
expect_err adaptive_bad_slot "bs.N" --policy hisparse+mtp --set spec.adaptive="$T/ad.ini"
expect_err adaptive_dspark "DSpark" --policy hisparse+dspark --set spec.adaptive=models/spec/sglang-adaptive.ini

# Colocated chunked prefill (sim/prefill.h). A prefill-only run (one output token per request,
# one request per GPU, resident: no host tier) is bound by its GEMMs alone: at most
# fp8_flops x mma_efficiency / (2 x active_params) prompt tokens per second on the whole GPU
# (the profile's and the model's numbers, read here); its attention, indexer and all-to-all
# make it slower (at 8K context the all-to-all of 2048-token chunks alone is about a fifth), but
# not by 4x.
ini() { awk -v s="[$2]" -v k="$3" '$0 == s { in_s = 1; next } /^\[/ { in_s = 0 } in_s && $1 == k { print $3; exit }' "$1"; }
F=$(ini models/hw/h200.ini hw fp8_flops); E=$(ini models/hw/h200.ini hw mma_efficiency); A=$(ini models/glm53.ini model active_params)
PF="--set workload.prompt_len=8192 --set workload.output_len=1 --set workload.output_len_max=1 --set prefill.mode=chunked --set prefill.chunk_tokens=2048"
$S --quiet --policy resident --concurrency 8 --steps 6 $PF --json "$T/pf.json" 2> "$T/err"
if python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["runs"][0]
f, e, a = map(float, sys.argv[2:5]); bound = f * e / (2 * a); got = r["completed"] * 8192 / r["sim_time_s"]
print("prefill tokens/s", got, "bound", bound); sys.exit(not (r["completed"] >= 6 and bound / 4 < got <= bound))' "$T/pf.json" "$F" "$E" "$A"
then ok prefill_only_bound; else bad prefill_only_bound "$(cat "$T/err")"; fi
# Alternate (SGLang's default): a step waits for the prompts' iterations, so its TPOT is above
# the disaggregated one; mixed steps carry a chunk each; the disaggregated default is unchanged
# by an explicit mode = disaggregated.
CO="--set workload.prompt_len=8192 --set prefill.mode=chunked --set prefill.chunk_tokens=1024"
$S --quiet --policy hisparse --steps 20 --set workload.prompt_len=8192 --json "$T/dis.json" 2> "$T/err"
$S --quiet --policy hisparse --steps 20 $CO --set prefill.mixing=mixed --json "$T/mix.json" 2>> "$T/err"
$S --quiet --policy hisparse --steps 20 --set workload.prompt_len=8192 --set prefill.mode=disaggregated --json "$T/dis2.json" 2>> "$T/err"
if python3 -c 'import json,sys; d, m = (json.load(open(p))["runs"][0] for p in sys.argv[1:3]); sys.exit(not m["tpot_p50_s"] > 2 * d["tpot_p50_s"])' "$T/dis.json" "$T/mix.json" &&
   [ "$(figs "$T/dis.json")" = "$(figs "$T/dis2.json")" ]
then ok prefill_mixed_slower_disagg_unchanged; else bad prefill_mixed_slower_disagg_unchanged "$(cat "$T/err")"; fi
expect_err prefill_needs_chunk "chunk_tokens" --set prefill.mode=chunked

# [trace] share = false (the generator's streams in place, no records): a colocated HiSparse run
# and a speculative one give the same figures as with the records; the comparison can fail (a
# second seed's run differs).
SH="--policy hisparse,adaptive+dflash2 --steps 40 $CO"
$S --quiet $SH --json "$T/sh1.json" 2> "$T/err" && $S --quiet $SH --set trace.share=false --json "$T/sh0.json" 2>> "$T/err" &&
  $S --quiet $SH --set trace.share=false --seed 2 --json "$T/sh2.json" 2>> "$T/err"
if [ -s "$T/sh0.json" ] && [ "$(figs "$T/sh1.json")" = "$(figs "$T/sh0.json")" ] && [ "$(figs "$T/sh0.json")" != "$(figs "$T/sh2.json")" ]
then ok trace_share_off_same_figures; else bad trace_share_off_same_figures "$(cat "$T/err")"; fi
