/* out.c: table, JSON, TSV and HDF5 reports; see out.h. */
#include "sim/out.h"
#include "common/dh_err.h"
#include "common/h5det.h"
#include "common/h5init.h"
#include "common/json.h"

#include <errno.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int out_table(FILE *f, const sim_result *r, int n)
{
    fprintf(f, "%s on %s, concurrency %g (%u per GPU), selections: %s\n", r[0].model, r[0].hw, r[0].concurrency,
            r[0].per_gpu, r[0].source);
    fprintf(f, "expert-parallel all-to-all: %s\n", r[0].a2a);
    int spec = 0, w = 12;
    for (int i = 0; i < n; i++) {
        if (r[i].spec[0]) spec = 1;
        int l = (int)strlen(r[i].policy);
        if (l > w) w = l;
    }
    fprintf(f, "%-32s", "");
    for (int i = 0; i < n; i++) fprintf(f, " %*s", w, r[i].policy);
    fprintf(f, "\n");
#define ROW(label, fmt, expr) do { fprintf(f, "%-32s", label); \
        for (int i = 0; i < n; i++) { const sim_result *x = &r[i]; (void)x; fprintf(f, " %*s", w - 12, ""); fprintf(f, fmt, expr); } fprintf(f, "\n"); } while (0)
/* A speculative figure: "-" for plain columns (or when not computed). */
#define SROW(label, fmt, expr) do { fprintf(f, "%-32s", label); \
        for (int i = 0; i < n; i++) { const sim_result *x = &r[i]; double v = x->spec[0] ? (expr) : -1; \
            if (v < 0) fprintf(f, " %*s", w, "-"); else { fprintf(f, " %*s", w - 12, ""); fprintf(f, fmt, v); } } \
        fprintf(f, "\n"); } while (0)
    ROW("output tokens/s per GPU", "%12.1f", x->tok_s_gpu);
    ROW("TPOT p50 (ms)", "%12.2f", x->tpot_p50 * 1e3);
    ROW("TPOT p90 (ms)", "%12.2f", x->tpot_p90 * 1e3);
    ROW("TPOT p99 (ms)", "%12.2f", x->tpot_p99 * 1e3);
    ROW("mean admitted requests / GPU", "%12.2f", x->mean_active);
    ROW("fetch fraction (missed/sel.)", "%12.4f", x->fetch_fraction);
    ROW("PCIe H2D GB fetched", "%12.2f", x->fetch_bytes / 1e9);
    ROW("PCIe H2D utilisation", "%12.3f", x->h2d_util);
    ROW("PCIe D2H GB written through", "%12.2f", x->write_bytes / 1e9);
    ROW("GPU compute utilisation", "%12.3f", x->compute_util);
    ROW("HBM peak (GB)", "%12.2f", x->hbm_peak_total / 1e9);
    ROW("  weights+workspace (GB)", "%12.2f", (x->hbm_peak[MEM_WEIGHTS] + x->hbm_peak[MEM_WORKSPACE]) / 1e9);
    ROW("  indexer keys peak (GB)", "%12.2f", x->hbm_peak[MEM_INDEXER] / 1e9);
    ROW("  protected rows peak (GB)", "%12.2f", x->hbm_peak[MEM_PROTECTED] / 1e9);
    ROW("  optional rows peak (GB)", "%12.2f", x->hbm_peak[MEM_OPTIONAL] / 1e9);
    ROW("hot budget rows/(req,grp) mean", "%12.0f", x->mean_budget_rows);
    ROW("mean optional rows/(req,grp)", "%12.0f", x->mean_optional_rows);
    if (spec) {
        fprintf(f, "%-32s", "speculative decoding");
        for (int i = 0; i < n; i++) fprintf(f, " %*s", w, r[i].spec[0] ? r[i].spec : "-");
        fprintf(f, "\n");
        fprintf(f, "%-32s", "  shared/ring/reuse");
        for (int i = 0; i < n; i++) {
            char b[32];
            snprintf(b, sizeof b, "%s/%s/%s", r[i].shared_retrieval ? "on" : "off", r[i].draft_ring ? "on" : "off",
                     r[i].staging_reuse ? "on" : "off");
            fprintf(f, " %*s", w, r[i].spec[0] ? b : "-");
        }
        fprintf(f, "\n");
        SROW("  accepted length (+1 token)", "%12.3f", x->tokens_per_step);
        SROW("  mean accepted drafts", "%12.3f", x->mean_accepted);
        SROW("  mean verify length", "%12.3f", x->mean_verify_len);
        SROW("  union rows/(req,grp)", "%12.0f", sim_opt_or(x->union_rows, -1));
        SROW("  union rows / k", "%12.3f", sim_opt_or(x->union_rows_k, -1));
        SROW("  fetched rows/(req,grp) shared", "%12.1f", sim_opt_or(x->fetched_shared_rows, -1));
        SROW("  fetched rows/(req,grp) per-q", "%12.1f", sim_opt_or(x->fetched_per_query_rows, -1));
        SROW("  draft time share", "%12.3f", x->draft_share);
        SROW("  verify time share", "%12.3f", x->verify_share);
        SROW("  draft KV peak (GB)", "%12.3f", x->hbm_peak[MEM_DRAFT] / 1e9);
        SROW("  staging reserved peak (GB)", "%12.3f", x->hbm_peak[MEM_STAGING] / 1e9);
        SROW("  staging used peak (GB)", "%12.3f", x->staging_used_peak / 1e9);
    }
    ROW("steps (measured)", "%12u", x->measured_steps);
    ROW("simulated seconds", "%12.3f", x->sim_time);
    fprintf(f, "%-32s", "requests done / unfinished");
    for (int i = 0; i < n; i++) fprintf(f, " %*s%6u/%-5u", w - 12, "", r[i].completed, r[i].unfinished);
    fprintf(f, "\n");
    ROW("rows decided / wall s (M)", "%12.1f", x->rows_per_wall_s / 1e6);
    ROW("wall seconds", "%12.2f", x->wall_s);
