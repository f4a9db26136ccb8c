/* cost.c: the cost model's forms; see cost.h. */
#include "sim/cost.h"

#include <math.h>

double cost_table_eval(const cost_table *t, double x)
{
    if (x <= t->x[0]) return t->y[0];
    if (x >= t->x[t->n - 1]) return t->y[t->n - 1];
    /* A linear scan: tables hold a few to COST_TABLE_MAX points, and a fetch evaluates four. */
    size_t i = 1;
    while (t->x[i] < x) i++;
    double u = (log(x) - log(t->x[i - 1])) / (log(t->x[i]) - log(t->x[i - 1]));
    return t->y[i - 1] + u * (t->y[i] - t->y[i - 1]);
}

/* The extrapolation a report compares with the held end value: beyond either
 * end the end segment's line (in log x, as inside) goes on, floored at a tenth
 * of the end value so that a falling bandwidth stays positive. */
double cost_table_eval_slope(const cost_table *t, double x)
{
    if (t->n < 2 || (x > t->x[0] && x < t->x[t->n - 1])) return cost_table_eval(t, x);
    size_t a = x <= t->x[0] ? 0 : t->n - 2, e = x <= t->x[0] ? 0 : t->n - 1;
    double u = (log(x) - log(t->x[a])) / (log(t->x[a + 1]) - log(t->x[a]));
    double y = t->y[a] + u * (t->y[a + 1] - t->y[a]);
    return y > 0.1 * t->y[e] ? y : 0.1 * t->y[e];
}

double cost_roofline_time(const cost_roofline *r, double bytes, double flops, int fp8, double compute_sms)
{
    double rate = (fp8 ? r->fp8_flops : r->bf16_flops) * r->mma_efficiency * compute_sms / r->sms;
    double tb = bytes / r->hbm_bw, tf = flops / rate;
    return r->launch_s + (tb > tf ? tb : tf);
}

double cost_tensor_time(const cost_roofline *r, double flops, int fp8, double compute_sms)
{
    /* Written as the roofline with no bytes less its launch, the order the simulator has
     * always evaluated it in (its outputs are compared bit for bit). */
    return cost_roofline_time(r, 0, flops, fp8, compute_sms) - r->launch_s;
}

double cost_attention_time(const cost_model *c, double bytes, double flops, double queries, int fp8,
                           double compute_sms)
{
    if (c->attn.form != COST_FITTED) return cost_roofline_time(&c->roof, bytes, flops, fp8, compute_sms);
    /* Fitted: a fixed cost per launch and per query token + the selected rows at the
     * attention kernel's own rate, unless the tensor work takes longer. */
    double ta = bytes / c->attn.bw, tf = cost_tensor_time(&c->roof, flops, fp8, compute_sms);
    return c->attn.launch_s + queries * c->attn.query_s + (ta > tf ? ta : tf);
}

double cost_gemm_time(const cost_model *c, double weight_bytes, double flops, int fp8, double compute_sms)
{
    if (c->gemm.form != COST_FITTED) return cost_roofline_time(&c->roof, weight_bytes, flops, fp8, compute_sms);
    /* Fitted: the layer's launches + its weights at the decode GEMMs' streaming rate, unless
     * the tensor work takes longer. */
    double tw = weight_bytes / c->gemm.bw, tf = cost_tensor_time(&c->roof, flops, fp8, compute_sms);
    return c->gemm.fixed_s + (tw > tf ? tw : tf);
}

double cost_topk_time(const cost_topk *p, double t0, double topks, double rows, double k)
{
    if (!(p->slots > 0) || !(topks > 0)) return t0;
    if (k > rows) k = rows;
    const double full = floor(topks / p->slots + 1e-9), rem = topks - full * p->slots;
    double t = t0;
    for (int j = 0; j < 2; j++) {
        const double waves = j ? (rem > 1e-9) : full, n = j ? rem : p->slots;
        if (waves == 0) continue;
        const double a = rows * p->row_s, b = p->score_rate > 0 ? n * rows / p->score_rate : 0;
        /* The soft maximum (a^q + b^q)^(1/q), scaled by the larger so that no power overflows. */
        const double big = a > b ? a : b;
        const double m = a > 0 && b > 0 ? big * pow(pow(a / big, p->steepness) + pow(b / big, p->steepness),
                                                    1 / p->steepness)
                                        : big;
        t += waves * (p->wave_s + k * p->k_s + m);
    }
    return t;
}

