/* hw.c: hardware profile loading and cost functions; see hw.h. */
#include "sim/hw.h"
#include "common/dh_err.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static int load_table(cfg *c, const char *sec, const char *kx, const char *ky, hw_table *t, double ymin)
{
    size_t nx, ny;
    if (cfg_get_doubles(c, sec, kx, t->x, HW_TABLE_MAX, &nx, 1e-9, 1e15) < 0) return -1;
    if (cfg_get_doubles(c, sec, ky, t->y, HW_TABLE_MAX, &ny, ymin, 1e16) < 0) return -1;
    if (nx != ny)
        return dh_err("%s: [%s] %s has %zu items but %s has %zu", cfg_name(c), sec, kx, nx, ky, ny);
    for (size_t i = 1; i < nx; i++)
        if (!(t->x[i] > t->x[i - 1]))
            return dh_err("%s: [%s] %s must be strictly increasing", cfg_name(c), sec, kx);
    t->n = nx;
    return 0;
}

double hw_table_eval(const hw_table *t, double x)
{
    if (x <= t->x[0]) return t->y[0];
    if (x >= t->x[t->n - 1]) return t->y[t->n - 1];
    size_t i = 1;
    while (t->x[i] < x) i++;
    double u = (log(x) - log(t->x[i - 1])) / (log(t->x[i]) - log(t->x[i - 1]));
    return t->y[i - 1] + u * (t->y[i] - t->y[i - 1]);
}

int hw_load(cfg *c, hw_profile *hw)
{
    memset(hw, 0, sizeof *hw);
    const char *name;
    if (cfg_get_string(c, "hw", "name", &name, CFG_REQUIRED) < 0) return -1;
    snprintf(hw->name, sizeof hw->name, "%s", name);
    struct { const char *sec, *key; double *dst, min, max; } d[] = {
        { "hw", "hbm_bytes", &hw->hbm_bytes, 1e6, 1e15 },
        { "hw", "hbm_bw", &hw->hbm_bw, 1e6, 1e15 },
        { "hw", "sms", &hw->sms, 1, 100000 },
        { "hw", "fp8_flops", &hw->fp8_flops, 1e6, 1e20 },
        { "hw", "bf16_flops", &hw->bf16_flops, 1e6, 1e20 },
        { "hw", "mma_efficiency", &hw->mma_efficiency, 1e-6, 1 },
        { "hw", "kernel_launch_s", &hw->kernel_launch_s, 0, 1 },
        { "pcie", "h2d_bw", &hw->h2d_bw, 1e3, 1e15 },
        { "pcie", "d2h_bw", &hw->d2h_bw, 1e3, 1e15 },
        { "pcie", "duplex_bw", &hw->duplex_bw, 1e3, 1e15 },
        { "gather", "ref_row_bytes", &hw->ref_row_bytes, 1, 1e9 },
        { "gather", "fetch_sms", &hw->fetch_sms, 0, 100000 },
        { "gather", "page_bytes", &hw->page_bytes, 1, 1e12 },
        { "gather", "launch_s", &hw->gather_launch_s, 0, 1 },
        { "host", "dram_bytes", &hw->host_dram_bytes, 1e6, 1e18 },
    };
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
        if (cfg_get_double(c, d[i].sec, d[i].key, d[i].dst, CFG_REQUIRED, d[i].min, d[i].max) < 0) return -1;
    if (load_table(c, "gather", "row_bytes", "row_bw", &hw->gather_row, 1e3) < 0) return -1;
    if (load_table(c, "gather", "pages", "pages_bw", &hw->gather_pages, 1e3) < 0) return -1;
    if (load_table(c, "gather", "sms", "sms_factor", &hw->gather_sms, 1e-6) < 0) return -1;
    if (hw->fetch_sms >= hw->sms)
        return dh_err("%s: [gather] fetch_sms = %g leaves no SM for compute (%g SMs)", cfg_name(c), hw->fetch_sms, hw->sms);
    if (hw->duplex_bw < hw->h2d_bw || hw->duplex_bw < hw->d2h_bw)
        return dh_err("%s: [pcie] duplex_bw = %g is below one direction's bandwidth", cfg_name(c), hw->duplex_bw);
    return 0;
}

double hw_gather_bw(const hw_profile *hw, double row_bytes, double pages)
{
    double bw = hw_table_eval(&hw->gather_row, row_bytes) / hw_table_eval(&hw->gather_row, hw->ref_row_bytes) *
                hw_table_eval(&hw->gather_pages, pages) * hw_table_eval(&hw->gather_sms, hw->fetch_sms);
    return bw < hw->h2d_bw ? bw : hw->h2d_bw;
}

double hw_fetch_time(const hw_profile *hw, double rows, double row_bytes, double pages)
{
    if (rows <= 0) return 0;
    return hw->gather_launch_s + rows * row_bytes / hw_gather_bw(hw, row_bytes, pages);
}

double hw_window_pages(const hw_profile *hw, double m, double window_rows, double row_bytes)
{
    double pages = ceil(window_rows * row_bytes / hw->page_bytes);
    if (pages < 1) pages = 1;
    if (m <= 0) return 0;
    /* E[distinct bins] for m balls in `pages` bins: pages * (1 - (1 - 1/pages)^m). */
    return pages * -expm1(m * log1p(-1.0 / pages));
}

double hw_kernel_time(const hw_profile *hw, double bytes, double flops, int fp8, double compute_sms)
{
    double rate = (fp8 ? hw->fp8_flops : hw->bf16_flops) * hw->mma_efficiency * compute_sms / hw->sms;
    double tb = bytes / hw->hbm_bw, tf = flops / rate;
    return hw->kernel_launch_s + (tb > tf ? tb : tf);
}
