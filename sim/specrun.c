/* specrun.c: speculative decoding in the simulator's step loop; see
 * specrun.h for the step and spec.h / union.h for the models. */
#include "common/path.h"
#include "sim/specrun.h"
#include "common/cfgkey.h"
#include "common/dh_err.h"
#include "common/mem.h"
#include "sim/mbatch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The [spec] keys of an instance (docs/CONFIG.md is printed from them). */
static const cfg_key specrun_keys[] = {
    CK_ROW("spec", "mode", CK_STR, "", 0, 0, "", "Speculative decoding: none, dflash2 or dspark (empty: the draft's kind, "
           "or none without a draft; a policy name's +MODE sets it).", 0),
    CK_DYN_ROW("spec", "draft", CK_STR, "", 0, 0, "models/drafts/MODEL-MODE.ini", NULL, "The draft's config file.", 0),
    CK_ROW("spec", "shared_retrieval", CK_BOOL, "", 0, 0, "true", "A verification step fetches the union of its queries' "
           "rows once (else once per query).", 0),
    CK_ROW("spec", "draft_ring", CK_BOOL, "", 0, 0, "true", "The draft's KV is a ring of its window (else the full "
           "context).", 0),
    CK_ROW("spec", "staging_reuse", CK_BOOL, "", 0, 0, "true", "The staging area is reused across groups (else one per "
           "group).", 0),
};
const cfg_schema specrun_schema = CFG_SCHEMA("models/instances/NAME.ini", "Instance: speculative decoding",
    "Speculative decoding of a run (sim/specrun.h).", specrun_keys);

int specrun_parse_mode(const char *name, int *mode)
{
    if (!strcmp(name, "none")) *mode = 0;
    else if (!strcmp(name, "dflash2")) *mode = SPEC_DFLASH2;
    else if (!strcmp(name, "dspark")) *mode = SPEC_DSPARK;
    else return dh_err("unknown speculative mode '%s' (expected none, dflash2 or dspark)", name);
    return 0;
}

int specrun_config_load(cfg *c, const model_cfg *m, specrun_cfg *s)
{
    memset(s, 0, sizeof *s);
    const char *mode, *draft;
    const cfg_schema *S = &specrun_schema;
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
    return 0;
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
                    specrun_slot *sl)
{
    const spec_draft *d = s->draft;
    const model_cfg *m = cx->model;
    uint32_t G = m->n_groups, gam = d->gamma;
    spec_conf *cf = dh_malloc((n ? n : 1) * sizeof *cf);
    double ring_rows = 0;
    for (uint32_t i = 0; i < n; i++) {
        spec_confidence(d, sl[i].ctx, seed, sl[i].req, sl[i].pos, &cf[i]);
        ring_rows += spec_ring_rows(d, sl[i].ctx, s->draft_ring);
    }
    /* The draft pass drafts the whole block whatever is verified afterwards. */
    cx->pre_s = spec_draft_time(d, cx->hw, cx->compute_sms, n, ring_rows);
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
    for (uint32_t i = 0; i < n; i++) {
        if (sl[i].L > sl[i].left) sl[i].L = sl[i].left;
        sl[i].a = spec_accept(&cf[i], sl[i].L, seed, sl[i].req, sl[i].pos);
    }
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
