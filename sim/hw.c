/* hw.c: hardware profile loading, the choice of each cost's form, and the fitted-range
 * log; see hw.h. The forms themselves are sim/cost.c's. */
#include "sim/hw.h"
#include "common/dh_err.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const hw_fit_name[HW_FIT_N] = { "fetch_row_bytes", "fetch_sms", "fetch_rows", "fetch_pages",
                                            "fetch_pool_bytes", "fetch_density", "attention_bytes", "attention_batch", "gemm_fp8_m",
                                            "indexer_ctx", "indexer_batch", "indexer_queries", "topk_batch", "topk_ctx",
                                            "topk_k" };

static int load_table(cfg *c, const char *sec, const char *kx, const char *ky, cost_table *t, double ymin)
{
    size_t nx, ny;
    if (cfg_get_doubles(c, sec, kx, t->x, COST_TABLE_MAX, &nx, 1e-9, 1e15) < 0) return -1;
    if (cfg_get_doubles(c, sec, ky, t->y, COST_TABLE_MAX, &ny, ymin, 1e16) < 0) return -1;
    if (nx != ny)
        return dh_err("%s: [%s] %s has %zu items but %s has %zu", cfg_name(c), sec, kx, nx, ky, ny);
    for (size_t i = 1; i < nx; i++)
        if (!(t->x[i] > t->x[i - 1]))
            return dh_err("%s: [%s] %s must be strictly increasing", cfg_name(c), sec, kx);
    t->n = nx;
    return 0;
}

/* A [fit_range] key names a fitted kernel and one of its inputs, as bin/dhcal writes them
 * (analysis/prof.c): fetch_rows, gemm_fp8_m, ...; anything else is a typo or garbage. */
static int fit_range_name_ok(const char *name)
{
    static const char *const kernel[] = { "attention_", "fetch_", "gemm_bf16_", "gemm_fp8_", "indexer_", "topk_" };
    for (size_t i = 0; i < sizeof kernel / sizeof kernel[0]; i++) {
        size_t n = strlen(kernel[i]);
        if (strncmp(name, kernel[i], n) != 0 || !name[n]) continue;
        for (const char *q = name + n; *q; q++)
            if (!((*q >= 'a' && *q <= 'z') || (*q >= '0' && *q <= '9') || *q == '_')) return 0;
        return 1;
    }
    return 0;
}

/* [fit_range]: cfg lists no keys per section, so the names come from the
 * config's text form; each value is read (and so marked used) by the typed
 * getter, which also range-checks it. */
static int load_fit_range(cfg *c, hw_profile *hw)
{
    for (int i = 0; i < HW_FIT_N; i++) hw->fit_idx[i] = -1;
    if (!cfg_has_section(c, "fit_range")) return 0;
    char *text = cfg_to_string(c);
    if (!text) abort();
    int rc = 0;
    char *p = strstr(text, "[fit_range]");
    if (p) p = strchr(p, '\n');
    while (p && *++p && *p != '[' && rc == 0) {
        char *nl = strchr(p, '\n');
        if (nl) *nl = 0;
        char *eq = strchr(p, '=');
        char name[64];
        size_t len = eq ? (size_t)(eq - p) : 0;
        while (len && (p[len - 1] == ' ' || p[len - 1] == '\t')) len--;
        if (eq && len && *p != ';' && *p != '#') {
            if (len >= sizeof name) { rc = dh_err("%s: [fit_range] has a key of %zu characters", cfg_name(c), len); break; }
            memcpy(name, p, len);
            name[len] = 0;
            double v[2];
            size_t n;
            if (!fit_range_name_ok(name))
                rc = dh_err("%s: [fit_range] %s is not KERNEL_INPUT of a fitted kernel (attention, fetch, "
                            "gemm_bf16, gemm_fp8, indexer, topk)", cfg_name(c), name);
            else if (hw->n_fit == HW_FIT_MAX) rc = dh_err("%s: [fit_range] has more than %d entries", cfg_name(c), HW_FIT_MAX);
            else if (cfg_get_doubles(c, "fit_range", name, v, 2, &n, -1e300, 1e300) < 0) rc = -1;
            else if (n != 2 || v[0] > v[1])
                rc = dh_err("%s: [fit_range] %s must be \"min, max\" with min <= max", cfg_name(c), name);
            else {
                snprintf(hw->fit[hw->n_fit].key, sizeof hw->fit[0].key, "%s", name);
                hw->fit[hw->n_fit].lo = v[0];
                hw->fit[hw->n_fit].hi = v[1];
                for (int i = 0; i < HW_FIT_N; i++)
                    if (!strcmp(name, hw_fit_name[i])) hw->fit_idx[i] = (int)hw->n_fit;
                hw->n_fit++;
            }
        }
        p = nl;
    }
    free(text);
    /* Whatever the text scan did not read (it cannot miss a key, but the check costs nothing). */
    if (rc == 0 && cfg_check_unused_section(c, "fit_range") < 0) rc = -1;
    return rc;
}