#undef ROW
#undef SROW
    /* Once per run: a cost table asked outside the range its fit saw. */
    for (int i = 0; i < n; i++)
        for (uint32_t j = 0; j < r[i].ranges.n; j++)
            fprintf(f, "note: %s: %s = %.6g is outside the profile's [fit_range] %.6g .. %.6g (%.0f evaluations extrapolated)\n",
                    r[i].policy, r[i].ranges.e[j].key, r[i].ranges.e[j].first, r[i].ranges.e[j].lo, r[i].ranges.e[j].hi,
                    r[i].ranges.e[j].count);
    return ferror(f) ? dh_err("write error on the report") : 0;
}

int out_json(FILE *f, const sim_result *r, int n, int with_wall)
{
    fprintf(f, "{\"runs\": [");
    for (int i = 0; i < n; i++) {
        const sim_result *x = &r[i];
        /* Names and paths come from configs and traces: escaped (common/json.h). */
        fprintf(f, "%s\n  {\"policy\": ", i ? "," : "");
        json_str(f, x->policy);
        fputs(", \"model\": ", f);
        json_str(f, x->model);
        fputs(", \"hw\": ", f);
        json_str(f, x->hw);
        fputs(", \"source\": ", f);
        json_str(f, x->source);
        fputs(", \"a2a\": ", f);
        json_str(f, x->a2a);
        fputs(",\n", f);
        fprintf(f, "   \"concurrency\": %.17g, \"per_gpu\": %u, \"steps\": %u, \"measured_steps\": %u,\n", x->concurrency,
                x->per_gpu, x->steps, x->measured_steps);
        fprintf(f, "   \"sim_time_s\": %.17g, \"measured_time_s\": %.17g, \"tokens\": %.17g, \"measured_tokens\": %.17g,\n",
                x->sim_time, x->measured_time, x->tokens, x->measured_tokens);
        fprintf(f, "   \"tok_s_per_gpu\": %.17g, \"tpot_p50_s\": %.17g, \"tpot_p90_s\": %.17g, \"tpot_p99_s\": %.17g, \"tpot_mean_s\": %.17g,\n",
                x->tok_s_gpu, x->tpot_p50, x->tpot_p90, x->tpot_p99, x->tpot_mean);
        fprintf(f, "   \"selected_rows\": %.17g, \"missed_rows\": %.17g, \"fetch_fraction\": %.17g,\n", x->selected_rows,
                x->missed_rows, x->fetch_fraction);
        fprintf(f, "   \"fetch_bytes\": %.17g, \"write_bytes\": %.17g, \"h2d_util\": %.17g, \"d2h_util\": %.17g, \"h2d_gbps\": %.17g, \"compute_util\": %.17g,\n",
                x->fetch_bytes, x->write_bytes, x->h2d_util, x->d2h_util, x->h2d_gbps, x->compute_util);
        fprintf(f, "   \"hbm_capacity\": %.17g, \"hbm_peak\": %.17g, \"hbm_peak_by_category\": {", x->hbm_capacity, x->hbm_peak_total);
        for (int c = 0; c < MEM_N_CATEGORIES; c++) fprintf(f, "%s\"%s\": %.17g", c ? ", " : "", ledger_category_name[c], x->hbm_peak[c]);
        fprintf(f, "},\n   \"hbm_mean_by_category\": {");
        for (int c = 0; c < MEM_N_CATEGORIES; c++) fprintf(f, "%s\"%s\": %.17g", c ? ", " : "", ledger_category_name[c], x->hbm_mean[c]);
        fprintf(f, "},\n   \"mean_active\": %.17g, \"admitted\": %u, \"completed\": %u, \"unfinished\": %u, \"never_admitted\": %u,\n",
                x->mean_active, x->admitted, x->completed, x->unfinished, x->never_admitted);
        fprintf(f, "   \"budget_rows\": %u, \"mean_budget_rows\": %.17g, \"mean_optional_rows\": %.17g", x->budget_rows,
                x->mean_budget_rows, x->mean_optional_rows);
        if (x->spec[0]) {
            fputs(",\n   \"spec\": {\"mode\": ", f);
            json_str(f, x->spec);
            fprintf(f, ", \"shared_retrieval\": %s, \"draft_ring\": %s, \"staging_reuse\": %s,\n",
                    x->shared_retrieval ? "true" : "false", x->draft_ring ? "true" : "false", x->staging_reuse ? "true" : "false");
            fprintf(f, "    \"mean_accepted\": %.17g, \"tokens_per_step\": %.17g, \"mean_verify_len\": %.17g,\n",
                    x->mean_accepted, x->tokens_per_step, x->mean_verify_len);
            fprintf(f, "    \"union_rows\": %.17g, \"union_rows_k\": %.17g, \"fetched_shared_rows\": %.17g, \"fetched_per_query_rows\": %.17g,\n",
                    sim_opt_or(x->union_rows, -1), sim_opt_or(x->union_rows_k, -1), sim_opt_or(x->fetched_shared_rows, -1),
                    sim_opt_or(x->fetched_per_query_rows, -1));
            fprintf(f, "    \"draft_share\": %.17g, \"verify_share\": %.17g, \"draft_peak\": %.17g, \"staging_peak\": %.17g, \"staging_used_peak\": %.17g}",
                    x->draft_share, x->verify_share, x->hbm_peak[MEM_DRAFT], x->hbm_peak[MEM_STAGING], x->staging_used_peak);
        }
        fprintf(f, ",\n   \"fit_range_exceeded\": [");
        for (uint32_t j = 0; j < x->ranges.n; j++)
        {
            fprintf(f, "%s{\"input\": ", j ? ", " : "");
            json_str(f, x->ranges.e[j].key);
            fprintf(f, ", \"first\": %.17g, \"min\": %.17g, \"max\": %.17g, \"evaluations\": %.17g}", x->ranges.e[j].first, x->ranges.e[j].lo, x->ranges.e[j].hi, x->ranges.e[j].count);
        }
        fprintf(f, "]");
        if (with_wall) fprintf(f, ",\n   \"wall_s\": %.6g, \"rows_per_wall_s\": %.6g", x->wall_s, x->rows_per_wall_s);
        fprintf(f, "}");
    }
    fprintf(f, "\n]}\n");
    return ferror(f) ? dh_err("write error on the JSON report") : 0;
}

