/* metrics.c: tallies, quantiles, invariants and the result of a run; see
 * metrics.h. */
#include "sim/metrics.h"
#include "common/dh_err.h"
#include "common/mem.h"
#include "common/stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void metrics_init(metrics *mt, uint32_t max_steps, uint32_t warmup, uint32_t n_groups)
{
    memset(mt, 0, sizeof *mt);
    clock_gettime(CLOCK_MONOTONIC, &mt->wall0);
    mt->warmup = warmup;
    mt->n_groups = n_groups;
    mt->cap = max_steps;
    mt->tl = dh_calloc(max_steps, sizeof *mt->tl);
    mt->durs = dh_calloc(max_steps, sizeof *mt->durs);
}

void metrics_release(metrics *mt)
{
    free(mt->tl);
    free(mt->durs);
    memset(mt, 0, sizeof *mt);
}

void metrics_add(metrics *mt, const metrics_step *s)
{
    DH_BUG_ON(mt->n_tl == mt->cap);
    const sim_tl_row *row = &s->row;
    mt->tl[mt->n_tl++] = *row;
    double dt = row->t_end - row->t_start;
    for (int c = 0; c < MEM_N_CATEGORIES; c++) mt->hbm[c] += row->hbm[c];
    mt->sel += row->selected;
    mt->miss += row->missed;
    mt->miss_bytes += s->miss_bytes;
    mt->active += row->active;
    mt->optional += row->optional_rows;
    mt->tokens += row->tokens;
    mt->budget += s->budget_rows;
    if (row->step >= mt->warmup) {
        mt->m_tokens += row->tokens;
        mt->m_time += dt;
        mt->m_sel += row->selected;
        mt->m_miss += row->missed;
        /* Per-token latency: the step over the tokens each request emitted in it
         * (one in plain decoding; accepted + 1 on average when speculative). */
        mt->durs[mt->n_durs].s_per_token = dt * row->active / row->tokens;
        mt->durs[mt->n_durs].tokens = row->tokens;
        mt->n_durs++;
        metrics_spec *sp = &mt->spec;
        sp->req_steps += row->active;
        sp->accepted += row->accepted;
        sp->verified += row->verified;
        sp->union_rows += row->union_rows;
        sp->union_n += (double)row->active * mt->n_groups;
        sp->fetched += row->fetched_rows;
        sp->fetched_pq += row->fetched_pq;
        sp->draft_s += row->draft_s;
        sp->step_s += dt;
        sp->overhead_s += s->overhead_s;
    }
    if (row->staging_bytes > mt->staging_peak) mt->staging_peak = row->staging_bytes;
}

static int cmp_dur(const void *a, const void *b)
{
    const metrics_dur *x = a, *y = b;
    return (x->s_per_token > y->s_per_token) - (x->s_per_token < y->s_per_token);
}

void metrics_sort_durs(metrics_dur *d, uint32_t n) { qsort(d, n, sizeof *d, cmp_dur); }

double metrics_quantile(const metrics_dur *d, uint32_t n, double total, double q)
{
    double want = q * total, acc = 0;
    for (uint32_t i = 0; i < n; i++) {
        acc += d[i].tokens;
        if (acc >= want) return d[i].s_per_token;
    }
    return n ? d[n - 1].s_per_token : 0;
}

/* The invariants of a finished run at its end t_final. */
static int check(const metrics *mt, const metrics_end *e, double t_final)
{
    const mem_ledger *h = e->hbm;
    if (h->peak_total > h->capacity)
        return dh_err("invariant: HBM peak %.0f B above capacity %.0f B", h->peak_total, h->capacity);
    if (fabs(e->h2d->bytes - mt->miss_bytes) > 1e-9 * (mt->miss_bytes + 1))
        return dh_err("invariant: %.0f bytes fetched but missed rows x row bytes = %.0f", e->h2d->bytes, mt->miss_bytes);
    if (res_check(e->gpu, t_final) < 0 || res_check(e->h2d, t_final) < 0 || res_check(e->d2h, t_final) < 0) return -1;
    if (e->admitted != e->completed + e->unfinished)
        return dh_err("invariant: %u requests admitted, %u completed, %u unfinished", e->admitted, e->completed, e->unfinished);
    if (!e->pol->host_tier && mt->miss != 0) return dh_err("invariant: %s fetched %.0f rows", e->pol->name, mt->miss);
    return 0;
}