void hw_range_note(const hw_profile *hw, hw_range_log *log, int which, double value)
{
    int i = hw->fit_idx[which];
    if (i < 0) return;
    log->evals[which]++;
    double lo = hw->fit[i].lo, hi = hw->fit[i].hi;
    /* A relative tolerance keeps the printed bounds' rounding from counting. */
    if (value >= lo * (1 - 1e-9) && value <= hi * (1 + 1e-9)) return;
    for (uint32_t j = 0; j < log->n; j++)
        if (!strcmp(log->e[j].key, hw->fit[i].key)) {
            log->e[j].count++;
            if (value < log->e[j].vmin) log->e[j].vmin = value;
            if (value > log->e[j].vmax) log->e[j].vmax = value;
            return;
        }
    if (log->n == HW_FIT_N) return;
    snprintf(log->e[log->n].key, sizeof log->e[0].key, "%s", hw->fit[i].key);
    log->e[log->n].first = value;
    log->e[log->n].lo = lo;
    log->e[log->n].hi = hi;
    log->e[log->n].count = 1;
    log->e[log->n].vmin = log->e[log->n].vmax = value;
    log->n++;
}

double hw_range_evals(const hw_range_log *log, const char *key)
{
    for (int w = 0; w < HW_FIT_N; w++)
        if (!strcmp(hw_fit_name[w], key)) return log->evals[w];
    return 0;
}

void hw_range_merge(hw_range_log *a, const hw_range_log *b)
{
    for (int w = 0; w < HW_FIT_N; w++) a->evals[w] += b->evals[w];
    for (uint32_t j = 0; j < b->n; j++) {
        uint32_t i = 0;
        while (i < a->n && strcmp(a->e[i].key, b->e[j].key)) i++;
        if (i < a->n) {
            a->e[i].count += b->e[j].count;
            if (b->e[j].vmin < a->e[i].vmin) a->e[i].vmin = b->e[j].vmin;
            if (b->e[j].vmax > a->e[i].vmax) a->e[i].vmax = b->e[j].vmax;
        }
        else if (a->n < HW_FIT_N) a->e[a->n++] = b->e[j];
    }
}

