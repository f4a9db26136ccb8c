/* prefill.c: the cost of a prefill iteration at prefill shapes; see prefill.h for the model
 * and the scheduling rules (which sim.c's run loop applies). */
#include "sim/prefill.h"
#include "common/dh_err.h"

#include <math.h>
#include <string.h>

int prefill_config_load(cfg *c, prefill_cfg *p)
{
    memset(p, 0, sizeof *p);
    const char *mode, *mixing, *hold;
    if (cfg_get_string(c, "prefill", "mode", &mode, "disaggregated") < 0 ||
        cfg_get_string(c, "prefill", "mixing", &mixing, "alternate") < 0 ||
        cfg_get_string(c, "prefill", "dp_hold", &hold, "lockstep") < 0)
        return -1;
    if (!strcmp(hold, "disjoint")) p->dp_disjoint = 1;
    else if (strcmp(hold, "lockstep") != 0)
        return dh_err("%s: [prefill] dp_hold = '%s' (expected lockstep or disjoint)", cfg_name(c), hold);
    if (!strcmp(mode, "disaggregated")) p->mode = PREFILL_DISAGG;
    else if (!strcmp(mode, "chunked")) p->mode = PREFILL_CHUNKED;
    else return dh_err("%s: [prefill] mode = '%s' (expected disaggregated or chunked)", cfg_name(c), mode);
    if (!strcmp(mixing, "alternate")) p->mixing = PREFILL_ALTERNATE;
    else if (!strcmp(mixing, "mixed")) p->mixing = PREFILL_MIXED;
    else return dh_err("%s: [prefill] mixing = '%s' (expected alternate or mixed)", cfg_name(c), mixing);
    long v;
    const long none = 0;
    if (cfg_get_int(c, "prefill", "max_running", &v, &none, 0, 1 << 24) < 0) return -1;
    p->max_running = (uint32_t)v;
    if (p->mode == PREFILL_DISAGG) {
        if (cfg_has(c, "prefill", "chunk_tokens"))
            return dh_err("%s: [prefill] chunk_tokens is given but mode = disaggregated (no prefill here)", cfg_name(c));
        return 0;
    }
    if (cfg_get_int(c, "prefill", "chunk_tokens", &v, CFG_REQUIRED, 1, 1 << 24) < 0) return -1;
    p->chunk_tokens = (uint32_t)v;
    return 0;
}

int admission_config_load(cfg *c, const prefill_cfg *pf, admission_cfg *a)
{
    memset(a, 0, sizeof *a);
    const char *mode;
    if (cfg_get_string(c, "instance", "admission", &mode, "reserve_full") < 0) return -1;
    static const char *const keys[] = { "init_new_token_ratio", "schedule_conservativeness", "min_new_token_ratio_factor",
                                        "new_token_ratio_decay_steps", "retract_decode_steps",
                                        "clip_max_new_tokens_estimation" };
    if (!strcmp(mode, "reserve_full")) {
        a->mode = ADMIT_RESERVE_FULL;
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
            if (cfg_has(c, "instance", keys[i]))
                return dh_err("%s: [instance] %s is given but admission = reserve_full (it is SGLang's scheduler's)",
                              cfg_name(c), keys[i]);
        return 0;
    }
    if (strcmp(mode, "sglang") != 0)
        return dh_err("%s: [instance] admission = '%s' (expected reserve_full or sglang)", cfg_name(c), mode);
    a->mode = ADMIT_SGLANG;
    /* SGLang's defaults: python/sglang/srt/environ.py (the four ratios and steps, the clip)
     * and server_args.py (schedule_conservativeness). */
    const double init = 0.7, cons = 1.0, minf = 0.14;
    const long decay = 600, retract = 20, clip = 4096;
    long v;
    if (cfg_get_double(c, "instance", keys[0], &a->init_new_token_ratio, &init, 0, 1) < 0 ||
        cfg_get_double(c, "instance", keys[1], &a->schedule_conservativeness, &cons, 0, 100) < 0 ||
        cfg_get_double(c, "instance", keys[2], &a->min_new_token_ratio_factor, &minf, 0, 1) < 0)
        return -1;
    if (cfg_get_int(c, "instance", keys[3], &v, &decay, 1, 1 << 30) < 0) return -1;
    a->new_token_ratio_decay_steps = (uint32_t)v;
    if (cfg_get_int(c, "instance", keys[4], &v, &retract, 0, 1 << 24) < 0) return -1;
    a->retract_decode_steps = (uint32_t)v;
    if (cfg_get_int(c, "instance", keys[5], &v, &clip, 1, 1 << 30) < 0) return -1;
    a->clip_max_new_tokens = (uint32_t)v;
    if (pf->mode != PREFILL_CHUNKED)
        return dh_err("%s: [instance] admission = sglang is the colocated scheduler's (PrefillAdder); it needs "
                      "[prefill] mode = chunked (a disaggregated decode server admits by its prealloc queue, not "
                      "modelled)", cfg_name(c));
    if (pf->mixing == PREFILL_MIXED)
        return dh_err("%s: [instance] admission = sglang runs SGLang's default scheduler (a prefill batch before the "
                      "decode batch): [prefill] mixing = mixed is not modelled with it", cfg_name(c));
    return 0;
}

