/* search.c: the steady-state latency search; see search.h.
 *
 * Cost: O(log max) runs (doubling, then interpolation guarded by bisection), each O(steps log steps)
 * to judge; the runs dominate. */
#include "sim/search.h"
#include "common/dh_err.h"
#include "common/mem.h"
#include "sim/metrics.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const search_stop_name[3] = { "latency", "memory", "max" };

#define MSER_BATCH 5
#define MSER_MIN_BATCHES 4

int search_stat_parse(const char *s, search_stat *st)
{
    static const char *const metric[RL_N + 1] = { "ttft", "tpot", "e2e", "queue", "token" };
    const char *us = strchr(s, '_'), *q = us ? us + 1 : s;
    st->metric = SEARCH_TOKEN;
    if (us) {
        int found = 0;
        for (int m = 0; m <= RL_N; m++)
            if ((size_t)(us - s) == strlen(metric[m]) && !strncmp(s, metric[m], (size_t)(us - s))) { st->metric = m; found = 1; }
        if (!found) return dh_err("latency statistic '%s': expected token, tpot, ttft, e2e or queue before '_'", s);
    }
    if (!strcmp(q, "p50")) st->q = 0.50;
    else if (!strcmp(q, "p90")) st->q = 0.90;
    else if (!strcmp(q, "p99")) st->q = 0.99;
    else if (!strcmp(q, "mean")) st->q = 0;
    else return dh_err("latency statistic '%s': expected p50, p90, p99 or mean (optionally after token_, tpot_, ttft_, e2e_ or queue_)", s);
    return 0;
}

const char *search_stat_name(search_stat st, char *buf, int cap)
{
    const char *m = st.metric == SEARCH_TOKEN ? "token" : reqlat_metric_name[st.metric];
    if (st.q > 0) snprintf(buf, (size_t)cap, "%s_p%.0f", m, st.q * 100);
    else snprintf(buf, (size_t)cap, "%s_mean", m);
    return buf;
}

int64_t search_mser5(const double *x, uint32_t n)
{
    uint32_t m = n / MSER_BATCH;
    if (m < MSER_MIN_BATCHES) return -1;
    double *b = dh_calloc(m, sizeof *b);
    for (uint32_t j = 0; j < m; j++) {
        for (uint32_t i = 0; i < MSER_BATCH; i++) b[j] += x[j * MSER_BATCH + i];
        b[j] /= MSER_BATCH;
    }
    /* MSER(d) = sum_{j >= d} (b_j - mean_d)^2 / (m - d)^2, two passes per d
     * (O(m^2), m = steps / 5: exact enough that a constant series ties), for
     * d in the first half only (White 1997: a later cut leaves too little to
     * judge). A smaller cut wins ties: eps is far below any real variance. */
    double scale = 0;
    for (uint32_t j = 0; j < m; j++) scale += b[j] * b[j];
    const double eps = 1e-12 * scale / m / m;
    double best = INFINITY;
    int64_t arg = 0;
    for (uint32_t d = 0; d <= m / 2; d++) {
        double mean = 0, ss = 0, k = (double)(m - d);
        for (uint32_t j = d; j < m; j++) mean += b[j];
        mean /= k;
        for (uint32_t j = d; j < m; j++) ss += (b[j] - mean) * (b[j] - mean);
        double v = ss / (k * k);
        if (v < best - eps) { best = v; arg = d; }
    }
    free(b);
    /* A minimum on the boundary: the series is still moving at mid-run. */
    if (arg == (int64_t)(m / 2)) return -1;
    return arg * MSER_BATCH;
}

/* The per-token latency of a step, as metrics.c defines it: the step over
 * the tokens each request emitted in it. */
static double step_latency(const sim_tl_row *t) { return t->tokens > 0 ? (t->t_end - t->t_start) * t->active / t->tokens : 0; }

/* The token statistic over steps [w, n) of r: the token-weighted quantile
 * (metrics.h) or mean, with the order-statistic CI over the steps. */
