/* hw.c: hardware profile loading, the choice of each cost's form, and the fitted-range
 * log; see hw.h. The forms themselves are sim/cost.c's. */
#include "sim/hw.h"
#include "common/cfgkey.h"
#include "common/dh_err.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const hw_fit_name[HW_FIT_N] = { "fetch_row_bytes", "fetch_sms", "fetch_rows", "fetch_pages",
                                            "fetch_pool_bytes", "fetch_density", "attention_bytes", "attention_batch", "gemm_fp8_m",
                                            "indexer_ctx", "indexer_batch", "indexer_queries", "topk_batch", "topk_ctx",
                                            "topk_k", "moe_tp_experts_m" };

/* ---- the schema (docs/CONFIG.md is generated from it: bin/dhconfig schema) ---- */

#define DS CK_DATASHEET
#define FIT CK_FITTED
#define TBL "required in the tables' form (a probe-measured profile); absent in the fitted form"
#define FFM "required in the fitted form (with sm_row_s); absent in the tables' form"
static const cfg_key hw_keys[] = {
    CK_ROW("profile", "base", CK_STR, "", 0, 0, "", "A scaled profile (docs/HARDWARE.md): the measured profile whose fitted keys it "
      "carries over, a path relative to this file. The file then gives datasheet keys only; each fitted key of the base is "
      "scaled by the ratio of the datasheet rate it replaces (this file's over the base's [fitted_at] value).", 0),
    CK_ROW("hw", "name", CK_STR, "", 0, 0, NULL, "Label of the profile (dhcal writes the file's name).", DS),
    CK_ROW("hw", "hbm_bytes", CK_NUM, "bytes", 1e6, 1e15, NULL, "Usable HBM capacity of one GPU.", DS),
    CK_ROW("hw", "hbm_bw", CK_NUM, "bytes/s", 1e6, 1e15, NULL, "HBM bandwidth: the roofline's memory rate, and the bound of "
      "every fitted byte rate (attn_bw, weight_bw, indexer_bw may not exceed it).", DS),
    CK_ROW("hw", "sms", CK_NUM, "", 1, 100000, NULL, "Streaming multiprocessors.", DS),
    CK_ROW("hw", "fp8_flops", CK_NUM, "FLOP/s", 1e6, 1e20, NULL, "Dense FP8 tensor rate (2 FLOP per multiply-add).", DS),
    CK_ROW("hw", "bf16_flops", CK_NUM, "FLOP/s", 1e6, 1e20, NULL, "Dense BF16 tensor rate.", DS),
    CK_ROW("hw", "kernel_launch_s", CK_NUM, "s", 0, 1, NULL, "Fixed cost of one kernel on the compute stream (the roofline form's "
      "launch; the fitted fixed costs replace it in their kernels).", DS),
    CK_ROW("hw", "mma_efficiency", CK_NUM, "", 1e-6, 1, "1", "Achieved fraction of the tensor rates (1: the roofline bound).", FIT),
    CK_ROW("hw", "attn_bw", CK_NUM, "bytes/s", 0, 1e15, "0", "Sparse attention's rate over the selected rows' bytes; 0: the "
      "roofline (hbm_bw). Replaces hbm_bw in the attention's cost.", FIT),
    CK_ROW("hw", "attn_launch_s", CK_NUM, "s", 0, 1, "0", "Sparse attention's fixed cost per launch (fitted form).", FIT),
    CK_ROW("hw", "attn_query_s", CK_NUM, "s", 0, 1, "0", "Sparse attention's fixed cost per query token of a launch (fitted "
      "form; a verification step's queries per request multiply it).", FIT),
    CK_ROW("hw", "weight_bw", CK_NUM, "bytes/s", 0, 1e15, "0", "Decode GEMMs' weight streaming rate; 0: the roofline. Replaces "
      "hbm_bw in the GEMMs' cost.", FIT),
    CK_ROW("hw", "layer_fixed_s", CK_NUM, "s", 0, 1, "0", "A layer's GEMM launches (fitted form; replaces kernel_launch_s).", FIT),
    CK_ROW("hw", "indexer_ops_s", CK_NUM, "MAC/s", 0, 1e20, "0", "The indexer's scoring rate in multiply-adds; 0: the roofline. "
      "Replaces fp8_flops in the indexer's cost (2 x this may not exceed fp8_flops).", FIT),
    CK_ROW("hw", "select_s", CK_NUM, "s", 0, 1, "0", "Fixed cost of the selecting layer: the indexer's launch and the top-k's.", FIT),
    CK_ROW("hw", "indexer_bw", CK_NUM, "bytes/s", 0, 1e15, "0", "The indexer's rate over its keys' bytes; 0: hbm_bw.", FIT),
    CK_ROW("hw", "fetch_interference", CK_NUM, "", 0, 10, "0", "A compute task beside the miss fetch lengthens by this x the "
      "overlap; 0: independent resources.", FIT),
    CK_ROW("hw", "compute_interference", CK_NUM, "", 0, 10, "0", "The fetch work inside a compute task lengthens by this x its "
      "beside slowdown x its time there; 0: none.", FIT),
    CK_ROW("hw", "prefill_gemm_m", CK_LIST, "tokens", 1, 1e9, "(none)", "Prefill GEMM table: x, the GEMMs' M (tokens, or "
           "rows for the experts), increasing; with prefill_gemm_flops and prefill_expert_flops (sim/prefill.h).", FIT),
    CK_ROW("hw", "prefill_gemm_flops", CK_LIST, "FLOP/s", 1, 1e20, "(none)", "Prefill GEMM table: a layer's projections and "
           "shared expert at M tokens, measured (FLOPs over time summed over the shapes); absent: the GEMM form.", FIT),
    CK_ROW("hw", "prefill_expert_flops", CK_LIST, "FLOP/s", 1, 1e20, "(none)", "Prefill GEMM table: the routed experts' "
           "GEMMs at M rows, measured.", FIT),
    CK_ROW("hw", "prefill_attn_flops", CK_NUM, "FLOP/s", 0, 1e20, "0", "Sparse attention's FLOP rate at prefill (rows "
           "read at hbm_bw as its floor; sim/prefill.h); 0: the decode attention form.", FIT),
    CK_ROW("hw", "topk_slots", CK_NUM, "", 0, 1e7, "0", "Top-k blocks that run at once (SMs x resident blocks per SM); 0: no waves, "
      "the top-k is all in select_s.", FIT),
    CK_ROW("hw", "topk_wave_s", CK_NUM, "s", 0, 1, "0", "Fixed cost of one top-k wave (needs topk_slots).", FIT),
    CK_ROW("hw", "topk_row_s", CK_NUM, "s", 0, 1e-3, "0", "A top-k block's pass per score (needs topk_slots).", FIT),
    CK_ROW("hw", "topk_k_s", CK_NUM, "s", 0, 1e-3, "0", "A top-k wave's cost per selected row k (needs topk_slots).", FIT),
    CK_ROW("hw", "topk_score_rate", CK_NUM, "scores/s", 0, 1e16, "0", "A wave's scores through memory; 0: no memory term.", FIT),
    CK_ROW("hw", "topk_steepness", CK_NUM, "", 0, 1e3, "0", "Exponent q of the soft maximum of the two top-k terms (>= 1 with "
      "topk_score_rate).", FIT),
    CK_ROW("pcie", "h2d_bw", CK_NUM, "bytes/s", 1e3, 1e15, NULL, "Host-to-device bandwidth of pinned copies; caps the gather.", DS),
    CK_ROW("pcie", "d2h_bw", CK_NUM, "bytes/s", 1e3, 1e15, NULL, "Device-to-host bandwidth (write-through).", DS),
    CK_ROW("pcie", "duplex_bw", CK_NUM, "bytes/s", 1e3, 1e15, NULL, "Both directions at once (sum); at least either one.", DS),
    CK_DYN_ROW("gather", "row_bytes", CK_LIST, "bytes", 1e-9, 1e15, TBL, NULL, "Tables: x, row size of the zero-copy gather "
      "(increasing).", FIT),
    CK_DYN_ROW("gather", "row_bw", CK_LIST, "bytes/s", 1e3, 1e16, TBL, NULL, "Tables: y, gather bandwidth at that row size, "
      "small host footprint (at most h2d_bw).", FIT),
    CK_DYN_ROW("gather", "ref_row_bytes", CK_NUM, "bytes", 1, 1e9, TBL, NULL, "Tables: row size at which the pages table was "
      "measured.", FIT),
    CK_DYN_ROW("gather", "pages", CK_LIST, "", 1e-9, 1e15, TBL, NULL, "Tables: x, distinct host pages one launch touches.", FIT),
    CK_DYN_ROW("gather", "pages_bw", CK_LIST, "bytes/s", 1e3, 1e16, TBL, NULL, "Tables: y, bandwidth at ref_row_bytes for that "
      "many pages.", FIT),
    CK_DYN_ROW("gather", "sms", CK_LIST, "", 1e-9, 1e15, TBL, NULL, "Tables: x, SMs given to the gather.", FIT),
    CK_DYN_ROW("gather", "sms_factor", CK_LIST, "", 1e-6, 1e16, TBL, NULL, "Tables: y, bandwidth multiplier at that many SMs.",
      FIT),
    CK_DYN_ROW("gather", "sm_row_s", CK_NUM, "s", 0, 1e-3, FFM, NULL, "Fitted form (sim/cost.h, written by bin/dhcal): per row, "
      "the SMs' issue time x SMs (divided by fetch_sms).", FIT),
    CK_DYN_ROW("gather", "row_issue_s", CK_NUM, "s", 0, 1e-3, FFM, NULL, "Fitted form: per row, the issue path's fixed time.", FIT),
    CK_DYN_ROW("gather", "row_issue_s_per_byte", CK_NUM, "s/byte", 0, 1e-6, FFM, NULL, "Fitted form: per row, the issue path's "
      "time per byte of the row.", FIT),
    CK_DYN_ROW("gather", "link_s_per_byte", CK_NUM, "s/byte", 0, 1e-6, FFM, NULL, "Fitted form: per row, the link's time per "
      "byte (at least 1 / duplex_bw); a scaled profile divides it by the h2d_bw ratio.", FIT),
    CK_ROW("gather", "density_s", CK_NUM, "s", 0, 1e-3, "0", "Fitted form (needs region_bytes): the issue path's translation "
      "walks, density_s x rho^-density_pow, rho the rows per region a launch enters.", FIT),
    CK_ROW("gather", "density_pow", CK_NUM, "", 0, 10, "0", "Fitted form: the density term's exponent.", FIT),
    CK_ROW("gather", "page_s", CK_NUM, "s", 0, 1e-3, "0", "Fitted form: per launch, page_s x max(0, pages - page_reach) x "
      "max(0, 1 - walk_reach_bytes / host pool).", FIT),
    CK_ROW("gather", "page_reach", CK_NUM, "pages", 0, 1e15, "0", "Fitted form: the pages a launch touches before the page "
      "term.", FIT),
    CK_ROW("gather", "walk_reach_bytes", CK_NUM, "bytes", 0, 1e18, "0", "Fitted form: the host pool the page walks reach "
      "before the page term (0: the pool does not enter).", FIT),
    CK_ROW("gather", "beside_max", CK_NUM, "", 0, 100, "0", "Fitted (needs region_bytes): a launch of rho rows per region "
      "takes beside_max / (1 + (rho / beside_half)^beside_steepness) longer beside a saturated memory system (0.5 = "
      "1.5x), the weight of compute_interference; 0: no slowdown.", FIT),
    CK_ROW("gather", "beside_half", CK_NUM, "rows/region", 0, 1e12, "0", "Fitted: the density of half the slowdown.", FIT),
    CK_ROW("gather", "beside_steepness", CK_NUM, "", 0, 100, "0", "Fitted: the slowdown's steepness.", FIT),
    CK_ROW("gather", "fetch_sms", CK_NUM, "", 0, 100000, NULL, "SMs the fetch kernel occupies (taken from compute).", DS),
    CK_ROW("gather", "page_bytes", CK_NUM, "bytes", 1, 1e12, NULL, "Host page size.", DS),
    CK_ROW("gather", "launch_s", CK_NUM, "s", 0, 1, NULL, "Fixed cost of one gather launch (the fitted form's t0).", FIT),
    CK_ROW("gather", "region_bytes", CK_NUM, "bytes", 0, 1e15, "0", "Span one upper-level translation entry maps (2 MB); 0: no "
      "density term.", DS),
    CK_ROW("host", "dram_bytes", CK_NUM, "bytes", 1e6, 1e18, NULL, "Pinned host memory available for the KV history.", DS),
    CK_ROW("fitted_at", "hbm_bw", CK_NUM, "bytes/s", 1e6, 1e15, "(none)", "The [hw] hbm_bw the fitted byte rates (attn_bw, "
      "weight_bw, indexer_bw, topk_score_rate) were fitted beside: required with them, and equal to [hw] hbm_bw (the file "
      "says that they override it).", FIT),
    CK_ROW("fitted_at", "fp8_flops", CK_NUM, "FLOP/s", 1e6, 1e20, "(none)", "The [hw] fp8_flops indexer_ops_s was fitted beside.",
      FIT),
    CK_ROW("fitted_at", "kernel_launch_s", CK_NUM, "s", 0, 1, "(none)", "The [hw] kernel_launch_s the fitted fixed costs "
      "(attn_launch_s, layer_fixed_s, select_s, topk_wave_s) replace.", FIT),
    CK_ROW("fitted_at", "sms", CK_NUM, "", 1, 100000, "(none)", "The [hw] sms topk_slots was counted with.", FIT),
    CK_ROW("fitted_at", "h2d_bw", CK_NUM, "bytes/s", 1e3, 1e15, "(none)", "The [pcie] h2d_bw the [gather] bandwidth tables were "
      "measured beside.", FIT),
    CK_ROW("fitted_kernels", "attention", CK_INT, "", 0, 1000, "0", "The attention kernel version the [hw] attn_* keys were "
      "fitted on (written by bin/dhcal; dhcal validate refuses a replay that ran another); 0: not recorded.", FIT),
    CK_ROW("fitted_kernels", "fetch", CK_INT, "", 0, 1000, "0", "The fetch kernel version the [gather] fitted keys were "
      "fitted on (written by bin/dhcal); 0: not recorded.", FIT),
    CK_ROW("fitted_kernels", "indexer", CK_INT, "", 0, 1000, "0", "The indexer kernel version indexer_ops_s and indexer_bw "
      "were fitted on (written by bin/dhcal); 0: not recorded.", FIT),
    CK_ROW("fitted_kernels", "topk", CK_INT, "", 0, 1000, "0", "The top-k kernel version select_s and the topk_* keys were "
      "fitted on (written by bin/dhcal); 0: not recorded.", FIT),
    CK_ROW("fit_range", "KERNEL_INPUT", CK_LIST, "", -1e300, 1e300, "(none)", "min, max: the inputs a fitted kernel saw (written "
      "by bin/dhcal; e.g. fetch_rows); a run outside them is reported once.", FIT),
};
#undef DS
#undef FIT
#undef TBL
#undef FFM
const cfg_schema hw_schema = CFG_SCHEMA("models/hw/NAME.ini", "Hardware profile",
    "One decode GPU and its host link (sim/hw.h, docs/HARDWARE.md). Each key is *datasheet* (a rate or size of the device) "
    "or *fitted* (a cost fitted to the project's kernels by bin/dhcal); a file whose fitted keys replace a datasheet rate "
    "names that rate in [fitted_at] at the value it was fitted beside, and a different [hw] value is an error. A scaled "
    "profile ([profile] base) carries a measured profile's fitted keys to another GPU.", hw_keys);

