/* wl.c: workload lengths, arrivals and load steps; see wl.h. */
#include "sim/wl.h"
#include "common/dh_err.h"
#include "common/rng.h"

#include <math.h>
#include <string.h>

enum { RNG_LENGTHS = 0x571, RNG_ARRIVALS = 0x572 };

int wl_load(cfg *c, wl_cfg *w)
{
    memset(w, 0, sizeof *w);
    const char *mode, *arr;
    if (cfg_get_string(c, "workload", "mode", &mode, "closed") < 0) return -1;
    if (!strcmp(mode, "closed")) w->mode = WL_CLOSED;
    else if (!strcmp(mode, "open")) w->mode = WL_OPEN;
    else if (!strcmp(mode, "step")) w->mode = WL_STEP;
    else return dh_err("%s: [workload] mode = '%s' (expected closed, open or step)", cfg_name(c), mode);
    long v, zero = 0;
    if (cfg_get_double(c, "workload", "concurrency", &w->concurrency, CFG_REQUIRED, 1, 1e7) < 0) return -1;
    if (cfg_get_int(c, "workload", "prompt_len", &v, CFG_REQUIRED, 1, 1L << 30) < 0) return -1;
    w->prompt_len = (uint32_t)v;
    long pdef = (long)w->prompt_len;
    if (cfg_get_int(c, "workload", "prompt_len_max", &v, &pdef, 1, 1L << 30) < 0) return -1;
    w->prompt_len_max = (uint32_t)v;
    if (cfg_get_int(c, "workload", "output_len", &v, CFG_REQUIRED, 1, 1L << 26) < 0) return -1;
    w->output_len = (uint32_t)v;
    long odef = (long)w->output_len;
    if (cfg_get_int(c, "workload", "output_len_max", &v, &odef, 1, 1L << 26) < 0) return -1;
    w->output_len_max = (uint32_t)v;
    if (w->prompt_len_max < w->prompt_len)
        return dh_err("%s: [workload] prompt_len_max = %u is below prompt_len = %u", cfg_name(c), w->prompt_len_max, w->prompt_len);
    if (w->output_len_max < w->output_len)
        return dh_err("%s: [workload] output_len_max = %u is below output_len = %u", cfg_name(c), w->output_len_max, w->output_len);
    long sdef = 1000;
    if (cfg_get_int(c, "workload", "steps", &v, &sdef, 1, 1L << 30) < 0) return -1;
    w->steps = (uint32_t)v;
    if (cfg_get_int(c, "workload", "requests", &v, &zero, 0, 1L << 30) < 0) return -1;
    w->requests = (uint32_t)v;
    /* The warm-up: warmup_steps where given, else warmup_fraction of the steps. */
    double fz = 0, frac;
    if (cfg_get_double(c, "workload", "warmup_fraction", &frac, &fz, 0, 0.9) < 0) return -1;
    int explicit_warmup = cfg_has(c, "workload", "warmup_steps");
    if (cfg_get_int(c, "workload", "warmup_steps", &v, &zero, 0, 1L << 30) < 0) return -1;
    w->warmup_steps = explicit_warmup ? (uint32_t)v : (uint32_t)floor(frac * w->steps + 1e-9);
    if (w->warmup_steps >= w->steps)
        return dh_err("%s: [workload] warmup_steps = %u leaves no measured step of %u", cfg_name(c), w->warmup_steps, w->steps);
    if (cfg_get_int(c, "workload", "measure_tokens", &v, &zero, 0, 1L << 40) < 0) return -1;
    w->measure_tokens = (double)v;
    double dz = 0;
    if (cfg_get_double(c, "workload", "max_time_s", &w->max_time_s, &dz, 0, 1e9) < 0) return -1;
    if (cfg_get_string(c, "workload", "arrival", &arr, "poisson") < 0) return -1;
    if (!strcmp(arr, "poisson")) w->gamma = 0;
    else if (!strcmp(arr, "gamma")) w->gamma = 1;
    else return dh_err("%s: [workload] arrival = '%s' (expected poisson or gamma)", cfg_name(c), arr);
    int need_rate = w->mode == WL_OPEN;
    if (cfg_get_double(c, "workload", "rate", &w->rate, need_rate ? CFG_REQUIRED : &dz, need_rate ? 1e-9 : 0, 1e9) < 0) return -1;
    double cv1 = 1;
    if (cfg_get_double(c, "workload", "gamma_cv", &w->gamma_cv, &cv1, 1e-3, 100) < 0) return -1;
    if (w->mode == WL_STEP) {
        size_t nt, nc;
        if (cfg_get_doubles(c, "workload", "step_times", w->load_time, WL_MAX_STEPS, &nt, 0, 1e9) < 0) return -1;
        if (cfg_get_doubles(c, "workload", "step_concurrency", w->load_conc, WL_MAX_STEPS, &nc, 0, 1e7) < 0) return -1;
        if (nt != nc) return dh_err("%s: [workload] step_times has %zu items, step_concurrency %zu", cfg_name(c), nt, nc);
        if (w->load_time[0] != 0) return dh_err("%s: [workload] step_times must start at 0", cfg_name(c));
        for (size_t i = 1; i < nt; i++)
            if (!(w->load_time[i] > w->load_time[i - 1]))
                return dh_err("%s: [workload] step_times must increase", cfg_name(c));
        w->n_load = (uint32_t)nt;
    } else {
        const char *unused;
        if (cfg_has(c, "workload", "step_times") || cfg_has(c, "workload", "step_concurrency")) {
            cfg_get_string(c, "workload", "step_times", &unused, "");
            return dh_err("%s: [workload] step_times/step_concurrency need mode = step", cfg_name(c));
        }
    }
    return 0;
}