int hw_load(cfg *c, hw_profile *hw)
{
    memset(hw, 0, sizeof *hw);
    const char *name;
    if (cfg_get_string(c, "hw", "name", &name, CFG_REQUIRED) < 0) return -1;
    snprintf(hw->name, sizeof hw->name, "%s", name);
    cost_model *cm = &hw->cost;
    struct { const char *sec, *key; double *dst, min, max; } d[] = {
        { "hw", "hbm_bytes", &hw->hbm_bytes, 1e6, 1e15 },
        { "hw", "hbm_bw", &cm->roof.hbm_bw, 1e6, 1e15 },
        { "hw", "sms", &hw->sms, 1, 100000 },
        { "hw", "fp8_flops", &cm->roof.fp8_flops, 1e6, 1e20 },
        { "hw", "bf16_flops", &cm->roof.bf16_flops, 1e6, 1e20 },
        { "hw", "mma_efficiency", &cm->roof.mma_efficiency, 1e-6, 1 },
        { "hw", "kernel_launch_s", &cm->roof.launch_s, 0, 1 },
        { "pcie", "h2d_bw", &hw->h2d_bw, 1e3, 1e15 },
        { "pcie", "d2h_bw", &hw->d2h_bw, 1e3, 1e15 },
        { "pcie", "duplex_bw", &hw->duplex_bw, 1e3, 1e15 },
        { "gather", "ref_row_bytes", &cm->fetch.ref_row_bytes, 1, 1e9 },
        { "gather", "fetch_sms", &hw->fetch_sms, 0, 100000 },
        { "gather", "page_bytes", &hw->page_bytes, 1, 1e12 },
        { "gather", "launch_s", &cm->fetch.launch_s, 0, 1 },
        { "host", "dram_bytes", &hw->host_dram_bytes, 1e6, 1e18 },
    };
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
        if (cfg_get_double(c, d[i].sec, d[i].key, d[i].dst, CFG_REQUIRED, d[i].min, d[i].max) < 0) return -1;
    cm->roof.sms = hw->sms;
    cm->fetch.h2d_bw = hw->h2d_bw;
    /* Optional kernel-fitted costs (hw.h); 0, the default, keeps the roofline forms. */
    double indexer_bw;
    struct { const char *key; double *dst, max; } o[] = {
        { "attn_bw", &cm->attn.bw, 1e15 }, { "attn_launch_s", &cm->attn.launch_s, 1 },
        { "weight_bw", &cm->gemm.bw, 1e15 }, { "layer_fixed_s", &cm->gemm.fixed_s, 1 },
        { "indexer_ops_s", &cm->indexer.ops_s, 1e20 }, { "select_s", &cm->indexer.select_s, 1 },
        { "indexer_bw", &indexer_bw, 1e15 }, { "fetch_interference", &cm->inter.fetch, 10 },
        { "compute_interference", &cm->inter.compute, 10 },
        { "topk_slots", &cm->topk.slots, 1e7 }, { "topk_wave_s", &cm->topk.wave_s, 1 },
        { "topk_row_s", &cm->topk.row_s, 1e-3 }, { "topk_k_s", &cm->topk.k_s, 1e-3 },
        { "topk_score_rate", &cm->topk.score_rate, 1e16 }, { "topk_steepness", &cm->topk.steepness, 1e3 },
    };
    const double zero = 0;
    for (size_t i = 0; i < sizeof o / sizeof o[0]; i++)
        if (cfg_get_double(c, "hw", o[i].key, o[i].dst, &zero, 0, o[i].max) < 0) return -1;
    /* The forms, chosen once: a kernel's fitted rate selects its fitted form; a profile
     * without any is the datasheet roofline throughout. */
    cm->attn.form = cm->attn.bw > 0 ? COST_FITTED : COST_ROOFLINE;
    cm->gemm.form = cm->gemm.bw > 0 ? COST_FITTED : COST_ROOFLINE;
    cm->indexer.form = cm->indexer.ops_s > 0 ? COST_FITTED : COST_ROOFLINE;
    cm->indexer.bw = indexer_bw > 0 ? indexer_bw : cm->roof.hbm_bw;
    if (load_table(c, "gather", "row_bytes", "row_bw", &cm->fetch.row, 1e3) < 0) return -1;
    if (load_table(c, "gather", "pages", "pages_bw", &cm->fetch.pages, 1e3) < 0) return -1;
    if (load_table(c, "gather", "sms", "sms_factor", &cm->fetch.sms, 1e-6) < 0) return -1;
    if (cfg_get_double(c, "gather", "region_bytes", &hw->region_bytes, &zero, 0, 1e15) < 0) return -1;
    if (cfg_has(c, "gather", "density") || cfg_has(c, "gather", "issue_row_s")) {
        if (load_table(c, "gather", "density", "issue_row_s", &cm->fetch.density, 1e-15) < 0) return -1;
        if (!(hw->region_bytes > 0))
            return dh_err("%s: [gather] density needs region_bytes (the size its densities were counted in)", cfg_name(c));
    }
    if (cfg_has(c, "gather", "beside_density") || cfg_has(c, "gather", "beside_slowdown")) {
        if (load_table(c, "gather", "beside_density", "beside_slowdown", &cm->fetch.beside, 0) < 0) return -1;
        if (!(hw->region_bytes > 0))
            return dh_err("%s: [gather] beside_density needs region_bytes (the size its densities were counted in)",
                          cfg_name(c));
    }
    if (load_fit_range(c, hw) < 0) return -1;
    const cost_topk *tk = &cm->topk;
    if (!(tk->slots > 0) && (tk->wave_s > 0 || tk->row_s > 0 || tk->k_s > 0 || tk->score_rate > 0 || tk->steepness > 0))
        return dh_err("%s: [hw] topk_wave_s, topk_row_s, topk_k_s, topk_score_rate and topk_steepness need topk_slots "
                      "(the top-k blocks that run at once)", cfg_name(c));
    if (tk->score_rate > 0 && !(tk->steepness >= 1))
        return dh_err("%s: [hw] topk_score_rate needs topk_steepness >= 1 (got %g)", cfg_name(c), tk->steepness);
    if (tk->slots != floor(tk->slots))
        return dh_err("%s: [hw] topk_slots = %g is not a whole number of blocks", cfg_name(c), tk->slots);
    if (hw->fetch_sms >= hw->sms)
        return dh_err("%s: [gather] fetch_sms = %g leaves no SM for compute (%g SMs)", cfg_name(c), hw->fetch_sms, hw->sms);
    if (hw->duplex_bw < hw->h2d_bw || hw->duplex_bw < hw->d2h_bw)
        return dh_err("%s: [pcie] duplex_bw = %g is below one direction's bandwidth", cfg_name(c), hw->duplex_bw);
    return 0;
}

double hw_window_bins(double m, double window_rows, double row_bytes, double bin_bytes)
{
    double bins = ceil(window_rows * row_bytes / bin_bytes);
    if (bins < 1) bins = 1;
    if (m <= 0) return 0;
    if (bins == 1) return 1;
    return bins * -expm1(m * log1p(-1.0 / bins));
}

double hw_window_pages(const hw_profile *hw, double m, double window_rows, double row_bytes)
{
    return hw_window_bins(m, window_rows, row_bytes, hw->page_bytes);
}

double hw_window_regions(const hw_profile *hw, double m, double window_rows, double row_bytes)
{
    return hw->region_bytes > 0 ? hw_window_bins(m, window_rows, row_bytes, hw->region_bytes) : 0;
}
