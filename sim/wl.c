/* wl.c: workload lengths, arrivals and load steps; see wl.h. */
#include "sim/wl.h"
#include "common/cfgkey.h"
#include "common/dh_err.h"
#include "common/rng.h"

#include <math.h>
#include <string.h>

/* The [workload] keys of an instance (docs/CONFIG.md is printed from them). */
static const cfg_key wl_keys[] = {
    CK_STR_ROW("workload", "mode", "closed", "closed|open|step", "Closed loop (a finished request is replaced at "
               "once), open-loop arrivals at rate, or load steps (step_times, step_concurrency).", 0),
    CK_ROW("workload", "concurrency", CK_NUM, "requests", 1, 1e7, NULL, "Requests in flight over all GPUs (closed; the "
           "admission cap otherwise).", 0),
    CK_ROW("workload", "prompt_len", CK_INT, "tokens", 1, 1L << 30, NULL, "Prompt length (the lower end with "
           "prompt_len_max).", 0),
    CK_DYN_ROW("workload", "prompt_len_max", CK_INT, "tokens", 1, 1L << 30, "prompt_len", "prompt_len .. 1073741824",
               "Prompt lengths are drawn uniformly in [prompt_len, prompt_len_max].", 0),
    CK_ROW("workload", "output_len", CK_INT, "tokens", 1, 1L << 26, NULL, "Output length (lower end).", 0),
    CK_DYN_ROW("workload", "output_len_max", CK_INT, "tokens", 1, 1L << 26, "output_len", "output_len .. 67108864",
               "Output lengths are drawn uniformly in [output_len, output_len_max].", 0),
    CK_ROW("workload", "steps", CK_INT, "steps", 1, 1L << 30, "1000", "Decode steps simulated.", 0),
    CK_ROW("workload", "requests", CK_INT, "requests", 0, 1L << 30, "0", "Requests in the trace; 0: as many as the run "
           "needs.", 0),
    CK_DYN_ROW("workload", "warmup_steps", CK_INT, "steps", 0, 1L << 30, "warmup_fraction x steps", "0 .. steps - 1",
               "Steps left out of the measured statistics (reported apart).", 0),
    CK_ROW("workload", "warmup_fraction", CK_NUM, "", 0, 0.9, "0", "The warm-up as a share of the steps, where "
           "warmup_steps is not given.", 0),
    CK_ROW("workload", "measure_tokens", CK_INT, "tokens", 0, 1099511627776.0, "0", "Stop once the measured steps have "
           "emitted this many output tokens (0: run every step); dhsim --compare gives a speculative column the plain "
           "columns' count.", 0),
    CK_ROW("workload", "max_time_s", CK_NUM, "s", 0, 1e9, "0", "Stop at this simulated time; 0: no limit.", 0),
    CK_STR_ROW("workload", "arrival", "poisson", "poisson|gamma", "Open-loop inter-arrival law.", 0),
    CK_DYN_ROW("workload", "rate", CK_NUM, "requests/s", 0, 1e9, "required for mode = open, else 0",
               "1e-09 .. 1e+09 (open), else 0 .. 1e+09", "Open-loop arrival rate over all GPUs.", 0),
    CK_ROW("workload", "gamma_cv", CK_NUM, "", 1e-3, 100, "1", "Coefficient of variation of gamma inter-arrivals.", 0),
    CK_DYN_ROW("workload", "step_times", CK_LIST, "s", 0, 1e9, "required for mode = step", NULL, "Times of the load "
               "changes, from 0, increasing (mode = step only).", 0),
    CK_DYN_ROW("workload", "step_concurrency", CK_LIST, "requests", 0, 1e7, "required for mode = step", NULL,
               "Concurrency from each step time on (as many items as step_times).", 0),
};
const cfg_schema wl_schema = CFG_SCHEMA("models/instances/NAME.ini", "Instance: workload", "The requests a run "
    "serves (sim/wl.h).", wl_keys);

enum { RNG_LENGTHS = 0x571, RNG_ARRIVALS = 0x572 };