static void token_stat(const sim_result *r, uint32_t w, double q, search_eval *e)
{
    uint32_t n = r->n_tl - w;
    metrics_dur *d = dh_calloc(n ? n : 1, sizeof *d);
    double total = 0;
    for (uint32_t i = 0; i < n; i++) {
        d[i].s_per_token = step_latency(&r->tl[w + i]);
        d[i].tokens = r->tl[w + i].tokens;
        total += d[i].tokens;
    }
    metrics_sort_durs(d, n);
    e->n = n;
    e->lo = e->hi = -1;
    if (q > 0) {
        e->value = metrics_quantile(d, n, total, q);
        /* The order-statistic CI in token weight: the quantiles at q -/+ 1.96
         * sqrt(q (1 - q) / n_eff), n_eff = (sum w)^2 / sum w^2 the steps'
         * effective number (Kish); unknown where that leaves (0, 1). */
        double w2 = 0;
        for (uint32_t i = 0; i < n; i++) w2 += d[i].tokens * d[i].tokens;
        double neff = w2 > 0 ? total * total / w2 : 0;
        double h = neff > 0 ? 1.96 * sqrt(q * (1 - q) / neff) : 1;
        if (q - h > 0 && q + h < 1) {
            e->lo = metrics_quantile(d, n, total, q - h);
            e->hi = metrics_quantile(d, n, total, q + h);
        }
    } else {
        double s = 0;
        for (uint32_t i = 0; i < n; i++) s += d[i].s_per_token * d[i].tokens;
        e->value = total > 0 ? s / total : 0;
    }
    free(d);
}

int search_judge(const search_cfg *cfg, uint32_t c, const sim_result *r, search_eval *e)
{
    memset(e, 0, sizeof *e);
    e->per_gpu = c;
    double *x = dh_calloc(r->n_tl ? r->n_tl : 1, sizeof *x);
    for (uint32_t i = 0; i < r->n_tl; i++) x[i] = step_latency(&r->tl[i]);
    int64_t w = search_mser5(x, r->n_tl);
    free(x);
    if (w < 0)
        return dh_err("per-GPU concurrency %u: no steady state within %u steps (the per-token latency is still "
                      "moving at mid-run, or fewer than %d steps); raise --steps", c, r->n_tl, MSER_BATCH * MSER_MIN_BATCHES);
    if (w < cfg->config_warmup) w = cfg->config_warmup;
    if (w >= r->n_tl) return dh_err("per-GPU concurrency %u: the warm-up of %lld steps leaves no measured step of %u", c, (long long)w, r->n_tl);
    e->warmup = (uint32_t)w;
    e->measured = r->n_tl - e->warmup;
    for (uint32_t i = e->warmup; i < r->n_tl; i++)
        if (r->tl[i].active < c) e->short_steps++;
    e->memory_short = e->short_steps > 0;
    /* A short step without a waiting request is the trace running dry, not memory. */
    if (e->memory_short && r->never_admitted == 0)
        return dh_err("per-GPU concurrency %u: %u measured steps ran fewer requests with none left waiting: the trace "
                      "ran out of requests (a bug: sim_shape sizes it to replace every finished one)", c, e->short_steps);
    if (cfg->stat.metric == SEARCH_TOKEN) {
        token_stat(r, e->warmup, cfg->stat.q, e);
    } else {
        double *v;
        uint32_t k = reqlat_samples(r->req, r->n_req, cfg->stat.metric, r->tl[e->warmup].t_start, &v);
        e->n = k;
        if (cfg->stat.q > 0) {
            reqlat_q rq = reqlat_quantile(v, k, cfg->stat.q);
            e->value = rq.v;
            e->lo = rq.lo;
            e->hi = rq.hi;
        } else {
            e->value = reqlat_mean(v, k);
            e->lo = e->hi = -1;
        }
        free(v);
    }
    if (e->n == 0 && !e->memory_short) {
        char nm[32];
        return dh_err("per-GPU concurrency %u: no sample of %s in the %u measured steps (no request arrived after "
                      "the warm-up and finished); raise --steps", c, search_stat_name(cfg->stat, nm, sizeof nm), e->measured);
    }
    e->ok = !e->memory_short && e->value <= cfg->bound_s;
    return 0;
}