static int load_table(cfg *c, const char *sec, const char *kx, const char *ky, cost_table *t)
{
    size_t nx, ny;
    if (cfgk_doubles(c, &hw_schema, sec, kx, t->x, COST_TABLE_MAX, &nx) < 0) return -1;
    if (cfgk_doubles(c, &hw_schema, sec, ky, t->y, COST_TABLE_MAX, &ny) < 0) return -1;
    if (nx != ny)
        return dh_err("%s: [%s] %s has %zu items but %s has %zu", cfg_name(c), sec, kx, nx, ky, ny);
    for (size_t i = 1; i < nx; i++)
        if (!(t->x[i] > t->x[i - 1]))
            return dh_err("%s: [%s] %s must be strictly increasing", cfg_name(c), sec, kx);
    t->n = nx;
    return 0;
}

/* [gather]'s form: the fitted one when the profile gives sm_row_s (bin/dhcal writes every key
 * of it), else the tables (a probe-measured profile). A profile giving both is an error. */
static int load_fetch(cfg *c, hw_profile *hw)
{
    cost_fetch *f = &hw->cost.fetch;
    const cfg_schema *S = &hw_schema;
    static const char *const table_keys[] = { "row_bytes", "row_bw", "pages", "pages_bw", "sms", "sms_factor",
                                              "ref_row_bytes" };
    f->fit.t0 = f->launch_s;
    if (!cfg_has(c, "gather", "sm_row_s")) {
        f->form = COST_ROOFLINE;
        if (cfgk_double_or(c, S, "gather", "ref_row_bytes", &f->ref_row_bytes, CFG_REQUIRED) < 0) return -1;
        if (load_table(c, "gather", "row_bytes", "row_bw", &f->row) < 0) return -1;
        if (load_table(c, "gather", "pages", "pages_bw", &f->pages) < 0) return -1;
        return load_table(c, "gather", "sms", "sms_factor", &f->sms);
    }
    f->form = COST_FITTED;
    for (size_t i = 0; i < sizeof table_keys / sizeof table_keys[0]; i++)
        if (cfg_has(c, "gather", table_keys[i]))
            return dh_err("%s: [gather] %s is a key of the table form, and sm_row_s one of the fitted form: give one",
                          cfg_name(c), table_keys[i]);
    struct { const char *key; double *dst; int required; } k[] = {
        { "sm_row_s", &f->fit.sm_row, 1 }, { "row_issue_s", &f->fit.row_issue, 1 },
        { "row_issue_s_per_byte", &f->fit.row_issue_per_byte, 1 }, { "link_s_per_byte", &f->fit.link_per_byte, 1 },
        { "density_s", &f->fit.density, 0 }, { "density_pow", &f->fit.density_pow, 0 },
        { "page_s", &f->fit.page, 0 }, { "page_reach", &f->fit.page_reach, 0 },
        { "walk_reach_bytes", &f->fit.walk_reach, 0 },
        { "beside_max", &f->beside.max, 0 }, { "beside_half", &f->beside.half, 0 },
        { "beside_steepness", &f->beside.steepness, 0 },
    };
    const double zero = 0;
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (cfgk_double_or(c, S, "gather", k[i].key, k[i].dst, k[i].required ? CFG_REQUIRED : &zero) < 0) return -1;
    if (!(f->fit.link_per_byte > 0))
        return dh_err("%s: [gather] link_s_per_byte must be > 0 (the link's time per byte)", cfg_name(c));
    if (f->fit.link_per_byte * hw->duplex_bw < 1 - 1e-9)
        return dh_err("%s: [gather] link_s_per_byte = %g is a rate of %g B/s, above the link's duplex_bw %g",
                      cfg_name(c), f->fit.link_per_byte, 1 / f->fit.link_per_byte, hw->duplex_bw);
    if (f->fit.density > 0 && !(hw->region_bytes > 0))
        return dh_err("%s: [gather] density_s needs region_bytes (the size its densities were counted in)", cfg_name(c));
    if (f->beside.max > 0 && !(hw->region_bytes > 0 && f->beside.half > 0 && f->beside.steepness > 0))
        return dh_err("%s: [gather] beside_max needs beside_half > 0, beside_steepness > 0 and region_bytes", cfg_name(c));
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
            else if (cfgk_doubles(c, &hw_schema, "fit_range", name, v, 2, &n) < 0) rc = -1;
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
    hw_range_note_span(log, which, hw->fit[i].lo, hw->fit[i].hi, value);
}

