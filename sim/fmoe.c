/* fmoe.c: the TP MoE's measured routed-expert times; see fmoe.h. */
#include "sim/fmoe.h"
#include "common/dh_err.h"
#include "common/path.h"

#include <math.h>
#include <string.h>

static const cfg_key fmoe_keys[] = {
    CK_ROW("fused_moe", "device", CK_STR, "", 0, 0, NULL, "The GPU the table was measured on.", 0),
    CK_ROW("fused_moe", "ranks", CK_INT, "GPUs", 2, 4096, NULL, "The MoE's tensor-parallel GPUs the shape is one of: "
           "the instance's moe_tp must be this.", 0),
    CK_ROW("fused_moe", "experts", CK_INT, "", 1, 1 << 20, NULL, "Routed experts of the layer (the model's experts).", 0),
    CK_ROW("fused_moe", "experts_per_token", CK_INT, "", 1, 1 << 20, NULL, "Experts each token routes to (the model's "
           "experts_per_token).", 0),
    CK_ROW("fused_moe", "hidden", CK_INT, "", 1, 1 << 24, NULL, "Hidden size (the model's hidden).", 0),
    CK_ROW("fused_moe", "expert_bytes", CK_NUM, "bytes", 1, 1e15, NULL, "One GPU's slice of one expert as the benchmark "
           "held it (weights and block scales): x ranks, the model's expert_bytes.", 0),
    CK_ROW("fused_moe", "fixed_share", CK_NUM, "", 0, 1, NULL, "The share of the GEMM form's fixed cost of a layer "
           "([hw] layer_fixed_s) that the routed experts' own launches are, which the table's times also hold: taken out "
           "of the layer where the table is charged (2 / 8: the calibration's 8 GEMM launches a layer, 2 of them the "
           "routed experts').", 0),
    CK_ROW("curve.NAME", "m", CK_LIST, "tokens", 1, 1e9, NULL, "Tokens entering the MoE on one GPU, strictly ascending, "
           "the first 1.", 0),
    CK_ROW("curve.NAME", "layer_us", CK_LIST, "us", 1e-3, 1e9, NULL, "One layer's routed experts at each m (the same "
           "count), the mean over the benchmark's trials.", 0),
    CK_ROW("curve.NAME", "layer_sd_us", CK_LIST, "us", 0, 1e9, NULL, "The measurement's uncertainty at each m (the "
           "same count; half the spread of the benchmark's runs, or one run's trials' standard deviation): documentation, "
           "not used by the simulator.", 0),
};
const cfg_schema fmoe_schema = CFG_SCHEMA("models/hw/fused-moe-NAME.ini", "Tensor-parallel MoE expert times",
    "Measured time of one MoE layer's routed experts on one GPU as SGLang runs them without expert parallelism, by "
    "tokens into the MoE, one [curve.NAME] per kernel path (sim/fmoe.h): piecewise linear in m, the nearest "
    "segment's line beyond either end.", fmoe_keys);

/* Cost: O(points) by a linear scan, once per MoE layer and step. */
double fmoe_time_s(const fmoe_curve *c, double m)
{
    if (!(m > 0)) return 0;
    const int n = c->n_points;
    int i = 1;
    while (i < n - 1 && c->m[i] < m) i++;
    /* segment i - 1 .. i: the one holding m, or the first (m below) or the last (m above) */
    const double f = (m - c->m[i - 1]) / (c->m[i] - c->m[i - 1]);
    return c->s[i - 1] + f * (c->s[i] - c->s[i - 1]);
}

int fmoe_outside(const fmoe_curve *c, double m) { return m > 0 && (m < c->m[0] || m > c->m[c->n_points - 1]); }