double cost_scoring_time(double bytes, double bw, double macs, double ops_s)
{
    double tb = bytes / bw, tf = macs / ops_s;
    return tb > tf ? tb : tf;
}

double cost_indexer_time(const cost_model *c, double bytes, double flops, double topks, double rows, double k,
                         double compute_sms)
{
    if (c->indexer.form != COST_FITTED) return cost_roofline_time(&c->roof, bytes, flops, 1, compute_sms);
    /* Fitted: the keys at the kernel's own rate, the scoring rate in multiply-adds, then one
     * fixed cost for the indexer's launch and the top-k's, and the top-k's waves. */
    return cost_scoring_time(bytes, c->indexer.bw, flops / 2.0, c->indexer.ops_s) + c->indexer.select_s +
           cost_topk_time(&c->topk, 0, topks, rows, k);
}

double cost_a2a_ranks(double experts, double topk, double ep)
{
    if (ep <= 1 || experts <= 0 || topk <= 0) return 1;
    double none_here = 1, per_gpu = experts / ep;
    for (double i = 0; i < topk; i++) none_here *= (experts - per_gpu - i) / (experts - i);
    return ep * (1 - none_here);
}

double cost_a2a_add(double t, const double lat_s[2], const double gbps[2], double ranks, double tokens,
                    const double msg_bytes[2])
{
    /* Linear in tokens: a verification step pays for every query token it routes. */
    for (int p = 0; p < 2; p++) {
        t += lat_s[p];
        if (gbps[p] > 0) t += tokens * ranks * msg_bytes[p] / (gbps[p] * 1e9);
    }
    return t;
}

typedef double (*table_eval_fn)(const cost_table *, double);

static double gather_bw(const cost_fetch *f, double row_bytes, double pages, double sms, table_eval_fn ev)
{
    double bw = ev(&f->row, row_bytes) / ev(&f->row, f->ref_row_bytes) * ev(&f->pages, pages) * ev(&f->sms, sms);
    return bw < f->h2d_bw ? bw : f->h2d_bw;
}

double cost_gather_bw(const cost_fetch *f, double row_bytes, double pages, double sms)
{
    return gather_bw(f, row_bytes, pages, sms, cost_table_eval);
}

double cost_fetch_fit_row(const cost_fetch_fit *p, double row_bytes, double sms, double rho, int *branch)
{
    const double D = isnan(rho) ? 0 : p->density * exp(-p->density_pow * log(rho));
    const double A = p->sm_row / sms, B = p->row_issue + row_bytes * p->row_issue_per_byte + D,
                 C = row_bytes * p->link_per_byte;
    const int br = A >= B && A >= C ? 0 : B >= C ? 1 : 2;
    if (branch) *branch = br;
    return br == 0 ? A : br == 1 ? B : C;
}

double cost_fetch_fit_launch(const cost_fetch_fit *p, double rows, double row_bytes, double sms, double rho,
                             double pages, double pool)
{
    double t = rows * cost_fetch_fit_row(p, row_bytes, sms, rho, NULL) + p->t0;
    if (!isnan(pages)) {
        const double over = pages - p->page_reach, w = p->walk_reach != 0 ? 1.0 - p->walk_reach / pool : 1;
        if (over > 0 && w > 0) t += p->page * over * w;
    }
    return t;
}