/* Run and judge per-GPU concurrency c; the result kept in *res. */
static int eval(const search_cfg *cfg, uint32_t c, search_out *o, search_eval *e, sim_result *res)
{
    if (cfg->run(cfg->ctx, c, res) < 0) return -1;
    o->runs++;
    if (search_judge(cfg, c, res, e) < 0) { sim_result_release(res); return -1; }
    if (e->warmup > o->max_warmup) o->max_warmup = e->warmup;
    if (cfg->progress) cfg->progress(cfg->ctx, e);
    return 0;
}

static void keep(search_eval *dst_e, sim_result *dst_r, const search_eval *e, sim_result *r)
{
    sim_result_release(dst_r);
    *dst_r = *r;
    *dst_e = *e;
    memset(r, 0, sizeof *r);
}

int search_run(const search_cfg *cfg, search_out *o)
{
    memset(o, 0, sizeof *o);
    uint32_t lo = 0, hi = 1;
    search_eval e;
    sim_result r;
    memset(&r, 0, sizeof r);
    /* Doubling: the first failing concurrency, or the upper limit met. */
    for (;;) {
        if (eval(cfg, hi, o, &e, &r) < 0) goto fail;
        if (!e.ok) { keep(&o->above, &o->res_above, &e, &r); break; }
        lo = hi;
        keep(&o->at, &o->res, &e, &r);
        if (hi >= cfg->max_per_gpu) { o->best = lo; o->stop = SEARCH_STOP_MAX; return 0; }
        hi = hi * 2 > cfg->max_per_gpu ? cfg->max_per_gpu : hi * 2;
    }
    /* Bracketing: lo met the bound (or is 0), hi failed. The probe is where
     * the line through the two ends' statistics meets the bound (the latency
     * is close to linear in c, so two probes usually settle it), clamped
     * inside the bracket; the midpoint where an end has no latency to go by
     * (lo = 0, hi memory-bound) or where two interpolations did not halve
     * the bracket (regula falsi's slow side), so the runs stay O(log) in the
     * worst case. Any probe keeps the invariant, so where failing is
     * monotone in c the answer does not depend on the probing rule. */
    uint32_t ref = hi - lo; /* the bracket's width when it last halved */
    int tries = 0;          /* interpolations since then */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        int interp = lo > 0 && !o->above.memory_short && tries < 2 && o->above.value > o->at.value;
        if (interp) {
            double p = lo + (cfg->bound_s - o->at.value) / (o->above.value - o->at.value) * (hi - lo);
            mid = p < lo + 1 ? lo + 1 : p > hi - 1 ? hi - 1 : (uint32_t)floor(p);
        }
        if (eval(cfg, mid, o, &e, &r) < 0) goto fail;
        if (e.ok) { lo = mid; keep(&o->at, &o->res, &e, &r); }
        else { hi = mid; keep(&o->above, &o->res_above, &e, &r); }
        tries += interp;
        if (!interp || 2 * (hi - lo) <= ref) { ref = hi - lo; tries = 0; }
    }
    o->best = lo;
    o->stop = o->above.memory_short ? SEARCH_STOP_MEMORY : SEARCH_STOP_LATENCY;
    /* The bound inside a CI: the answer may move by one with another run. */
    const search_eval *ev[2] = { lo ? &o->at : NULL, &o->above };
    for (int i = 0; i < 2; i++)
        if (ev[i] && !ev[i]->memory_short && ev[i]->lo >= 0 && ev[i]->lo <= cfg->bound_s && cfg->bound_s <= ev[i]->hi) o->noisy = 1;
    return 0;
fail:
    search_out_release(o);
    return -1;
}

void search_out_release(search_out *o)
{
    sim_result_release(&o->res);
    sim_result_release(&o->res_above);
}