/* Timeline columns shared by TSV and HDF5. */
#define N_FIXED 13
static const char *col_name(int c)
{
    static const char *fixed[N_FIXED] = { "step", "t_start_s", "t_end_s", "active", "tokens", "admitted_total",
                                          "tok_s", "selected_rows", "missed_rows", "fetch_fraction",
                                          "fetch_bytes", "pcie_h2d_util", "write_bytes" };
    static char buf[MEM_N_CATEGORIES + 1][32];
    if (c < N_FIXED) return fixed[c];
    if (c < N_FIXED + MEM_N_CATEGORIES) {
        snprintf(buf[c - N_FIXED], sizeof buf[0], "hbm_%s", ledger_category_name[c - N_FIXED]);
        return buf[c - N_FIXED];
    }
    if (c == N_FIXED + MEM_N_CATEGORIES) return "optional_rows";
    /* Speculative decoding (zero in plain runs). */
    static const char *spec[] = { "accepted", "verified", "union_rows", "fetched_union_rows", "draft_s", "staging_bytes" };
    return spec[c - N_FIXED - MEM_N_CATEGORIES - 1];
}
#define N_COLS (N_FIXED + MEM_N_CATEGORIES + 1 + 6)

static double col_value(const sim_tl_row *t, int c)
{
    double dt = t->t_end - t->t_start;
    switch (c) {
    case 0: return t->step;
    case 1: return t->t_start;
    case 2: return t->t_end;
    case 3: return t->active;
    case 4: return t->tokens;
    case 5: return t->admitted;
    case 6: return dt > 0 ? t->tokens / dt : 0;
    case 7: return t->selected;
    case 8: return t->missed;
    case 9: return t->selected > 0 ? t->missed / t->selected : 0;
    case 10: return t->fetch_bytes;
    case 11: return dt > 0 ? t->fetch_busy / dt : 0;
    case 12: return t->write_bytes;
    default:
        if (c < N_FIXED + MEM_N_CATEGORIES) return t->hbm[c - N_FIXED];
        switch (c - N_FIXED - MEM_N_CATEGORIES) {
        case 0: return t->optional_rows;
        case 1: return t->accepted;
        case 2: return t->verified;
        case 3: return t->union_rows;
        case 4: return t->fetched_rows;
        case 5: return t->draft_s;
        default: return t->staging_bytes;
        }
    }
}