/* sum_{p = s}^{s + n - 1} min(cap, floor(p / c) + 1): the rows the queries at positions s ..
 * s + n - 1 read when each reads its context's rows up to cap. O(1) per span: the sum of
 * floor(p / c) + 1 over a range is closed-form by whole blocks of c positions. */
static double rows_sum(double s, double n, double c, double cap)
{
    if (n <= 0) return 0;
    /* Positions whose row count reaches cap: p >= (cap - 1) c. */
    const double full_from = (cap - 1) * c;
    double e = s + n, capped = 0;
    if (e > full_from) {
        const double from = s > full_from ? s : full_from;
        capped = (e - from) * cap;
        e = from;
    }
    /* F(x) = sum_{p < x} (floor(p / c) + 1) for whole x. */
#define F(x) (floor((x) / c) * c * (floor((x) / c) + 1) / 2 + ((x) - floor((x) / c) * c) * (floor((x) / c) + 1))
    const double below = e > s ? F(e) - F(s) : 0;
#undef F
    return below + capped;
}

double prefill_attention_s(const step_ctx *cx, double bytes, double flops, double queries, int fp8)
{
    const hw_profile *hw = cx->hw;
    if (!(hw->prefill_attn_flops > 0)) return cost_attention_time(&hw->cost, bytes, flops, queries, fp8, cx->compute_sms);
    const double tb = bytes / hw->cost.roof.hbm_bw, tf = flops / (hw->prefill_attn_flops * cx->compute_sms / hw->sms);
    const double fixed = hw->cost.attn.form == COST_FITTED ? hw->cost.attn.launch_s : hw->cost.roof.launch_s;
    return fixed + (tb > tf ? tb : tf);
}

double prefill_rank_heads(const step_ctx *cx, double heads)
{
    if (cx->tp.ranks > 1) heads /= cx->tp.ranks;
    const double m = cx->tp.prefill_head_multiple;
    return m > 1 ? ceil(heads / m - 1e-9) * m : heads;
}

/* The data-parallel ranks whose chunks an iteration's experts take (step_ctx.prefill_ranks;
 * 0 there: every rank, the lockstep case). */
static double prefill_ranks(const step_ctx *cx)
{
    const double dp = cx->prefill_ranks > 0 ? cx->prefill_ranks : cx->attention_dp;
    return dp > 1 ? dp : 1;
}