/* The speculative figures, per (request, step) and per (request, group, step). */
static void spec_result(const metrics *mt, const metrics_end *e, sim_result *res)
{
    const specrun_cfg *sp = &e->sc->spec;
    const metrics_spec *t = &mt->spec;
    snprintf(res->spec, sizeof res->spec, "%s", spec_kind_name((spec_kind)sp->mode));
    res->shared_retrieval = sp->shared_retrieval;
    res->draft_ring = sp->draft_ring;
    res->staging_reuse = sp->staging_reuse;
    double n = t->req_steps > 0 ? t->req_steps : 1, nu = t->union_n > 0 ? t->union_n : 1;
    res->mean_accepted = t->accepted / n;
    res->tokens_per_step = (t->accepted + t->req_steps) / n;
    res->mean_verify_len = t->verified / n;
    /* Without a host tier nothing is staged or fetched: the union is not read. */
    if (e->pol->host_tier) {
        res->union_rows = sim_opt_of(t->union_rows / nu);
        res->union_rows_k = sim_opt_of(res->union_rows.value / e->sc->model.group[0].k);
    }
    /* Each retrieval mode keeps its own count only. */
    if (sp->shared_retrieval) res->fetched_shared_rows = sim_opt_of(t->fetched / nu);
    else res->fetched_per_query_rows = sim_opt_of(t->fetched_pq / nu);
    res->draft_share = t->step_s > 0 ? t->draft_s / t->step_s : 0;
    res->verify_share = t->step_s > 0 ? (t->step_s - t->draft_s - t->overhead_s) / t->step_s : 0;
    res->staging_used_peak = mt->staging_peak;
}

/* The measured steps' series (timeline rows from the warm-up on), in step order. */
enum { S_TOK, S_DT, S_WAIT, S_MISS, S_SEL, S_BYTES, S_ACTIVE, S_CTL, S_DEM, S_N };

/* 95 % intervals by batch means (common/stats.h). The batch plan is decided
 * on tokens/s, the headline figure, and every other figure uses the same
 * batches: TPOT's mean as the ratio of waited seconds (a step's time x its
 * requests) to tokens, its quantiles as each batch's own token-weighted
 * quantile (batch quantiles, Law 5th ed. section 9.5.3: biased for p99 in
 * short batches; the interval is printed beside the whole run's quantile).
 * A speculative run's tokens/s (and TPOT's mean) takes the accepted drafts as a control
 * variate (common/stats.h): per step, accepted less its expectation given the
 * plan (spec_accept_expected), mean 0; its batch plan (the residuals' lag-1
 * test) is then the one every figure uses.
 * Must run before the latencies are sorted (durs is in step order). */
