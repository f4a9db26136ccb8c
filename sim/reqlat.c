/* reqlat.c: per-request events, latencies and their quantiles; see reqlat.h.
 *
 * Cost: O(1) per event; O(n log n) per metric for the quantiles and CDFs. */
#include "sim/reqlat.h"
#include "common/mem.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const reqlat_metric_name[RL_N] = { "ttft", "tpot", "e2e", "queue" };

void reqlat_init(reqlat *l, uint32_t n, const uint32_t *prompt, const uint32_t *output, const double *open_arrival)
{
    memset(l, 0, sizeof *l);
    l->n = n;
    l->r = dh_calloc(n ? n : 1, sizeof *l->r);
    l->open_arrival = open_arrival;
    for (uint32_t i = 0; i < n; i++)
        l->r[i] = (reqlat_rec){ .prompt = prompt[i], .output = output[i], .arrival = -1, .admit = -1, .first = -1, .finish = -1,
                                 .prefill = -1 };
}

void reqlat_release(reqlat *l)
{
    free(l->r);
    memset(l, 0, sizeof *l);
}

void reqlat_arrive(reqlat *l, double t, uint32_t target, uint32_t completed)
{
    if (l->open_arrival) {
        while (l->n_arrived < l->n && l->open_arrival[l->n_arrived] <= t) {
            l->r[l->n_arrived].arrival = l->open_arrival[l->n_arrived];
            l->n_arrived++;
        }
        return;
    }
    while (l->n_arrived < l->n && l->n_arrived - completed < target) l->r[l->n_arrived++].arrival = t;
}

void reqlat_admit(reqlat *l, uint32_t r, double t)
{
    /* Admission follows arrival; an open-loop request admitted at its own
     * arrival time is marked arrived here if reqlat_arrive did not see it. */
    if (l->r[r].arrival < 0) {
        l->r[r].arrival = l->open_arrival ? l->open_arrival[r] : t;
        if (r >= l->n_arrived) l->n_arrived = r + 1;
    }
    l->r[r].admit = t;
}

void reqlat_prefill(reqlat *l, uint32_t r, double t) { l->r[r].prefill = t; }

double reqlat_prefill_s(const reqlat_rec *x)
{
    return x->prefill >= 0 && x->admit >= 0 ? x->prefill - x->admit : -1;
}

void reqlat_tokens(reqlat *l, uint32_t r, double t, int done)
{
    if (l->r[r].first < 0) l->r[r].first = t;
    if (done) l->r[r].finish = t;
}

double reqlat_value(const reqlat_rec *x, int m)
{
    if (x->arrival < 0) return -1;
    switch (m) {
    case RL_QUEUE: return x->admit >= 0 ? x->admit - x->arrival : -1;
    case RL_TTFT: return x->first >= 0 ? x->first - x->arrival : -1;
    case RL_E2E: return x->finish >= 0 ? x->finish - x->arrival : -1;
    default:
        if (x->finish < 0 || x->output < 2) return -1;
        return (x->finish - x->first) / (x->output - 1);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

uint32_t reqlat_samples(const reqlat_rec *r, uint32_t n, int m, double t_from, double **out)
{
    uint32_t k = 0;
    double *v = NULL;
    for (uint32_t i = 0; i < n; i++) {
        if (r[i].arrival < 0 || r[i].arrival < t_from) continue;
        double x = reqlat_value(&r[i], m);
        if (x < 0) continue;
        if (!v) v = dh_calloc(n, sizeof *v);
        v[k++] = x;
    }
    if (k) qsort(v, k, sizeof *v, cmp_double);
    *out = v;
    return k;
}

/* reqlat_samples for the prefill time (not one of the RL_ metrics: --search-latency and the
 * report's table take those). */
static uint32_t prefill_samples(const reqlat_rec *r, uint32_t n, double t_from, double **out)
{
    uint32_t k = 0;
    double *v = NULL;
    for (uint32_t i = 0; i < n; i++) {
        if (r[i].arrival < 0 || r[i].arrival < t_from) continue;
        double x = reqlat_prefill_s(&r[i]);
        if (x < 0) continue;
        if (!v) v = dh_calloc(n, sizeof *v);
        v[k++] = x;
    }
    if (k) qsort(v, k, sizeof *v, cmp_double);
    *out = v;
    return k;
}

reqlat_q reqlat_quantile(const double *x, uint32_t n, double q)
{
    reqlat_q o = { -1, -1, -1, n };
    if (n == 0) return o;
    double rank = ceil(q * n);
    if (rank < 1) rank = 1;
    o.v = x[(uint32_t)rank - 1];
    /* Ranks (1-based) of the order statistics bounding the quantile with 95%
     * coverage: n q -/+ 1.96 sqrt(n q (1 - q)). */
    double h = 1.96 * sqrt(n * q * (1 - q));
    double lo = floor(n * q - h), hi = ceil(n * q + h) + 1;
    if (lo >= 1 && hi <= n) {
        o.lo = x[(uint32_t)lo - 1];
        o.hi = x[(uint32_t)hi - 1];
    }
    return o;
}

double reqlat_mean(const double *x, uint32_t n)
{
    if (n == 0) return -1;
    double s = 0;
    for (uint32_t i = 0; i < n; i++) s += x[i];
    return s / n;
}

/* A value of a CSV row: empty where it is not defined. */
static void csv_val(FILE *f, double v)
{
    if (v >= 0) fprintf(f, ",%.9g", v);
    else fputs(",", f);
}

int reqlat_csv(FILE *f, const char *policy, const reqlat_rec *r, uint32_t n, double t_from, int header)
{
    if (header)
        fputs("policy,request,prompt_tokens,output_tokens,measured,arrival_s,admit_s,first_token_s,finish_s,"
              "queue_s,ttft_s,tpot_s,e2e_s,prefill_done_s,prefill_s\n", f);
    for (uint32_t i = 0; i < n; i++) {
        const reqlat_rec *x = &r[i];
        if (x->arrival < 0) continue;
        fprintf(f, "%s,%u,%u,%u,%d", policy, i, x->prompt, x->output, x->arrival >= t_from);
        csv_val(f, x->arrival);
        csv_val(f, x->admit);
        csv_val(f, x->first);
        csv_val(f, x->finish);
        static const int order[RL_N] = { RL_QUEUE, RL_TTFT, RL_TPOT, RL_E2E }; /* the header's */
        for (int m = 0; m < RL_N; m++) csv_val(f, reqlat_value(x, order[m]));
        csv_val(f, x->prefill);
        csv_val(f, reqlat_prefill_s(x));
        fputs("\n", f);
    }
    return ferror(f) ? -1 : 0;
}

int reqlat_cdf_tsv(FILE *f, const char *policy, const reqlat_rec *r, uint32_t n, double t_from, int header)
{
    if (header) fputs("policy\tmetric\tn\tq\tvalue_s\n", f);
    int colocated = 0;
    for (uint32_t i = 0; i < n && !colocated; i++) colocated = r[i].prefill >= 0;
    for (int m = 0; m < RL_N + colocated; m++) {
        double *v;
        uint32_t k = m < RL_N ? reqlat_samples(r, n, m, t_from, &v) : prefill_samples(r, n, t_from, &v);
        for (int i = 1; i <= 100 && k; i++) {
            double q = i < 100 ? i / 100.0 : 0.999;
            fprintf(f, "%s\t%s\t%u\t%g\t%.9g\n", policy, m < RL_N ? reqlat_metric_name[m] : "prefill", k, q,
                    reqlat_quantile(v, k, q).v);
        }
        free(v);
    }
    return ferror(f) ? -1 : 0;
}