static int curve_read(cfg *a, const char *full, const char *sec, fmoe_curve *c)
{
    const cfg_schema *S = &fmoe_schema;
    double us[FMOE_MAX_POINTS], sd[FMOE_MAX_POINTS];
    size_t nm, nt, ns;
    if (cfgk_doubles(a, S, sec, "m", c->m, FMOE_MAX_POINTS, &nm) < 0 ||
        cfgk_doubles(a, S, sec, "layer_us", us, FMOE_MAX_POINTS, &nt) < 0 ||
        cfgk_doubles(a, S, sec, "layer_sd_us", sd, FMOE_MAX_POINTS, &ns) < 0)
        return -1;
    if (nm != nt || nm != ns)
        return dh_err("%s: [%s] has %zu m, %zu layer_us and %zu layer_sd_us; one of each per point", full, sec, nm, nt, ns);
    if (nm < 2) return dh_err("%s: [%s] has one point; a curve needs at least two", full, sec);
    if (c->m[0] != 1) return dh_err("%s: [%s] m starts at %g; a curve starts at m = 1 (one token)", full, sec, c->m[0]);
    for (size_t i = 1; i < nm; i++)
        if (!(c->m[i] > c->m[i - 1]))
            return dh_err("%s: [%s] m: item %zu = %g is not above item %zu = %g", full, sec, i + 1, c->m[i], i,
                          c->m[i - 1]);
    for (size_t i = 0; i < nt; i++) c->s[i] = us[i] * 1e-6;
    c->n_points = (int)nm;
    /* The extension below the first point must stay positive down to m = 0. */
    if (!(fmoe_time_s(c, 1e-300) > 0))
        return dh_err("%s: [%s] the first segment's line reaches 0 s before m = 0 (%g us at m = %g, %g us at m = %g)",
                      full, sec, us[0], c->m[0], us[1], c->m[1]);
    return 0;
}

static int table_read(cfg *a, const char *full, const char *curve, const fmoe_shape *want, fmoe_curve *out)
{
    const cfg_schema *S = &fmoe_schema;
    long ranks, experts, topk, hidden;
    double eb, share;
    const char *device;
    if (cfgk_string(a, S, "fused_moe", "device", &device) < 0 || cfgk_int(a, S, "fused_moe", "ranks", &ranks) < 0 ||
        cfgk_int(a, S, "fused_moe", "experts", &experts) < 0 ||
        cfgk_int(a, S, "fused_moe", "experts_per_token", &topk) < 0 ||
        cfgk_int(a, S, "fused_moe", "hidden", &hidden) < 0 || cfgk_double(a, S, "fused_moe", "expert_bytes", &eb) < 0 ||
        cfgk_double(a, S, "fused_moe", "fixed_share", &share) < 0)
        return -1;
    int found = 0;
    for (size_t i = 0; i < cfg_section_count(a); i++) {
        const char *sec = cfg_section_name(a, i);
        if (!strcmp(sec, "fused_moe")) continue;
        if (strncmp(sec, "curve.", 6) != 0 || !sec[6])
            return dh_err("%s: section [%s] is not [fused_moe] or [curve.NAME]", full, sec);
        fmoe_curve c = { 0 };
        if (curve_read(a, full, sec, &c) < 0) return -1;
        if (strcmp(sec + 6, curve) != 0) continue;
        found = 1;
        *out = c;
        out->fixed_share = share;
    }
    if (cfg_check_unused(a) < 0) return -1;
    if (!found) return dh_err("%s: no [curve.%s] (the instance's moe_tp_experts_curve)", full, curve);
    if ((double)ranks != want->ranks)
        return dh_err("%s: [fused_moe] ranks = %ld, but the instance's moe_tp = %g", full, ranks, want->ranks);
    if ((double)experts != want->experts || (double)topk != want->experts_per_token || (double)hidden != want->hidden)
        return dh_err("%s: [fused_moe] experts %ld, experts_per_token %ld, hidden %ld: the model has %g, %g, %g", full,
                      experts, topk, hidden, want->experts, want->experts_per_token, want->hidden);
    if (fabs(eb * ranks - want->expert_bytes) > 0.5)
        return dh_err("%s: [fused_moe] expert_bytes %g x ranks %ld = %g, but the model's expert_bytes is %g", full, eb,
                      ranks, eb * ranks, want->expert_bytes);
    return 0;
}

int fmoe_load(const char *path, const char *curve, const fmoe_shape *want, fmoe_curve *c)
{
    char full[512];
    if (dh_path_find(path, full, sizeof full) < 0) return -1;
    cfg *a;
    if (cfg_load(full, &a) < 0) return -1;
    fmoe_curve t = { 0 };
    int rc = table_read(a, full, curve, want, &t);
    cfg_free(a);
    if (rc == 0) *c = t;
    return rc;
}