static void intervals(const metrics *mt, int spec, sim_result *res)
{
    uint32_t n = mt->n_durs;
    double *s[S_N];
    for (int k = 0; k < S_N; k++) s[k] = dh_calloc(n ? n : 1, sizeof *s[k]);
    uint32_t i = 0;
    double w_tok = 0, w_time = 0;
    double *x = dh_calloc(mt->n_tl ? mt->n_tl : 1, sizeof *x);
    for (uint32_t j = 0; j < mt->n_tl; j++) {
        const sim_tl_row *r = &mt->tl[j];
        double dt = r->t_end - r->t_start;
        x[j] = dt > 0 ? r->tokens / dt : 0;
        if (r->step < mt->warmup) { w_tok += r->tokens; w_time += dt; continue; }
        DH_BUG_ON(i == n);
        s[S_TOK][i] = r->tokens;
        s[S_DT][i] = dt;
        s[S_WAIT][i] = dt * r->active;
        s[S_MISS][i] = r->missed;
        s[S_SEL][i] = r->selected;
        s[S_BYTES][i] = r->fetch_bytes;
        s[S_ACTIVE][i] = r->active;
        s[S_CTL][i] = r->accepted - r->expected_accepted;
        s[S_DEM][i] = r->demotions_total - (j ? mt->tl[j - 1].demotions_total : 0);
        i++;
    }
    DH_BUG_ON(i != n);
    res->warmup_steps = mt->warmup;
    res->warmup_tok_s = w_time > 0 ? w_tok / w_time : 0;
    res->mser_warmup = stats_mser5(x, mt->n_tl);
    double bytes = 0;
    for (uint32_t j = 0; j < n; j++) bytes += s[S_BYTES][j];
    res->fetched_rows_per_token = mt->m_tokens > 0 ? mt->m_miss / mt->m_tokens : 0;
    res->fetched_bytes_per_token = mt->m_tokens > 0 ? bytes / mt->m_tokens : 0;
    stats_plan p = stats_plan_of(s[S_TOK], s[S_DT], n);
    res->ci_tok_s = stats_ratio_ci(&p, s[S_TOK], s[S_DT]);
    if (spec) {
        stats_plan pc;
        stats_cv cv = stats_cv_ratio_ci(s[S_TOK], s[S_DT], s[S_CTL], 0, n, &pc);
        if (!isnan(cv.ci.half) && cv.beta != 0) {
            res->cv_used = 1;
            res->cv = cv;
            res->ci_tok_s = cv.ci;
            res->cv.raw = stats_ratio_ci(&pc, s[S_TOK], s[S_DT]);
            p = pc;
        }
    }
    res->batches = p;
    /* TPOT's mean moves with the accepted drafts as tokens/s does: the same control on the
     * same batches. Tokens per step stays the measured acceptance (plain batch means). */
    res->ci_tpot_mean = res->cv_used ? stats_cv_ratio_on(&p, s[S_WAIT], s[S_TOK], s[S_CTL], 0).ci
                                     : stats_ratio_ci(&p, s[S_WAIT], s[S_TOK]);
    res->ci_tokens_per_step = stats_ratio_ci(&p, s[S_TOK], s[S_ACTIVE]);
    {
        double dm = 0;
        for (uint32_t j = 0; j < n; j++) dm += s[S_DEM][j];
        res->measured_demotions = dm;
        res->demotions_per_1k = n ? 1000 * dm / n : 0;
        res->ci_demotions_per_1k = stats_ratio_ci(&p, s[S_DEM], NULL);
        res->ci_demotions_per_1k.mean *= 1000;
        res->ci_demotions_per_1k.half *= 1000;
    }

    res->ci_fetch_fraction = stats_ratio_ci(&p, s[S_MISS], s[S_SEL]);
    res->ci_rows_per_token = stats_ratio_ci(&p, s[S_MISS], s[S_TOK]);
    res->ci_bytes_per_token = stats_ratio_ci(&p, s[S_BYTES], s[S_TOK]);

    stats_ci *q[3] = { &res->ci_tpot_p50, &res->ci_tpot_p90, &res->ci_tpot_p99 };
    const double qs[3] = { 0.50, 0.90, 0.99 };
    if (p.b >= STATS_MIN_BATCHES) {
        double v[3][STATS_BATCHES];
        metrics_dur *d = dh_calloc(p.len, sizeof *d);
        for (uint32_t b = 0; b < p.b; b++) {
            double tot = 0;
            for (uint32_t j = 0; j < p.len; j++) {
                d[j] = mt->durs[p.first + b * p.len + j];
                tot += d[j].tokens;
            }
            metrics_sort_durs(d, p.len);
            for (int k = 0; k < 3; k++) v[k][b] = metrics_quantile(d, p.len, tot, qs[k]);
        }
        for (int k = 0; k < 3; k++) *q[k] = stats_ci_of(v[k], p.b);
        free(d);
    } else {
        for (int k = 0; k < 3; k++) *q[k] = (stats_ci){ NAN, NAN, NAN };
    }
    for (int k = 0; k < S_N; k++) free(s[k]);
    free(x);
}