int wl_load(cfg *c, wl_cfg *w)
{
    const cfg_schema *W = &wl_schema;
    memset(w, 0, sizeof *w);
    const char *mode, *arr;
    if (cfgk_string(c, W, "workload", "mode", &mode) < 0) return -1;
    if (!strcmp(mode, "closed")) w->mode = WL_CLOSED;
    else if (!strcmp(mode, "open")) w->mode = WL_OPEN;
    else if (!strcmp(mode, "step")) w->mode = WL_STEP;
    else return dh_err("%s: [workload] mode = '%s' (expected closed, open or step)", cfg_name(c), mode);
    long v;
    if (cfgk_double(c, W, "workload", "concurrency", &w->concurrency) < 0) return -1;
    if (cfgk_int(c, W, "workload", "prompt_len", &v) < 0) return -1;
    w->prompt_len = (uint32_t)v;
    long pdef = (long)w->prompt_len;
    if (cfgk_int_in(c, W, "workload", "prompt_len_max", &v, &pdef, 1, 1L << 30) < 0) return -1;
    w->prompt_len_max = (uint32_t)v;
    if (cfgk_int(c, W, "workload", "output_len", &v) < 0) return -1;
    w->output_len = (uint32_t)v;
    long odef = (long)w->output_len;
    if (cfgk_int_in(c, W, "workload", "output_len_max", &v, &odef, 1, 1L << 26) < 0) return -1;
    w->output_len_max = (uint32_t)v;
    if (w->prompt_len_max < w->prompt_len)
        return dh_err("%s: [workload] prompt_len_max = %u is below prompt_len = %u", cfg_name(c), w->prompt_len_max, w->prompt_len);
    if (w->output_len_max < w->output_len)
        return dh_err("%s: [workload] output_len_max = %u is below output_len = %u", cfg_name(c), w->output_len_max, w->output_len);
    if (cfgk_int(c, W, "workload", "steps", &v) < 0) return -1;
    w->steps = (uint32_t)v;
    if (cfgk_int(c, W, "workload", "requests", &v) < 0) return -1;
    w->requests = (uint32_t)v;
    /* The warm-up: warmup_steps where given, else warmup_fraction of the steps. */
    double frac;
    if (cfgk_double(c, W, "workload", "warmup_fraction", &frac) < 0) return -1;
    /* The computed value is the default, so that the defaults a run records (cfg_default_at) hold it. */
    const long warm_def = (long)floor(frac * w->steps + 1e-9);
    if (cfgk_int_in(c, W, "workload", "warmup_steps", &v, &warm_def, 0, 1L << 30) < 0) return -1;
    w->warmup_steps = (uint32_t)v;
    if (w->warmup_steps >= w->steps)
        return dh_err("%s: [workload] warmup_steps = %u leaves no measured step of %u", cfg_name(c), w->warmup_steps, w->steps);
    if (cfgk_int(c, W, "workload", "measure_tokens", &v) < 0) return -1;
    w->measure_tokens = (double)v;
    double dz = 0;
    if (cfgk_double(c, W, "workload", "max_time_s", &w->max_time_s) < 0) return -1;
    if (cfgk_string(c, W, "workload", "arrival", &arr) < 0) return -1;
    if (!strcmp(arr, "poisson")) w->gamma = 0;
    else if (!strcmp(arr, "gamma")) w->gamma = 1;
    else return dh_err("%s: [workload] arrival = '%s' (expected poisson or gamma)", cfg_name(c), arr);
    int need_rate = w->mode == WL_OPEN;
    if (cfgk_double_in(c, W, "workload", "rate", &w->rate, need_rate ? CFG_REQUIRED : &dz, need_rate ? 1e-9 : 0, 1e9) < 0) return -1;
    if (cfgk_double(c, W, "workload", "gamma_cv", &w->gamma_cv) < 0) return -1;
    if (w->mode == WL_STEP) {
        size_t nt, nc;
        if (cfgk_doubles(c, W, "workload", "step_times", w->load_time, WL_MAX_STEPS, &nt) < 0) return -1;
        if (cfgk_doubles(c, W, "workload", "step_concurrency", w->load_conc, WL_MAX_STEPS, &nc) < 0) return -1;
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