void hw_range_note_span(hw_range_log *log, int which, double lo, double hi, double value)
{
    const char *key = hw_fit_name[which];
    log->evals[which]++;
    /* A relative tolerance keeps the printed bounds' rounding from counting. */
    if (value >= lo * (1 - 1e-9) && value <= hi * (1 + 1e-9)) return;
    for (uint32_t j = 0; j < log->n; j++)
        if (!strcmp(log->e[j].key, key)) {
            log->e[j].count++;
            if (value < log->e[j].vmin) log->e[j].vmin = value;
            if (value > log->e[j].vmax) log->e[j].vmax = value;
            return;
        }
    if (log->n == HW_FIT_N) return;
    snprintf(log->e[log->n].key, sizeof log->e[0].key, "%s", key);
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

/* The fitted keys that replace a datasheet rate in their kernel's cost (sim/cost.h), the
 * rate each replaces, and whether it is bounded by it: a byte rate may not exceed the
 * memory's (bound 1), the indexer's multiply-adds may not exceed half the FP8 rate (bound 2).
 * A scaled profile multiplies each by the ratio of its datasheet rate (hw_load_scaled).
 * Bound -1: the [gather] tables, measured or fitted on every profile's link, scale with
 * h2d_bw but need no [fitted_at] entry: the fetch is capped at h2d_bw (sim/cost.h), so a
 * lower link rate takes effect, and the tables are a property of the link as much as of
 * the kernel (prof_check holds them below the duplex rate). Bound -2: the fitted form's link
 * time per byte, likewise, divided by the ratio (a time, not a rate). */
static const struct { const char *sec, *key, *rate; int bound; } hw_bind[] = {
    { "hw", "attn_bw", "hbm_bw", 1 },          { "hw", "weight_bw", "hbm_bw", 1 },
    { "hw", "indexer_bw", "hbm_bw", 1 },       { "hw", "topk_score_rate", "hbm_bw", 0 },
    { "hw", "indexer_ops_s", "fp8_flops", 2 }, { "hw", "attn_launch_s", "kernel_launch_s", 0 },
    { "hw", "layer_fixed_s", "kernel_launch_s", 0 }, { "hw", "select_s", "kernel_launch_s", 0 },
    { "hw", "attn_query_s", "kernel_launch_s", 0 },
    { "hw", "topk_wave_s", "kernel_launch_s", 0 },   { "hw", "topk_slots", "sms", 0 },
    { "gather", "row_bw", "h2d_bw", -1 },      { "gather", "pages_bw", "h2d_bw", -1 },
    { "gather", "link_s_per_byte", "h2d_bw", -2 },
    { "hw", "prefill_gemm_flops", "fp8_flops", 1 }, { "hw", "prefill_expert_flops", "fp8_flops", 1 },
    { "hw", "prefill_attn_flops", "fp8_flops", 1 },
};
#define HW_NBIND (sizeof hw_bind / sizeof hw_bind[0])
static const char *const hw_rates[] = { "hbm_bw", "fp8_flops", "kernel_launch_s", "sms", "h2d_bw" };
#define HW_NRATES (sizeof hw_rates / sizeof hw_rates[0])

static const char *rate_section(const char *rate) { return !strcmp(rate, "h2d_bw") ? "pcie" : "hw"; }

static double rate_value(const hw_profile *hw, const char *rate)
{
    if (!strcmp(rate, "hbm_bw")) return hw->cost.roof.hbm_bw;
    if (!strcmp(rate, "fp8_flops")) return hw->cost.roof.fp8_flops;
    if (!strcmp(rate, "kernel_launch_s")) return hw->cost.roof.launch_s;
    if (!strcmp(rate, "sms")) return hw->sms;
    return hw->h2d_bw;
}

int hw_fitted_rate(const char *sec, const char *key, const char **rate_sec, const char **rate)
{
    for (size_t i = 0; i < HW_NBIND; i++)
        if (hw_bind[i].bound >= 0 && !strcmp(hw_bind[i].sec, sec) && !strcmp(hw_bind[i].key, key)) {
            *rate = hw_bind[i].rate;
            *rate_sec = rate_section(*rate);
            return 1;
        }
    return 0;
}

static int same(double a, double b) { return fabs(a - b) <= 1e-9 * fabs(b); }

/* The largest item of a comma-separated list (the string was range-checked already). */
static double list_max(const char *v)
{
    double m = 0;
    for (const char *p = v; *p;) {
        char *end;
        double x = strtod(p, &end);
        if (end == p) break;
        if (x > m) m = x;
        p = end + strspn(end, " \t,");
    }
    return m;
}

/* Every fitted key that replaces a datasheet rate says so: [fitted_at] gives that rate at
 * the value it was fitted beside, which must be the file's (a copy of a profile whose
 * hbm_bw was edited would otherwise keep the old GPU's fitted rates, silently); a fitted
 * byte rate above the memory's or the link's is not physical. */
static int check_fitted(cfg *c, const hw_profile *hw)
{
    const char *f = cfg_name(c);
    double at[HW_NRATES];
    int have[HW_NRATES];
    for (size_t r = 0; r < HW_NRATES; r++) {
        have[r] = cfg_has(c, "fitted_at", hw_rates[r]);
        if (have[r] && cfgk_double_or(c, &hw_schema, "fitted_at", hw_rates[r], &at[r], NULL) < 0) return -1;
        if (have[r] && !same(rate_value(hw, hw_rates[r]), at[r]))
            return dh_err("%s: [%s] %s = %g, but the fitted keys that replace it were fitted at [fitted_at] %s = %g: "
                          "they would override it silently; model another GPU with a scaled profile ([profile] base, "
                          "docs/HARDWARE.md)", f, rate_section(hw_rates[r]), hw_rates[r], rate_value(hw, hw_rates[r]),
                          hw_rates[r], at[r]);
    }
    for (size_t i = 0; i < HW_NBIND; i++) {
        const char *v = cfg_has(c, hw_bind[i].sec, hw_bind[i].key) ? cfg_str(c, hw_bind[i].sec, hw_bind[i].key) : NULL;
        double x = v ? list_max(v) : 0;
        if (!(x > 0) || hw_bind[i].bound < 0) continue;
        size_t r = 0;
        while (strcmp(hw_rates[r], hw_bind[i].rate)) r++;
        if (!have[r])
            return dh_err("%s: [%s] %s is fitted and replaces [%s] %s in its kernel's cost: the file must say so with "
                          "[fitted_at] %s = the value it was fitted beside (docs/HARDWARE.md)", f, hw_bind[i].sec,
                          hw_bind[i].key, rate_section(hw_bind[i].rate), hw_bind[i].rate, hw_bind[i].rate);
        double lim = rate_value(hw, hw_bind[i].rate) / (hw_bind[i].bound == 2 ? 2 : 1);
        if (hw_bind[i].bound && x > lim * (1 + 1e-9))
            return dh_err("%s: [%s] %s = %g (fitted) is above %s[%s] %s = %g: a kernel cannot run faster than the "
                          "hardware's rate", f, hw_bind[i].sec, hw_bind[i].key, x, hw_bind[i].bound == 2 ? "half of " : "",
                          rate_section(hw_bind[i].rate), hw_bind[i].rate, rate_value(hw, hw_bind[i].rate));
    }
    return 0;
}

/* The prefill GEMM tables: all three keys or none, one M grid for both rates. */
static int load_prefill_gemm(cfg *c, hw_profile *hw)
{
    const int n = cfg_has(c, "hw", "prefill_gemm_m") + cfg_has(c, "hw", "prefill_gemm_flops") +
                  cfg_has(c, "hw", "prefill_expert_flops");
    if (n == 0) return 0;
    if (n != 3)
        return dh_err("%s: [hw] prefill_gemm_m, prefill_gemm_flops and prefill_expert_flops go together (the prefill GEMM "
                      "table, sim/prefill.h)", cfg_name(c));
    if (load_table(c, "hw", "prefill_gemm_m", "prefill_gemm_flops", &hw->prefill_gemm) < 0) return -1;
    return load_table(c, "hw", "prefill_gemm_m", "prefill_expert_flops", &hw->prefill_expert);
}

static int hw_load_measured(cfg *c, hw_profile *hw)
{
    memset(hw, 0, sizeof *hw);
    const cfg_schema *S = &hw_schema;
    const char *name;
    if (cfgk_string(c, S, "hw", "name", &name) < 0) return -1;
    snprintf(hw->name, sizeof hw->name, "%s", name);
    cost_model *cm = &hw->cost;
    struct { const char *sec, *key; double *dst; } d[] = {
        { "hw", "hbm_bytes", &hw->hbm_bytes },
        { "hw", "hbm_bw", &cm->roof.hbm_bw },
        { "hw", "sms", &hw->sms },
        { "hw", "fp8_flops", &cm->roof.fp8_flops },
        { "hw", "bf16_flops", &cm->roof.bf16_flops },
        { "hw", "mma_efficiency", &cm->roof.mma_efficiency },
        { "hw", "kernel_launch_s", &cm->roof.launch_s },
        { "pcie", "h2d_bw", &hw->h2d_bw },
        { "pcie", "d2h_bw", &hw->d2h_bw },
        { "pcie", "duplex_bw", &hw->duplex_bw },
        { "gather", "fetch_sms", &hw->fetch_sms },
        { "gather", "page_bytes", &hw->page_bytes },
        { "gather", "launch_s", &cm->fetch.launch_s },
        { "host", "dram_bytes", &hw->host_dram_bytes },
        /* Optional kernel-fitted costs (hw.h); 0, the default, keeps the roofline forms. */
        { "hw", "attn_bw", &cm->attn.bw }, { "hw", "attn_launch_s", &cm->attn.launch_s }, { "hw", "attn_query_s", &cm->attn.query_s },
        { "hw", "weight_bw", &cm->gemm.bw }, { "hw", "layer_fixed_s", &cm->gemm.fixed_s },
        { "hw", "indexer_ops_s", &cm->indexer.ops_s }, { "hw", "select_s", &cm->indexer.select_s },
        { "hw", "indexer_bw", &cm->indexer.bw }, { "hw", "fetch_interference", &cm->inter.fetch },
        { "hw", "compute_interference", &cm->inter.compute },
        { "hw", "topk_slots", &cm->topk.slots }, { "hw", "topk_wave_s", &cm->topk.wave_s },
        { "hw", "topk_row_s", &cm->topk.row_s }, { "hw", "topk_k_s", &cm->topk.k_s },
        { "hw", "topk_score_rate", &cm->topk.score_rate }, { "hw", "topk_steepness", &cm->topk.steepness },
        { "gather", "region_bytes", &hw->region_bytes },
        { "hw", "prefill_attn_flops", &hw->prefill_attn_flops },
    };
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
        if (cfgk_double(c, S, d[i].sec, d[i].key, d[i].dst) < 0) return -1;
    cm->roof.sms = hw->sms;
    cm->fetch.h2d_bw = hw->h2d_bw;
    /* The forms, chosen once: a kernel's fitted rate selects its fitted form; a profile
     * without any is the datasheet roofline throughout, which is the fitted form at
     * efficiency 1 (docs/HARDWARE.md). */
    cm->attn.form = cm->attn.bw > 0 ? COST_FITTED : COST_ROOFLINE;
    cm->gemm.form = cm->gemm.bw > 0 ? COST_FITTED : COST_ROOFLINE;
    cm->indexer.form = cm->indexer.ops_s > 0 ? COST_FITTED : COST_ROOFLINE;
    if (!(cm->indexer.bw > 0)) cm->indexer.bw = cm->roof.hbm_bw;
    if (load_fetch(c, hw) < 0) return -1;
    if (load_prefill_gemm(c, hw) < 0) return -1;
    if (load_fit_range(c, hw) < 0) return -1;
    struct { const char *key; long *dst; } fk[] = {
        {"attention", &hw->fitted_attention}, {"fetch", &hw->fitted_fetch},
        {"indexer", &hw->fitted_indexer}, {"topk", &hw->fitted_topk},
    };
    for (size_t i = 0; i < sizeof fk / sizeof fk[0]; i++)
        if (cfgk_int(c, S, "fitted_kernels", fk[i].key, fk[i].dst) < 0) return -1;
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
    return check_fitted(c, hw);
}

/* Every item of the list v times k, written back to [sec] key of c. */
static void scale_list(cfg *c, const char *sec, const char *key, double k)
{
    char out[4096] = "";
    size_t o = 0;
    for (const char *p = cfg_str(c, sec, key); *p && o + 32 < sizeof out;) {
        char *end;
        double x = strtod(p, &end);
        if (end == p) break;
        o += (size_t)snprintf(out + o, sizeof out - o, "%s%.17g", o ? ", " : "", x * k);
        p = end + strspn(end, " \t,");
    }
    cfg_set(c, sec, key, out);
}

/* A scaled profile: the measured base's keys, this file's datasheet keys over them, and each
 * fitted key that replaces a datasheet rate multiplied by the ratio of that rate (this
 * file's value over the one the base was fitted at). Efficiencies, curves' shapes and the
 * fitted ranges are carried over as they are: the assumption is that the kernels reach the
 * same fractions of the new GPU's rates (docs/HARDWARE.md). */
/* This file's keys (datasheet ones only) laid over the base's text b. */
static int overlay_datasheet(cfg *c, cfg *b)
{
    const char *f = cfg_name(c);
    for (size_t i = 0; i < cfg_entry_count(c); i++) {
        const char *sec, *key, *val;
        cfg_entry_at(c, i, &sec, &key, &val);
        if (!strcmp(sec, "profile") && !strcmp(key, "base")) continue;
        const cfg_key *k = cfgk_find(&hw_schema, sec, key);
        if (!k) return dh_err("%s: unknown key '%s' in [%s]", f, key, sec);
        if (!(k->flags & CK_DATASHEET))
            return dh_err("%s: [%s] %s is a fitted key: a scaled profile carries its base's fitted keys over, scaled by the "
                          "datasheet rates' ratios; give datasheet keys only (docs/HARDWARE.md)", f, sec, key);
        cfg_str(c, sec, key); /* read: this file has no unknown key left */
        cfg_set(b, sec, key, val);
    }
    if (!cfg_has(c, "hw", "name")) return dh_err("%s: missing key 'name' in [hw] (a scaled profile names its GPU)", f);
    return 0;
}

/* Each fitted key of b that replaces a rate, scaled by that rate's ratio (this file's over
 * the base bh's [fitted_at] value), and [fitted_at] set to the new rates. */
static int scale_fitted(cfg *c, cfg *b, const hw_profile *bh)
{
    /* The ratios, from the new rates as the loader reads them (range-checked). */
    double ratio[HW_NRATES];
    for (size_t r = 0; r < HW_NRATES; r++) {
        const char *rs = rate_section(hw_rates[r]);
        double now, at = rate_value(bh, hw_rates[r]);
        ratio[r] = 1;
        if (!cfg_has(c, rs, hw_rates[r])) continue;
        if (cfgk_double(b, &hw_schema, rs, hw_rates[r], &now) < 0) return -1;
        ratio[r] = now / at;
        if (cfg_has(b, "fitted_at", hw_rates[r])) cfg_set(b, "fitted_at", hw_rates[r], cfg_str(c, rs, hw_rates[r]));
    }
    for (size_t i = 0; i < HW_NBIND; i++) {
        if (!cfg_has(b, hw_bind[i].sec, hw_bind[i].key)) continue;
        size_t r = 0;
        while (strcmp(hw_rates[r], hw_bind[i].rate)) r++;
        double k = hw_bind[i].bound == -2 ? 1 / ratio[r] : ratio[r];   /* -2: a time per byte */
        if (!strcmp(hw_bind[i].key, "topk_slots")) {
            /* Blocks at once: SMs x resident blocks per SM, a whole number. */
            char v[64];
            snprintf(v, sizeof v, "%.0f", floor(bh->cost.topk.slots * k + 0.5));
            cfg_set(b, "hw", "topk_slots", v);
        } else {
            scale_list(b, hw_bind[i].sec, hw_bind[i].key, k);
        }
    }
    return 0;
}

static int hw_load_scaled(cfg *c, hw_profile *hw)
{
    const char *f = cfg_name(c), *base;
    if (cfgk_string(c, &hw_schema, "profile", "base", &base) < 0) return -1;
    if (!*base) return dh_err("%s: [profile] base is empty", f);
    char path[1024];
    const char *slash = strrchr(f, '/');
    if (base[0] == '/' || !slash) snprintf(path, sizeof path, "%s", base);
    else snprintf(path, sizeof path, "%.*s/%s", (int)(slash - f), f, base);
    cfg *b;
    if (cfg_load(path, &b) < 0) return dh_err_prefix("%s: [profile] base: ", f);
    int rc = -1;
    hw_profile bh;
    if (cfg_has(b, "profile", "base")) { dh_err("%s: [profile] base '%s' is itself scaled: give a measured profile", f, path); goto out; }
    if (hw_load_measured(b, &bh) < 0) { dh_err_prefix("%s: [profile] base: ", f); goto out; }
    if (!cfg_has_section(b, "fitted_at")) {
        dh_err("%s: [profile] base '%s' has no fitted keys ([fitted_at]) to carry over", f, path);
        goto out;
    }
    if (overlay_datasheet(c, b) < 0 || scale_fitted(c, b, &bh) < 0) goto out;
    if (hw_load_measured(b, hw) < 0) { dh_err_prefix("%s (scaled from %s): ", f, path); goto out; }
    if (cfg_check_unused(b) < 0) { dh_err_prefix("%s (scaled from %s): ", f, path); goto out; }
    snprintf(hw->base, sizeof hw->base, "%s", bh.name);
    rc = 0;
out:
    cfg_free(b);
    return rc;
}

int hw_load(cfg *c, hw_profile *hw)
{
    if (cfg_has_section(c, "profile")) {
        memset(hw, 0, sizeof *hw);
        return hw_load_scaled(c, hw);
    }
    return hw_load_measured(c, hw);
}

double hw_fit_clamp(const hw_profile *hw, int which, double value)
{
    int i = hw->fit_idx[which];
    if (i < 0) return value;
    return value < hw->fit[i].lo ? hw->fit[i].lo : value > hw->fit[i].hi ? hw->fit[i].hi : value;
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