int metrics_finish(metrics *mt, const metrics_end *e, sim_result *res)
{
    const sim_config *sc = e->sc;
    /* The run ends when the last write-through has landed. */
    double t_final = e->t;
    if (e->d2h->free_at > t_final) t_final = e->d2h->free_at;
    if (e->h2d->free_at > t_final) t_final = e->h2d->free_at;
    if (e->gpu->free_at > t_final) t_final = e->gpu->free_at;
    if (check(mt, e, t_final) < 0) return -1;

    snprintf(res->policy, sizeof res->policy, "%s", e->pol->name);
    snprintf(res->model, sizeof res->model, "%s", sc->model.name);
    snprintf(res->hw, sizeof res->hw, "%s", sc->hw.name);
    snprintf(res->source, sizeof res->source, "%s", *sc->trace_path ? sc->trace_path : sc->preset);
    snprintf(res->a2a, sizeof res->a2a, "%s", sc->a2a_source);
    res->concurrency = sc->wl.concurrency;
    res->per_gpu = sim_per_gpu(sc, sc->wl.concurrency);
    res->steps = mt->n_tl;
    res->measured_steps = mt->n_durs;
    res->sim_time = t_final;
    res->measured_time = mt->m_time;
    res->tokens = mt->tokens;
    res->measured_tokens = mt->m_tokens;
    /* Under TP attention the attn_tp GPUs of a group emit its tokens together (sim/tp.h). */
    const double tp = sc->tp.ranks > 1 ? sc->tp.ranks : 1;
    res->tok_s_gpu = mt->m_time > 0 ? mt->m_tokens / mt->m_time / tp : 0;
    intervals(mt, sc->spec.mode != 0, res);
    res->ci_tok_s.mean /= tp;
    res->ci_tok_s.half /= tp;
    res->tok_s_plain = res->tok_s_gpu;
    if (res->cv_used) {
        /* The controlled estimate is the figure reported; its plain twin stays in the JSON. */
        res->tok_s_gpu = res->ci_tok_s.mean;
        res->cv.raw.mean /= tp;
        res->cv.raw.half /= tp;
        res->cv.beta /= tp;
        res->cv.ci = res->ci_tok_s;
    }
    res->has_demotions = e->pol->demotes;
    res->demotions = mt->n_tl ? mt->tl[mt->n_tl - 1].demotions_total : 0;
    res->warmup_tok_s /= tp;
    metrics_sort_durs(mt->durs, mt->n_durs);
    res->tpot_p50 = metrics_quantile(mt->durs, mt->n_durs, mt->m_tokens, 0.50);
    res->tpot_p90 = metrics_quantile(mt->durs, mt->n_durs, mt->m_tokens, 0.90);
    res->tpot_p99 = metrics_quantile(mt->durs, mt->n_durs, mt->m_tokens, 0.99);
    double wsum = 0;
    for (uint32_t i = 0; i < mt->n_durs; i++) wsum += mt->durs[i].s_per_token * mt->durs[i].tokens;
    res->tpot_mean = mt->m_tokens > 0 ? wsum / mt->m_tokens : 0;
    if (res->cv_used && !isnan(res->ci_tpot_mean.half)) res->tpot_mean = res->ci_tpot_mean.mean;
    res->selected_rows = mt->m_sel;
    res->missed_rows = mt->m_miss;
    res->fetch_fraction = mt->m_sel > 0 ? mt->m_miss / mt->m_sel : 0;
    res->fetch_bytes = e->h2d->bytes;
    res->write_bytes = e->d2h->bytes;
    res->h2d_util = t_final > 0 ? e->h2d->busy / t_final : 0;
    res->d2h_util = t_final > 0 ? e->d2h->busy / t_final : 0;
    res->compute_util = t_final > 0 ? e->gpu->busy / t_final : 0;
    res->h2d_gbps = t_final > 0 ? e->h2d->bytes / t_final / 1e9 : 0;
    res->hbm_capacity = e->hbm->capacity;
    res->hbm_peak_total = e->hbm->peak_total;
    for (int c = 0; c < MEM_N_CATEGORIES; c++) {
        res->hbm_peak[c] = e->hbm->peak[c];
        res->hbm_mean[c] = mt->n_tl ? mt->hbm[c] / mt->n_tl : 0;
    }
    res->mean_active = mt->n_tl ? mt->active / mt->n_tl : 0;
    res->admitted = e->admitted;
    res->completed = e->completed;
    res->unfinished = e->unfinished;
    res->never_admitted = e->requests - e->admitted;
    res->budget_rows = e->budget_rows;
    res->mean_optional_rows = mt->n_tl ? mt->optional / mt->n_tl : 0;
    res->mean_budget_rows = mt->n_tl ? mt->budget / mt->n_tl : 0;
    res->ranges = e->st->ranges;
    res->fetch_busy_s = e->st->fetch_busy;
    res->fetch_slope_delta_s = e->st->fetch_slope_delta;
    if (sc->spec.mode) spec_result(mt, e, res);
    struct timespec w1;
    clock_gettime(CLOCK_MONOTONIC, &w1);
    res->wall_s = (double)(w1.tv_sec - mt->wall0.tv_sec) + 1e-9 * (double)(w1.tv_nsec - mt->wall0.tv_nsec);
    res->rows_per_wall_s = res->wall_s > 0 ? mt->sel / res->wall_s : 0;
    res->tl = mt->tl;
    res->n_tl = mt->n_tl;
    mt->tl = NULL;
    mt->n_tl = 0;
    return 0;
}
