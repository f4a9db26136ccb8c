/* specrun.c: speculative decoding in the simulator's step loop; see
 * specrun.h for the step and spec.h / union.h for the models. */
#include "common/path.h"
#include "sim/specrun.h"
#include "common/cfgkey.h"
#include "common/dh_err.h"
#include "common/mem.h"
#include "sim/mbatch.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The [spec] keys of an instance (docs/CONFIG.md is printed from them). */
static const cfg_key specrun_keys[] = {
    CK_ROW("spec", "mode", CK_STR, "", 0, 0, "", "Speculative decoding: none, dflash2, dspark or mtp (empty: the draft's "
           "kind, or none without a draft; a policy name's +MODE sets it).", 0),
    CK_ROW("spec", "adaptive", CK_STR, "", 0, 0, "", "SGLang's --speculative-adaptive table (models/spec/NAME.ini): the "
           "steps chosen per batch size, speculation off where it picks 0; empty: fixed steps.", 0),
    CK_ROW("spec", "disable_batch_size", CK_INT, "requests", 0, 1 << 30, "0", "vLLM V0's "
           "speculative_disable_by_batch_size: no speculation from this many requests on a GPU; 0: never.", 0),
    CK_DYN_ROW("spec", "draft", CK_STR, "", 0, 0, "models/drafts/MODEL-MODE.ini", NULL, "The draft's config file.", 0),
    CK_ROW("spec", "shared_retrieval", CK_BOOL, "", 0, 0, "true", "A verification step fetches the union of its queries' "
           "rows once (else once per query).", 0),
    CK_ROW("spec", "draft_ring", CK_BOOL, "", 0, 0, "true", "The draft's KV is a ring of its window (else the full "
           "context).", 0),
    CK_ROW("spec", "staging_reuse", CK_BOOL, "", 0, 0, "true", "The staging area is reused across groups (else one per "
           "group).", 0),
    CK_STR_ROW("spec", "accept", "request", "request|batch", "One acceptance draw per request and position, or one "
               "per verification for the whole batch (SGLang's SGLANG_SIMULATE_ACC_LEN; sim/specrun.h).", 0),
};
const cfg_schema specrun_schema = CFG_SCHEMA("models/instances/NAME.ini", "Instance: speculative decoding",
    "Speculative decoding of a run (sim/specrun.h).", specrun_keys);

static const cfg_key adaptive_keys[] = {
    CK_ROW("adaptive", "ema_alpha", CK_NUM, "", 1e-9, 1, NULL, "EMA weight of a batch's mean accepted drafts.", 0),
    CK_ROW("adaptive", "update_interval", CK_INT, "batches", 1, 1000000, NULL, "Batches between two step decisions.", 0),
    CK_ROW("adaptive", "warmup_batches", CK_INT, "batches", 0, 1000000, NULL, "Batches before the first decision.", 0),
    CK_ROW("bs.N", "candidate_steps", CK_LIST, "steps", 0, 1024, NULL, "The steps this slot chooses among (a batch of n "
           "requests uses the slot of the largest N <= n); 0: speculation off.", 0),
    CK_ROW("bs.N", "up_hysteresis", CK_NUM, "", -100, 100, "0", "Margin before moving to more steps.", 0),
    CK_ROW("bs.N", "down_hysteresis", CK_NUM, "", -100, 100, "0", "Margin before moving to fewer steps.", 0),
};
const cfg_schema adaptive_schema = CFG_SCHEMA("models/spec/NAME.ini", "Adaptive speculative steps",
    "SGLang's --speculative-adaptive table ([spec] adaptive of an instance; sim/specrun.h).", adaptive_keys);