double prefill_gemm_s(const step_ctx *cx, int moe, double weight_bytes, double flops, double tokens,
                      double decode_tokens_dp)
{
    const cost_model *cm = &cx->hw->cost;
    const hw_profile *hw = cx->hw;
    if (!hw->prefill_gemm.n) return cost_gemm_time(cm, weight_bytes, flops, 1, cx->compute_sms);
    const model_cfg *md = cx->model;
    /* The routed experts' share of this rank's FLOPs (fe_own): k experts of expert_bytes /
     * quantised bytes per parameter each, per token; the rest (projections, shared expert, a
     * dense layer's MLP) at M = the iteration's tokens. */
    double fe_own = 0, fe = 0;
    const double tp = cx->tp.ranks > 1 ? cx->tp.ranks : 1;
    /* Rows the GPU's experts take: the instance's tokens (this rank's chunk on each of the
     * ranks prefilling at once, prefill_ranks: every data-parallel rank under lockstep, this
     * one alone under disjoint; and the decode tokens beside it; a TP group's tokens are
     * the same on its ranks) x k over the moe_ep GPUs,
     * as one grouped GEMM (assumed: DeepGEMM's contiguous layout packs the local experts' rows
     * into one launch; the per-expert M, rows / local experts, is the bound below it). */
    /* A TP MoE (step.h moe_tp) splits every expert's FLOPs over its moe_tp GPUs as expert
     * parallelism splits the experts: the same share of the rows' FLOPs per GPU (assumed: the
     * grouped GEMM's rate by rows the same for the narrower experts). */
    const double split = cx->moe_tp > 1 ? cx->moe_tp : cx->moe_ep;
    const double dp = prefill_ranks(cx), ep = split > 1 ? split : 1;
    const double rows = (tokens * dp + decode_tokens_dp) * md->experts_per_token / ep;
    if (moe) {
        const double bpp = md->quant_bytes_per_param > 0 ? md->quant_bytes_per_param : 1;
        fe_own = 2.0 * md->experts_per_token * md->expert_bytes / bpp * tokens / tp;
        if (fe_own > flops) fe_own = flops;
        /* The expert FLOPs this GPU computes: the prefill rows its experts take (the decode
         * tokens' are the decode step's), fe_own when every rank prefills alike (dp = ep),
         * 1 / ep of it when this rank prefills alone; expert-parallel over 1 GPU: its own. */
        fe = ep > 1 ? 2.0 * md->expert_bytes / bpp * tokens * dp * md->experts_per_token / ep : fe_own;
    }
    /* TP attention splits the projections' N over the ranks: their M stays the tokens. The
     * SMs left to compute scale the rates as in the roofline (cost_roofline_time). */
    const double sms = cx->compute_sms / hw->sms;
    double tf = (flops - fe_own) / (cost_table_eval(&hw->prefill_gemm, tokens) * sms);
    if (fe > 0) tf += fe / (cost_table_eval(&hw->prefill_expert, rows) * sms);
    const double tw = cm->gemm.form == COST_FITTED ? weight_bytes / cm->gemm.bw : weight_bytes / cm->roof.hbm_bw;
    const double fixed = cm->gemm.form == COST_FITTED ? cm->gemm.fixed_s : cm->roof.launch_s;
    return fixed + (tw > tf ? tw : tf);
}