uint32_t wl_requests_needed(const wl_cfg *w, uint32_t conc, double gpus)
{
    if (w->requests) return w->requests;
    double peak = conc;
    if (w->mode == WL_STEP)
        for (uint32_t i = 0; i < w->n_load; i++)
            if (ceil(w->load_conc[i] / gpus) > peak) peak = ceil(w->load_conc[i] / gpus);
    /* Each slot finishes a request at least every output_len steps. */
    double waves = (double)w->steps / w->output_len + 1;
    double n = peak * waves + 1;
    return n > 4e9 ? 4000000000u : (uint32_t)n;
}

void wl_lengths(const wl_cfg *w, uint64_t seed, uint32_t n, uint32_t *prompt, uint32_t *output)
{
    for (uint32_t r = 0; r < n; r++) {
        rng_stream s;
        rng_init(&s, seed, r, 0, RNG_LENGTHS);
        uint32_t pspan = w->prompt_len_max - w->prompt_len + 1, ospan = w->output_len_max - w->output_len + 1;
        prompt[r] = w->prompt_len + (pspan > 1 ? rng_below(&s, pspan) : 0);
        output[r] = w->output_len + (ospan > 1 ? rng_below(&s, ospan) : 0);
    }
}

static double normal(rng_stream *s)
{
    double u1 = rng_uniform(s), u2 = rng_uniform(s);
    return sqrt(-2 * log1p(-u1)) * cos(2 * M_PI * u2);
}

/* Marsaglia-Tsang gamma(shape a, scale 1), a >= 1; a < 1 by the boost u^(1/a). */
static double gamma_draw(rng_stream *s, double a)
{
    if (a < 1) return gamma_draw(s, a + 1) * pow(1 - rng_uniform(s), 1 / a);
    double d = a - 1.0 / 3, c = 1 / sqrt(9 * d);
    for (;;) {
        double x = normal(s), v = 1 + c * x;
        if (v <= 0) continue;
        v = v * v * v;
        double u = 1 - rng_uniform(s);
        if (log(u) < 0.5 * x * x + d - d * v + d * log(v)) return d * v;
    }
}

void wl_arrivals(const wl_cfg *w, uint64_t seed, double gpus, uint32_t n, double *t)
{
    double rate = w->rate / gpus, now = 0;
    for (uint32_t r = 0; r < n; r++) {
        rng_stream s;
        rng_init(&s, seed, r, 0, RNG_ARRIVALS);
        double gap;
        if (w->gamma) {
            double shape = 1 / (w->gamma_cv * w->gamma_cv);
            gap = gamma_draw(&s, shape) / (shape * rate);
        } else {
            gap = -log1p(-rng_uniform(&s)) / rate;
        }
        now += gap;
        t[r] = now;
    }
}

double wl_target(const wl_cfg *w, double t)
{
    if (w->mode != WL_STEP) return w->concurrency;
    double c = w->load_conc[0];
    for (uint32_t i = 1; i < w->n_load; i++)
        if (t >= w->load_time[i]) c = w->load_conc[i];
    return c;
}

double wl_next_change(const wl_cfg *w, double t)
{
    for (uint32_t i = 0; i < w->n_load; i++)
        if (w->load_time[i] > t) return w->load_time[i];
    return -1;
}
