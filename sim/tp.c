/* tp.c: the all-reduce of tensor-parallel attention; see tp.h. */
#include "sim/tp.h"
#include "common/dh_err.h"
#include "common/path.h"

#include <string.h>

static const cfg_key allreduce_keys[] = {
    CK_ROW("allreduce", "ranks", CK_INT, "GPUs", 2, 4096, NULL, "GPUs the all-reduce ran over; an instance's attn_tp must "
           "be this.", 0),
    CK_ROW("allreduce", "device", CK_STR, "", 0, 0, "", "The GPUs and their link (e.g. 8 x H200, NVLink 4 + NVSwitch).", 0),
    CK_ROW("allreduce", "busbw_gbps", CK_NUM, "GB/s", 1e-3, 1e6, NULL, "Bus bandwidth of large messages (NCCL's busbw): "
           "the cost of each byte beyond a curve's last size.", 0),
    CK_ROW("curve.NAME", "bytes", CK_LIST, "bytes", 1, 1e15, NULL, "Message sizes of the published points, ascending.", 0),
    CK_ROW("curve.NAME", "time_us", CK_LIST, "us", 1e-3, 1e9, NULL, "One all-reduce's time at each size (the same count "
           "as bytes).", 0),
};
const cfg_schema allreduce_schema = CFG_SCHEMA("models/hw/allreduce-NAME.ini", "All-reduce times",
    "Published times of one all-reduce over a tensor-parallel group by message size, one [curve.NAME] per algorithm "
    "or library (sim/tp.h): piecewise-linear between the points, beyond the last one at busbw_gbps.", allreduce_keys);

/* Cost: O(points) by a linear scan; called once per layer and step, with at most
 * TP_MAX_POINTS points, which is below the layer's other costs. */
double tp_allreduce_s(const tp_cfg *c, double bytes)
{
    if (!(c->ranks > 1)) return 0;
    const double per_byte = 2.0 * (c->ranks - 1) / c->ranks / (c->busbw_gbps * 1e9);
    if (c->n_points == 0) return c->lat_s + bytes * per_byte;
    const int last = c->n_points - 1;
    if (bytes <= c->pt_bytes[0]) return c->pt_s[0];
    if (bytes >= c->pt_bytes[last]) return c->pt_s[last] + (bytes - c->pt_bytes[last]) * per_byte;
    int i = 1;
    while (c->pt_bytes[i] < bytes) i++;
    const double f = (bytes - c->pt_bytes[i - 1]) / (c->pt_bytes[i] - c->pt_bytes[i - 1]);
    return c->pt_s[i - 1] + f * (c->pt_s[i] - c->pt_s[i - 1]);
}

/* One [curve.NAME]: sizes strictly ascending, one time per size, at least two points. */
static int curve_read(cfg *a, const char *full, const char *sec, double *bytes, double *s, size_t *n)
{
    double us[TP_MAX_POINTS];
    size_t nb, nt;
    if (cfgk_doubles(a, &allreduce_schema, sec, "bytes", bytes, TP_MAX_POINTS, &nb) < 0 ||
        cfgk_doubles(a, &allreduce_schema, sec, "time_us", us, TP_MAX_POINTS, &nt) < 0)
        return -1;
    if (nb != nt) return dh_err("%s: [%s] has %zu sizes but %zu times", full, sec, nb, nt);
    if (nb < 2) return dh_err("%s: [%s] has one point; a curve needs at least two", full, sec);
    for (size_t i = 1; i < nb; i++)
        if (!(bytes[i] > bytes[i - 1]))
            return dh_err("%s: [%s] bytes: item %zu = %g is not above item %zu = %g", full, sec, i + 1, bytes[i], i,
                          bytes[i - 1]);
    for (size_t i = 0; i < nt; i++) s[i] = us[i] * 1e-6;
    *n = nb;
    return 0;
}

static int table_read(cfg *a, const char *full, const char *curve, tp_cfg *c)
{
    const cfg_schema *S = &allreduce_schema;
    long ranks;
    double busbw;
    const char *device;
    if (cfgk_int(a, S, "allreduce", "ranks", &ranks) < 0 || cfgk_double(a, S, "allreduce", "busbw_gbps", &busbw) < 0 ||
        cfgk_string(a, S, "allreduce", "device", &device) < 0)
        return -1;
    int found = 0;
    for (size_t i = 0; i < cfg_section_count(a); i++) {
        const char *sec = cfg_section_name(a, i);
        if (!strcmp(sec, "allreduce")) continue;
        if (strncmp(sec, "curve.", 6) != 0 || !sec[6])
            return dh_err("%s: section [%s] is not [allreduce] or [curve.NAME]", full, sec);
        double bytes[TP_MAX_POINTS], s[TP_MAX_POINTS];
        size_t n = 0;
        if (curve_read(a, full, sec, bytes, s, &n) < 0) return -1;
        if (strcmp(sec + 6, curve) != 0) continue;
        found = 1;
        c->n_points = (int)n;
        memcpy(c->pt_bytes, bytes, n * sizeof *bytes);
        memcpy(c->pt_s, s, n * sizeof *s);
    }
    if (cfg_check_unused(a) < 0) return -1;
    if (!found) return dh_err("%s: no [curve.%s] (the instance's attn_tp_allreduce_curve)", full, curve);
    if ((double)ranks != c->ranks)
        return dh_err("%s: [allreduce] ranks = %ld, but the instance's attn_tp = %g", full, ranks, c->ranks);
    c->busbw_gbps = busbw;
    c->lat_s = 0;
    return 0;
}

int tp_table_load(const char *path, const char *curve, tp_cfg *c)
{
    char full[512];
    if (dh_path_find(path, full, sizeof full) < 0) return -1;
    cfg *a;
    if (cfg_load(full, &a) < 0) return -1;
    tp_cfg t = *c;
    int rc = table_read(a, full, curve, &t);
    cfg_free(a);
    if (rc == 0) *c = t;
    return rc;
}