double prefill_iter_s(const step_ctx *cx, const prefill_span *sp, uint32_t n, double decode_tokens_dp,
                      prefill_parts *parts, hw_range_log *ranges)
{
    const model_cfg *md = cx->model;
    const cost_model *cm = &cx->hw->cost;
    prefill_parts P;
    memset(&P, 0, sizeof P);
    for (uint32_t i = 0; i < n; i++) P.tokens += sp[i].tokens;
    if (P.tokens <= 0) {
        if (parts) *parts = P;
        return 0;
    }
    const int tp = cx->tp.ranks > 1;
    /* With the measured prefill table the GEMMs are not the decode form's extrapolation. */
    if (ranges && !cx->hw->prefill_gemm.n) hw_range_note(cx->hw, ranges, HW_FIT_GEMM_M, P.tokens);
    for (uint32_t l = 0; l < md->n_layers; l++) {
        const model_kind *k = &md->layer[l];
        const int32_t g = md->layer_group[l];
        double rows = 0, keys = 0, macs = 0;
        for (uint32_t i = 0; i < n; i++) {
            if (g < 0) {
                rows += rows_sum(sp[i].start, sp[i].tokens, 1, k->window);
                continue;
            }
            const double c = md->group[g].compress;
            rows += rows_sum(sp[i].start, sp[i].tokens, c, md->group[g].k);
            if (k->select == MODEL_SELECT_OWN) {
                /* Every query scores every earlier key: rows up to an unbounded cap. */
                macs += rows_sum(sp[i].start, sp[i].tokens, c, INFINITY) * k->indexer_heads * k->indexer_dim;
                keys += floor((sp[i].start + sp[i].tokens - 1) / c) + 1;
            }
        }
        const double flops = 2.0 * prefill_rank_heads(cx, k->attn_heads) * rows * (k->attn_qk_dim + k->attn_v_dim);
        const double ta = prefill_attention_s(cx, rows * k->row_bytes, flops, P.tokens, k->attn_fp8);
        double ti = 0;
        if (macs > 0) ti = cost_roofline_time(&cm->roof, keys * k->indexer_key_bytes, 2.0 * macs, 1, cx->compute_sms);
        double w = cx->dense_bytes_per_layer;
        const double global = P.tokens * prefill_ranks(cx) + decode_tokens_dp;
        if (k->moe && md->experts > 0 && cx->moe_tp > 1) {
            /* TP MoE: 1 / moe_tp of every expert the same tokens touch (cost.h moe_tp). */
            w += cost_moe_tp_weight_bytes(md->experts, md->experts_per_token, global, md->expert_bytes, cx->moe_tp);
        } else if (k->moe && md->experts > 0) {
            /* The experts the instance's tokens touch: the chunks of the ranks prefilling at
             * once and the decode tokens beside them. */
            const double local = md->experts / cx->moe_ep;
            w += local * -expm1(global * log1p(-md->experts_per_token / md->experts)) * md->expert_bytes;
        }
        double gf = 2.0 * md->active_params / md->n_layers * P.tokens;
        if (tp) gf /= cx->tp.ranks;
        const double tg = prefill_gemm_s(cx, k->moe && md->experts > 0, w, gf, P.tokens, decode_tokens_dp);
        double tc = tp ? tp_allreduce_s(&cx->tp, P.tokens * md->hidden * 2.0) : 0;
        if (k->moe && cx->moe_tp > 1) {
            /* TP MoE: the gathered tokens' hidden states all-reduced (step.c says where in SGLang;
             * an extend pass is SUM_LEN under DP attention: two all-reduces). */
            tc += cost_moe_tp_allreduces(cx->attention_dp, 1) * tp_allreduce_s(&cx->moe_ar, global * md->hidden * 2.0);
        } else if (k->moe) {
            const double msg[2] = { md->moe_dispatch_bytes, md->moe_combine_bytes };
            tc = cost_a2a_add(tc, cx->a2a_lat_s, cx->a2a_gbps, cx->a2a_ranks_per_token,
                              tp ? P.tokens / cx->tp.ranks : P.tokens, msg);
        }
        P.attention += ta;
        P.indexer += ti;
        P.gemm += tg;
        P.comm += tc;
        P.compute += ta + ti + tg + tc;
        if (g >= 0 && k->kv_own)
            for (uint32_t i = 0; i < n; i++) {
                const double c = md->group[g].compress;
                /* Rows completed inside the span: positions start .. start + tokens - 1. */
                const double r = floor((sp[i].start + sp[i].tokens) / c) - floor(sp[i].start / c);
                P.written += r * k->row_bytes;
            }
    }
    if (parts) *parts = P;
    return P.compute;
}