int out_tsv(const char *path, const sim_result *r, int n)
{
    FILE *f = fopen(path, "w");
    if (!f) return dh_err("unable to write '%s': %s", path, strerror(errno));
    for (int i = 0; i < n; i++) {
        fprintf(f, "# policy %s\n", r[i].policy);
        for (int c = 0; c < N_COLS; c++) fprintf(f, "%s%s", c ? "\t" : "", col_name(c));
        fprintf(f, "\n");
        for (uint32_t s = 0; s < r[i].n_tl; s++) {
            for (int c = 0; c < N_COLS; c++) fprintf(f, "%s%.10g", c ? "\t" : "", col_value(&r[i].tl[s], c));
            fprintf(f, "\n");
        }
        if (i + 1 < n) fprintf(f, "\n\n");
    }
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) return dh_err("write error on '%s'", path);
    return 0;
}

int out_h5(const char *path, const sim_result *r, int n)
{
    const char *tmp = path; /* the caller's temporary name (common/ofile.h) */
    h5_init();
    /* No object times: the same run writes the same bytes. */
    hid_t fcpl = h5_untimed_fcpl(), gcpl = h5_untimed(H5P_GROUP_CREATE), dcpl = h5_untimed(H5P_DATASET_CREATE);
    hid_t file = fcpl < 0 || gcpl < 0 || dcpl < 0 ? -1 : H5Fcreate(tmp, H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
    int rc = -1;
    hid_t top = -1;
    if (file < 0) { dh_err("unable to create HDF5 file '%s'", tmp); goto props; }
    top = H5Gcreate2(file, "timeline", H5P_DEFAULT, gcpl, H5P_DEFAULT);
    if (top < 0) { dh_err("'%s': unable to create group /timeline", tmp); goto done; }
    for (int i = 0; i < n; i++) {
        hid_t g = H5Gcreate2(top, r[i].policy, H5P_DEFAULT, gcpl, H5P_DEFAULT);
        if (g < 0) { dh_err("'%s': unable to create group /timeline/%s", tmp, r[i].policy); H5Gclose(top); goto done; }
        hsize_t dims[1] = { r[i].n_tl };
        double *col = malloc((r[i].n_tl ? r[i].n_tl : 1) * sizeof *col);
        if (!col) abort();
        for (int c = 0; c < N_COLS; c++) {
            for (uint32_t s = 0; s < r[i].n_tl; s++) col[s] = col_value(&r[i].tl[s], c);
            hid_t sp = H5Screate_simple(1, dims, NULL);
            hid_t ds = sp < 0 ? -1 : H5Dcreate2(g, col_name(c), H5T_IEEE_F64LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
            herr_t w = ds < 0 ? -1 : (r[i].n_tl ? H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, col) : 0);
            if (ds >= 0) H5Dclose(ds);
            if (sp >= 0) H5Sclose(sp);
            if (w < 0) {
                free(col);
                H5Gclose(g);
                H5Gclose(top);
                dh_err("'%s': unable to write dataset /timeline/%s/%s", tmp, r[i].policy, col_name(c));
                goto done;
            }
        }
        free(col);
        if (H5Gclose(g) < 0) { H5Gclose(top); dh_err("'%s': HDF5 close failed", tmp); goto done; }
    }
    if (H5Gclose(top) < 0) { dh_err("'%s': HDF5 close failed", tmp); goto done; }
    rc = 0;
done:
    if (H5Fclose(file) < 0 && rc == 0) rc = dh_err("'%s': HDF5 close failed", tmp);
props:
    if (fcpl >= 0) H5Pclose(fcpl);
    if (gcpl >= 0) H5Pclose(gcpl);
    if (dcpl >= 0) H5Pclose(dcpl);
    return rc;
}