static double fetch_time(const cost_fetch *f, double rows, double row_bytes, double pages, double regions, double sms,
                         double pool, table_eval_fn ev)
{
    if (rows <= 0) return 0;
    if (f->form != COST_FITTED) return f->launch_s + rows * row_bytes / gather_bw(f, row_bytes, pages, sms, ev);
    return cost_fetch_fit_launch(&f->fit, rows, row_bytes, sms, regions > 0 ? rows / regions : 1, pages, pool);
}

double cost_fetch_time(const cost_fetch *f, double rows, double row_bytes, double pages, double regions, double sms,
                       double pool)
{
    return fetch_time(f, rows, row_bytes, pages, regions, sms, pool, cost_table_eval);
}

double cost_fetch_time_slope(const cost_fetch *f, double rows, double row_bytes, double pages, double regions,
                             double sms, double pool)
{
    return fetch_time(f, rows, row_bytes, pages, regions, sms, pool, cost_table_eval_slope);
}

double cost_beside_slowdown(const cost_beside *b, double rho)
{
    return b->max / (1 + exp(b->steepness * (log(rho) - log(b->half))));
}

double cost_fetch_beside(const cost_fetch *f, double rows, double regions)
{
    if (!(f->beside.max > 0)) return 1;
    return cost_beside_slowdown(&f->beside, regions > 0 && rows > 0 ? rows / regions : 1);
}

double cost_writeback_time(double bytes, double d2h_bw) { return bytes / d2h_bw; }

double cost_compute_beside(const cost_interference *i, double d, double overlap)
{
    if (i->fetch > 0) d += i->fetch * (overlap < d ? overlap : d);
    return d;
}

double cost_collective_time(double lat_s, double gbps, double total_bytes, double n)
{
    if (n <= 1) return 0;
    double t = lat_s;
    if (gbps > 0) t += total_bytes * (n - 1) / n / (gbps * 1e9);
    return t;
}

double cost_normal_max(double n)
{
    if (n <= 1) return 0;
    /* E = int x n phi(x) Phi(x)^(n-1) dx over [-12, 12] (the tails beyond add under 1e-30). */
    const int N = 4800;
    const double a = -12, h = 24.0 / N;
    double s = 0;
    for (int i = 0; i <= N; i++) {
        double x = a + i * h;
        double phi = exp(-0.5 * x * x) / sqrt(2 * M_PI), Phi = 0.5 * erfc(-x / sqrt(2));
        double f = x * n * phi * pow(Phi, n - 1);
        s += f * (i == 0 || i == N ? 1 : (i & 1) ? 4 : 2);
    }
    return s * h / 3;
}

double cost_straggler_factor(double cv, double n) { return cv > 0 ? 1 + cv * cost_normal_max(n) : 1; }

double cost_moe_experts_touched(double experts, double topk, double tokens)
{
    if (!(tokens > 0) || !(experts > 0) || !(topk > 0)) return 0;
    return experts * -expm1(tokens * log1p(-topk / experts));
}

double cost_moe_tp_weight_bytes(double experts, double topk, double tokens, double expert_bytes, double moe_tp)
{
    return cost_moe_experts_touched(experts, topk, tokens) * expert_bytes / moe_tp;
}

double cost_gemm_fixed_share_s(const cost_model *c, double share)
{
    return c->gemm.form == COST_FITTED ? share * c->gemm.fixed_s : 0;
}

double cost_moe_tp_allreduces(double attention_dp, int extend)
{
    /* DP attention: SGLang's decode pads every rank to the longest (DpPaddingMode MAX_LEN, the
     * mode in CUDA graphs) and runs an all-gather before the MoE and a reduce-scatter after it
     * (the MoE's all-reduce skipped); a ring all-reduce is a reduce-scatter then an all-gather,
     * so the two cost one all-reduce of the gathered buffer (assumed for the latency term, NCCL's
     * bus-bandwidth convention for the bytes). An extend pass takes SUM_LEN: the gather is an
     * all-reduce of a zero-padded buffer and the MoE all-reduces its output before dp_scatter's
     * local copy. */
    if (attention_dp > 1) return extend ? 2 : 1;
    return 1;
}