int specrun_parse_mode(const char *name, int *mode)
{
    if (!strcmp(name, "none")) *mode = 0;
    else if (!strcmp(name, "dflash2")) *mode = SPEC_DFLASH2;
    else if (!strcmp(name, "dspark")) *mode = SPEC_DSPARK;
    else if (!strcmp(name, "mtp")) *mode = SPEC_MTP;
    else return dh_err("unknown speculative mode '%s' (expected none, dflash2, dspark or mtp)", name);
    return 0;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* SGLang's adaptive table (specrun.h): [adaptive] ema_alpha, update_interval, warmup_batches;
 * [bs.N] candidate_steps, up_hysteresis, down_hysteresis. Candidates above gamma become
 * gamma. Every key checked, an unknown section or key an error. */
static int adaptive_load(const char *path, uint32_t gamma, specrun_adaptive *ad)
{
    cfg *c;
    if (cfg_load(path, &c) < 0) return -1;
    const char *f = cfg_name(c);
    long v;
    const double zero = 0;
    memset(ad, 0, sizeof *ad);
    int rc = -1;
    if (cfg_get_double(c, "adaptive", "ema_alpha", &ad->ema_alpha, CFG_REQUIRED, 1e-9, 1) < 0) goto out;
    if (cfg_get_int(c, "adaptive", "update_interval", &v, CFG_REQUIRED, 1, 1000000) < 0) goto out;
    ad->update_interval = (uint32_t)v;
    if (cfg_get_int(c, "adaptive", "warmup_batches", &v, CFG_REQUIRED, 0, 1000000) < 0) goto out;
    ad->warmup_batches = (uint32_t)v;
    for (size_t i = 0; i < cfg_section_count(c); i++) {
        const char *sec = cfg_section_name(c, i);
        if (!strcmp(sec, "adaptive")) continue;
        unsigned bs;
        char tail;
        if (sscanf(sec, "bs.%u%c", &bs, &tail) != 1 || bs < 1) {
            dh_err("%s: section [%s] is not [adaptive] or [bs.N] (N >= 1)", f, sec);
            goto out;
        }
        if (ad->n_slots == SPECRUN_MAX_SLOTS) { dh_err("%s: more than %d [bs.N] slots", f, SPECRUN_MAX_SLOTS); goto out; }
        uint32_t k = ad->n_slots;
        if (k && bs <= ad->bs[k - 1]) {
            dh_err("%s: [%s] follows [bs.%u]: the slots must be listed by ascending batch size", f, sec, ad->bs[k - 1]);
            goto out;
        }
        double cd[SPEC_MAX_GAMMA + 1];
        size_t n;
        if (cfg_get_doubles(c, sec, "candidate_steps", cd, SPEC_MAX_GAMMA + 1, &n, 0, 1024) < 0 ||
            cfg_get_double(c, sec, "up_hysteresis", &ad->up[k], &zero, -100, 100) < 0 ||
            cfg_get_double(c, sec, "down_hysteresis", &ad->down[k], &zero, -100, 100) < 0)
            goto out;
        if (n == 0) { dh_err("%s: [%s] candidate_steps is empty", f, sec); goto out; }
        uint32_t c2[SPEC_MAX_GAMMA + 1], m = 0;
        for (size_t j = 0; j < n; j++) {
            if (cd[j] != floor(cd[j])) { dh_err("%s: [%s] candidate_steps: %g is not a whole number", f, sec, cd[j]); goto out; }
            c2[j] = cd[j] > gamma ? gamma : (uint32_t)cd[j];
        }
        qsort(c2, n, sizeof c2[0], cmp_u32);
        for (size_t j = 0; j < n; j++)
            if (!m || c2[j] != ad->cand[k][m - 1]) ad->cand[k][m++] = c2[j];
        ad->n_cand[k] = m;
        ad->bs[k] = bs;
        ad->n_slots++;
    }
    if (!ad->n_slots) { dh_err("%s: no [bs.N] slot", f); goto out; }
    rc = cfg_check_unused(c);
out:
    cfg_free(c);
    return rc;
}

int specrun_config_load(cfg *c, const model_cfg *m, specrun_cfg *s)
{
    memset(s, 0, sizeof *s);
    s->mtp_layer = -1;
    const char *mode, *draft, *adaptive, *accept;
    const cfg_schema *S = &specrun_schema;
    long dbs;
    if (cfgk_string(c, S, "spec", "adaptive", &adaptive) < 0 || cfgk_int(c, S, "spec", "disable_batch_size", &dbs) < 0 ||
        cfgk_string(c, S, "spec", "accept", &accept) < 0)
        return -1;
    if (!strcmp(accept, "batch")) s->accept_per_batch = 1;
    else if (strcmp(accept, "request") != 0)
        return dh_err("%s: [spec] accept = '%s' (expected request or batch)", cfg_name(c), accept);
    s->disable_batch_size = (uint32_t)dbs;
    if (cfgk_string(c, S, "spec", "mode", &mode) < 0 || cfgk_string_or(c, S, "spec", "draft", &draft, "") < 0 ||
        cfgk_bool(c, S, "spec", "shared_retrieval", &s->shared_retrieval) < 0 ||
        cfgk_bool(c, S, "spec", "draft_ring", &s->draft_ring) < 0 ||
        cfgk_bool(c, S, "spec", "staging_reuse", &s->staging_reuse) < 0)
        return -1;
    if (*mode && specrun_parse_mode(mode, &s->mode) < 0) return dh_err_prefix("%s: [spec] mode: ", cfg_name(c));
    if (!*mode && !*draft) return 0;
    if (*mode && s->mode == 0) return 0; /* mode = none switches a configured draft off */
    char rel[512];
    if (*draft) snprintf(rel, sizeof rel, "%s", draft);
    else snprintf(rel, sizeof rel, "models/drafts/%s-%s.ini", m->name, spec_kind_name((spec_kind)s->mode));
    if (dh_path_find(rel, s->draft_path, sizeof s->draft_path) < 0) return -1;
    if (spec_draft_load(s->draft_path, &s->draft) < 0)
        return dh_err_prefix("%s: [spec] %s: ", cfg_name(c), *draft ? "draft" : "mode's default draft");
    if (!*mode) s->mode = s->draft->kind;
    if ((int)s->draft->kind != s->mode)
        return dh_err("%s: [spec] mode = %s but the draft '%s' is of kind %s", cfg_name(c),
                      spec_kind_name((spec_kind)s->mode), s->draft_path, spec_kind_name(s->draft->kind));
    if (strcmp(s->draft->target, m->name) != 0)
        return dh_err("%s: [spec] the draft '%s' targets model '%s', not '%s'", cfg_name(c), s->draft_path,
                      s->draft->target, m->name);
    if (s->draft->kind == SPEC_MTP) {
        for (uint32_t l = 0; l < m->n_layers && s->mtp_layer < 0; l++)
            if (!strcmp(m->layer[l].name, s->draft->layer_kind)) s->mtp_layer = (int32_t)l;
        if (s->mtp_layer < 0)
            return dh_err("%s: [draft] layer_kind = '%s': model '%s' has no layer of that kind", s->draft_path,
                          s->draft->layer_kind, m->name);
    }
    if (*adaptive) {
        char full[512];
        if (s->draft->kind == SPEC_MTP && s->draft->topk != 1)
            return dh_err("%s: [spec] adaptive needs topk = 1 (SGLang's rule); the draft '%s' has topk = %u",
                          cfg_name(c), s->draft_path, s->draft->topk);
        if (s->draft->kind == SPEC_DSPARK)
            return dh_err("%s: [spec] adaptive is SGLang's EAGLE rule; DSpark chooses its verify lengths itself",
                          cfg_name(c));
        if (dh_path_find(adaptive, full, sizeof full) < 0 || adaptive_load(full, s->draft->gamma, &s->adaptive) < 0)
            return dh_err_prefix("%s: [spec] adaptive: ", cfg_name(c));
    }
    return 0;
}

/* ---- the load rules ----------------------------------------------------- */

/* The slot of batch size n: the largest batch size not above n (the first when none is). */
static uint32_t adapt_slot(const specrun_adaptive *ad, uint32_t n)
{
    uint32_t k = 0;
    while (k + 1 < ad->n_slots && ad->bs[k + 1] <= n) k++;
    return k;
}

void specrun_adapt_init(const specrun_cfg *s, specrun_adapt_state *st)
{
    memset(st, 0, sizeof *st);
    const specrun_adaptive *ad = &s->adaptive;
    for (uint32_t k = 0; k < ad->n_slots; k++) {
        uint32_t init = s->draft->gamma, found = 0;
        for (uint32_t j = 0; j < ad->n_cand[k]; j++) found |= ad->cand[k][j] == init;
        /* SGLang: the configured steps when they are a candidate, else the middle one. */
        st->current[k] = found ? init : ad->cand[k][ad->n_cand[k] / 2];
        st->ema[k] = (double)st->current[k] - 1;
    }
}

uint32_t specrun_adapt_steps(const specrun_cfg *s, const specrun_adapt_state *st, uint32_t n)
{
    return s->adaptive.n_slots ? st->current[adapt_slot(&s->adaptive, n)] : s->draft->gamma;
}

static uint32_t cand_index(const specrun_adaptive *ad, uint32_t k, uint32_t steps)
{
    for (uint32_t j = 0; j < ad->n_cand[k]; j++)
        if (ad->cand[k][j] == steps) return j;
    DH_BUG_ON(1);
    return 0;
}

/* AdaptiveStepSlot._recompute_params: step down while the EMA is at or below the previous
 * candidate's threshold, else up while above the current one's; from 0, probe the next. */
static void adapt_recompute(const specrun_adaptive *ad, uint32_t k, specrun_adapt_state *st)
{
    uint32_t idx = cand_index(ad, k, st->current[k]), old = idx, n = ad->n_cand[k];
    if (st->current[k] == 0) {
        idx = idx + 1 < n ? idx + 1 : n - 1;
        if (ad->cand[k][idx] > 0 && st->ema[k] < 0) st->ema[k] = (double)ad->cand[k][idx] - 1;
        st->current[k] = ad->cand[k][idx];
        return;
    }
    while (idx > 0) {
        uint32_t prev = ad->cand[k][idx - 1];
        double drop = (prev == 0 ? 0.5 : prev - 0.5) + ad->down[k];
        if (st->ema[k] <= drop) idx--;
        else break;
    }
    if (idx == old)
        while (idx + 1 < n && st->ema[k] > ad->cand[k][idx] - 0.5 + ad->up[k]) idx++;
    st->current[k] = ad->cand[k][idx];
}

void specrun_adapt_update(const specrun_cfg *s, specrun_adapt_state *st, uint32_t n, const uint32_t *accepted)
{
    const specrun_adaptive *ad = &s->adaptive;
    if (!ad->n_slots || n == 0) return;
    uint32_t k = adapt_slot(ad, n);
    if (st->current[k] > 0) {
        double sum = 0;
        for (uint32_t i = 0; i < n; i++) sum += accepted[i];
        st->ema[k] = (1 - ad->ema_alpha) * st->ema[k] + ad->ema_alpha * (sum / n);
    }
    st->batches[k]++;
    if (st->batches[k] <= ad->warmup_batches) return;
    if ((st->batches[k] - ad->warmup_batches) % ad->update_interval != 0) return;
    adapt_recompute(ad, k, st);
}

/* ---- the MTP draft ------------------------------------------------------ */

double specrun_mtp_draft_s(const specrun_cfg *s, const step_ctx *cx, uint32_t n, const specrun_slot *sl,
                           uint32_t steps)
{
    const spec_draft *d = s->draft;
    const model_cfg *m = cx->model;
    if (n == 0 || steps == 0) return 0;
    const uint32_t l = (uint32_t)s->mtp_layer, G = m->n_groups;
    const int32_t g = m->layer_group[l];
    const model_kind *k = &m->layer[l];
    mbatch one;
    mbatch_init(&one, 1, G);
    step_mb b = one.mb[0];
    /* One draft forward: topk tokens per request through the MTP layers, each attending to the
     * request's context like the target layer of its kind (its own KV, resident): a selecting
     * kind its top-k of the compressed rows (and its window), a dense kind every compressed row,
     * a window kind (DeepSeek-V4's MTP layer: compress ratio 0) its newest window rows. */
    b.n_req = n;
    b.tokens = (double)n * d->topk;
    for (uint32_t i = 0; i < n; i++) {
        const double win = k->window ? (double)(sl[i].ctx < k->window ? sl[i].ctx : k->window) : 0;
        /* Per request, as the step loop counts them (sim.c: a request's window and context
         * are read once whatever its query tokens); selections per query token. */
        b.window_rows += win;
        b.ctx_tokens += (double)sl[i].ctx;
        if (g < 0) continue;
        const uint32_t c = m->group[g].compress;
        const double rows = (double)((sl[i].ctx + c - 1) / c);
        b.idx_rows[g] += rows;
        b.sel[g] += d->topk * (rows < m->group[g].k ? rows : m->group[g].k);
    }
    const double layer = step_indexer_s(cx, &b, l) + step_compute_s(cx, &b, l);
    const double extra = cost_roofline_time(&cx->hw->cost.roof, d->pass_bytes, d->flops_per_token * b.tokens, d->fp8,
                                            cx->compute_sms);
    mbatch_release(&one);
    /* SGLang's EAGLE worker (eagle_worker.py) runs num_steps - 1 draft forwards before the
     * verification and one draft extend over the accepted tokens after it: steps forwards in
     * all, each charged here at topk tokens per request (the extend's accepted + 1 tokens
     * taken as topk: assumed, a small part of a forward that reads its weights anyway). */
    return steps * (d->layers * layer + extra);
}

void specrun_config_release(specrun_cfg *s)
{
    spec_draft_free(s->draft);
    memset(s, 0, sizeof *s);
}

void specrun_reservation(const specrun_cfg *s, const model_cfg *m, uint64_t final_ctx, double *draft,
                         double *staging)
{
    *draft = *staging = 0;
    if (!s->draft) return;
    *draft = spec_ring_bytes(s->draft, final_ctx, s->draft_ring);
    /* The worst case: every query's selection disjoint from the others'. */
    double q = s->draft->gamma + 1.0, sum = 0, max = 0;
    for (uint32_t g = 0; g < m->n_groups; g++) {
        double b = q * m->group[g].k * m->group[g].kv_bytes_per_row;
        sum += b;
        if (b > max) max = b;
    }
    *staging = s->staging_reuse ? max : sum;
}

/* ---- the plan ---------------------------------------------------------- */

typedef struct {
    step_ctx *cx;
    step_mb mb;
    const double *k_eff;   /* [groups] mean selected rows per query */
    double overhead;
} est_ctx;

static double est_time(double verified, void *user)
{
    est_ctx *e = user;
    uint32_t G = e->cx->model->n_groups;
    e->mb.tokens = verified;
    for (uint32_t g = 0; g < G; g++) e->mb.sel[g] = verified * e->k_eff[g];
    return e->overhead + step_estimate_s(e->cx, &e->mb);
}

double specrun_plan(const specrun_cfg *s, step_ctx *cx, double step_overhead_s, uint64_t seed, uint32_t n,
                    specrun_slot *sl, specrun_adapt_state *ad)
{
    const spec_draft *d = s->draft;
    const model_cfg *m = cx->model;
    uint32_t G = m->n_groups, gam = d->gamma;
    /* The load rules: vLLM's batch-size cut-off, SGLang's adaptive steps (0: plain). */
    if (s->disable_batch_size && n > s->disable_batch_size) gam = 0;
    else if (s->adaptive.n_slots) gam = specrun_adapt_steps(s, ad, n);
    if (gam == 0) {
        for (uint32_t i = 0; i < n; i++) {
            sl[i].L = sl[i].a = 0;
            sl[i].expected = 0;
            sl[i].queries = 1;
        }
        if (s->adaptive.n_slots && !(s->disable_batch_size && n > s->disable_batch_size)) {
            uint32_t *acc = dh_calloc(n ? n : 1, sizeof *acc);
            specrun_adapt_update(s, ad, n, acc);
            free(acc);
        }
        return cx->pre_s = 0;
    }
    spec_conf *cf = dh_malloc((n ? n : 1) * sizeof *cf);
    double ring_rows = 0;
    for (uint32_t i = 0; i < n; i++) {
        spec_confidence(d, sl[i].ctx, seed, sl[i].req, sl[i].pos, &cf[i]);
        ring_rows += spec_ring_rows(d, sl[i].ctx, s->draft_ring);
    }
    /* The draft pass drafts the whole block whatever is verified afterwards; MTP runs its
     * steps' forwards. */
    cx->pre_s = d->kind == SPEC_MTP ? specrun_mtp_draft_s(s, cx, n, sl, gam)
                                    : spec_draft_time(d, cx->hw, cx->compute_sms, n, ring_rows);
    if (d->kind == SPEC_DSPARK && n > 0) {
        double *pred = dh_calloc((size_t)n * gam, sizeof *pred);
        double *k_eff = dh_calloc(G ? G : 1, sizeof *k_eff);
        uint32_t *L = dh_calloc(n, sizeof *L);
        for (uint32_t i = 0; i < n; i++)
            for (uint32_t j = 0; j < gam && j < sl[i].left; j++) pred[(size_t)i * gam + j] = cf[i].predicted[j];
        est_ctx e;
        memset(&e, 0, sizeof e);
        mbatch one;
        mbatch_init(&one, 1, G);
        e.cx = cx;
        e.overhead = step_overhead_s;
        e.mb = one.mb[0];
        e.k_eff = k_eff;
        e.mb.n_req = n;
        for (uint32_t i = 0; i < n; i++) {
            for (uint32_t g = 0; g < G; g++) {
                uint32_t c = m->group[g].compress;
                double rows = (double)((sl[i].ctx + c - 1) / c);
                e.mb.idx_rows[g] += rows;
                k_eff[g] += (rows < m->group[g].k ? rows : m->group[g].k) / n;
            }
            e.mb.window_rows += sl[i].ctx < m->max_window ? (double)sl[i].ctx : m->max_window;
            e.mb.ctx_tokens += (double)sl[i].ctx;
        }
        spec_choose_verify(pred, n, gam, gam, est_time, &e, L);
        for (uint32_t i = 0; i < n; i++) sl[i].L = L[i];
        mbatch_release(&one);
        free(L);
        free(pred);
        free(k_eff);
    } else {
        for (uint32_t i = 0; i < n; i++) sl[i].L = gam;
    }
    uint32_t *acc = dh_calloc(n ? n : 1, sizeof *acc);
    /* accept = batch: every request reads the batch's one stream (request index UINT32_MAX,
     * positioned by the verification's index), so with one table they accept alike, each cut
     * at its own verify length (spec_sample_marginal takes one uniform). */
    const uint32_t batch = ad ? ad->verifications++ : 0;
    DH_BUG_ON(s->accept_per_batch && !ad);
    for (uint32_t i = 0; i < n; i++) {
        if (sl[i].L > gam) sl[i].L = gam;
        if (sl[i].L > sl[i].left) sl[i].L = sl[i].left;
        sl[i].a = acc[i] = s->accept_per_batch ? spec_accept(&cf[i], sl[i].L, seed, UINT32_MAX, batch)
                                               : spec_accept(&cf[i], sl[i].L, seed, sl[i].req, sl[i].pos);
        sl[i].expected = spec_accept_expected(&cf[i], sl[i].L);
        /* A tree (MTP, topk > 1) verifies its num_draft_tokens nodes; its accepted path is
         * the chain's (the table is of the tree's accepted length). */
        sl[i].queries = sl[i].L + 1;
        if (d->kind == SPEC_MTP && sl[i].L > 0) sl[i].queries += d->draft_tokens - d->gamma - 1;
    }
    if (s->adaptive.n_slots) specrun_adapt_update(s, ad, n, acc);
    free(acc);
    free(cf);
    return cx->pre_s;
}

/* ---- verification ------------------------------------------------------ */

static int in_sel(const void *user, uint32_t row) { return hotbuf_selected(user, row); }
static int is_res(const void *user, uint32_t row) { return hotbuf_resident(user, row); }

int specrun_verify(pol_stream *ps, const trace_shape *sh, union_ahead *ahead, union_set *u, uint32_t L,
                   uint32_t a, int shared, const specrun_hooks *hk, specrun_out *o)
{
    memset(o, 0, sizeof *o);
    uint32_t p = ps->pos;
    DH_BUG_ON(a > L);
    o->nrows = sel_rows_at(sh, ps->req, ps->group, p);
    if (ps->mode == POL_COUNT) {
        /* Every row is on the GPU: only the attention reads matter. */
        for (uint32_t t = 0; t <= L; t++) {
            uint32_t rows = sel_rows_at(sh, ps->req, ps->group, p + t);
            o->sel_sum += rows < ps->k ? rows : ps->k;
        }
        ps->pos += a + 1;
        return 0;
    }
    DH_BUG_ON(!ps->st);
    hotbuf *h = &ps->buf;
    while (union_ahead_count(ahead) < L + 1) {
        sel_delta d;
        uint32_t want = p + union_ahead_count(ahead);
        int rc = sel_next(ps->st, &d);
        if (rc < 0) return dh_err_prefix("request %u, group %u: ", ps->req, ps->group);
        if (rc > 0) return dh_err("request %u, group %u: the stream ends at position %u", ps->req, ps->group, want);
        if (d.pos != want || d.nrows != sel_rows_at(sh, ps->req, ps->group, want))
            return dh_err("request %u, group %u: position %u has %u rows, the shape implies position %u with %u rows",
                          ps->req, ps->group, d.pos, d.nrows, want, sel_rows_at(sh, ps->req, ps->group, want));
        if (union_ahead_push(ahead, &d) < 0) return dh_err_prefix("request %u, group %u: ", ps->req, ps->group);
    }
    sel_delta d;
    hotbuf_result r;
    union_ahead_peek(ahead, 0, &d);
    DH_BUG_ON(d.pos != p);
    if (hotbuf_step(h, &d, &r) < 0) return dh_err_prefix("request %u, group %u: ", ps->req, ps->group);
    if (hk && hk->base && hk->base(hk->user, &d, &r, h)) return -1;
    /* hotbuf_step leaves the base position's missed rows in its scratch list. */
    union_begin(u, h->n_sel, in_sel, h, h->scratch, r.misses, is_res, h, !shared);
    o->sel_sum = d.n_sel;
    o->written = r.written;
    o->base_misses = r.misses;
    for (uint32_t t = 1; t <= L; t++) {
        union_ahead_peek(ahead, t, &d);
        if (union_add(u, d.added, d.n_added, d.removed, d.n_removed) < 0)
            return dh_err_prefix("request %u, group %u, position %u: ", ps->req, ps->group, d.pos);
        if (hk && hk->query && hk->query(hk->user, t, &d)) return -1;
        o->sel_sum += d.n_sel;
    }
    if (hk && hk->unioned && hk->unioned(hk->user, u, h)) return -1;
    o->union_rows = union_size(u);
    o->fetched = union_fetched(u, shared);
    o->fetched_per_query = shared ? 0 : union_missed_per_query(u);
    union_ahead_pop(ahead);
    /* Commit the accepted drafts: their rows were staged by this verification. */
    for (uint32_t t = 1; t <= a; t++) {
        union_ahead_peek(ahead, 0, &d);
        if (hotbuf_step(h, &d, &r) < 0) return dh_err_prefix("request %u, group %u: ", ps->req, ps->group);
        if (hk && hk->commit && hk->commit(hk->user, t, &d, &r, h)) return -1;
        o->written += r.written;
        o->staged_misses += r.misses;
        union_ahead_pop(ahead);
    }
    ps->pos += a + 1;
    return 0;
}
