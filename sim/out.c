/* out.c: table, JSON, TSV and HDF5 reports; see out.h. */
#include "sim/out.h"
#include "common/dh_err.h"
#include "common/h5attr.h"
#include "common/h5det.h"
#include "common/h5init.h"
#include "common/json.h"
#include "common/cfgkey.h"
#include "traces/gen.h"

#include <errno.h>
#include <math.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Table layout: the label column, then one column per result. */
#define LABEL_W 44
#define CELL_W 17

typedef struct {
    FILE *f;
    const sim_result *r;
    int n, w;
} tab;

static void row_begin(const tab *t, const char *label) { fprintf(t->f, "%-*s", LABEL_W, label); }
static void row_end(const tab *t) { fprintf(t->f, "\n"); }
static void cell(const tab *t, const char *s) { fprintf(t->f, " %*s", t->w, s); }

/* A figure with its interval: "value +/-half" at dec decimals, the value alone
 * when no interval could be computed; "-" when the figure is not defined. */
static void cell_ci(const tab *t, double v, const stats_ci *c, double scale, int dec)
{
    char b[64];
    if (v < 0 || isnan(v)) snprintf(b, sizeof b, "-");
    else if (!c || isnan(c->half)) snprintf(b, sizeof b, "%.*f", dec, v * scale);
    else snprintf(b, sizeof b, "%.*f \xc2\xb1%.*f", dec, v * scale, dec, c->half * scale);
    cell(t, b);
}

static void cell_num(const tab *t, double v, int dec)
{
    char b[64];
    if (v < 0 || isnan(v)) snprintf(b, sizeof b, "-");
    else snprintf(b, sizeof b, "%.*f", dec, v);
    cell(t, b);
}

/* The figures of a row: a member of sim_result with its interval, or without. */
#define ROW_CI(label, val, ci, scale, dec) do { row_begin(&t, label); \
        for (int i = 0; i < n; i++) { const sim_result *x = &r[i]; cell_ci(&t, (val), &x->ci, scale, dec); } \
        row_end(&t); } while (0)
#define ROW(label, val, dec) do { row_begin(&t, label); \
        for (int i = 0; i < n; i++) { const sim_result *x = &r[i]; (void)x; cell_num(&t, (val), dec); } \
        row_end(&t); } while (0)
/* A speculative figure: "-" in plain columns. */
#define SROW(label, val, dec) ROW(label, x->spec[0] ? (val) : -1, dec)

/* How far outside its fitted range an input went, e.g. "up to 1.28x the
 * fitted max" (both ends when both were crossed). */
static void range_extent(char *b, size_t nb, const hw_range_log *g, uint32_t j)
{
    double lo = g->e[j].lo, hi = g->e[j].hi, vmin = g->e[j].vmin, vmax = g->e[j].vmax;
    int below = vmin < lo, above = vmax > hi;
    char a[64] = "", c[64] = "";
    if (below) snprintf(a, sizeof a, "down to %.3g (%.2fx the fitted min %.3g)", vmin, lo > 0 ? vmin / lo : 0, lo);
    if (above) snprintf(c, sizeof c, "up to %.3g (%.2fx the fitted max %.3g)", vmax, hi > 0 ? vmax / hi : 0, hi);
    snprintf(b, nb, "%s%s%s", a, below && above ? " and " : "", c);
}

int out_table(FILE *f, const sim_result *r, int n)
{
    fprintf(f, "%s on %s, concurrency %g (%u requests per GPU), selections: %s\n", r[0].model, r[0].hw, r[0].concurrency,
            r[0].per_gpu, r[0].source);
    fprintf(f, "expert-parallel all-to-all: %s\n", r[0].a2a);
    tab t = { f, r, n, CELL_W };
    int spec = 0;
    for (int i = 0; i < n; i++) {
        if (r[i].spec[0]) spec = 1;
        int l = (int)strlen(r[i].policy);
        if (l > t.w) t.w = l;
    }
    row_begin(&t, "");
    for (int i = 0; i < n; i++) cell(&t, r[i].policy);
    row_end(&t);
    ROW_CI("output tokens/s per GPU", x->tok_s_gpu, ci_tok_s, 1, 1);
    ROW_CI("time per output token (TPOT), mean (ms)", x->tpot_mean, ci_tpot_mean, 1e3, 2);
    ROW_CI("  TPOT median, p50 (ms)", x->tpot_p50, ci_tpot_p50, 1e3, 2);
    ROW_CI("  TPOT p90 (ms)", x->tpot_p90, ci_tpot_p90, 1e3, 2);
    ROW_CI("  TPOT p99 (ms)", x->tpot_p99, ci_tpot_p99, 1e3, 2);
    ROW("requests running per GPU, mean", x->mean_active, 2);
    ROW_CI("fetch fraction (fetched / selected rows)", x->fetch_fraction, ci_fetch_fraction, 1, 4);
    ROW_CI("rows fetched per output token (all layers)", x->fetched_rows_per_token, ci_rows_per_token, 1, 0);
    ROW_CI("KB fetched per output token", x->fetched_bytes_per_token, ci_bytes_per_token, 1e-3, 1);
    ROW("host-to-device GB fetched, whole run", x->fetch_bytes / 1e9, 2);
    ROW("host-to-device link busy (share of time)", x->h2d_util, 3);
    ROW("device-to-host GB written back, whole run", x->write_bytes / 1e9, 2);
    ROW("GPU compute busy (share of time)", x->compute_util, 3);
    ROW("HBM peak (GB)", x->hbm_peak_total / 1e9, 2);
    ROW("  weights + workspace (GB)", (x->hbm_peak[MEM_WEIGHTS] + x->hbm_peak[MEM_WORKSPACE]) / 1e9, 2);
    ROW("  indexer keys, peak (GB)", x->hbm_peak[MEM_INDEXER] / 1e9, 2);
    ROW("  protected KV rows, peak (GB)", x->hbm_peak[MEM_PROTECTED] / 1e9, 2);
    ROW("  optional KV rows, peak (GB)", x->hbm_peak[MEM_OPTIONAL] / 1e9, 2);
    row_begin(&t, "requests demoted to hot buffer (per 1k steps)");
    for (int i = 0; i < n; i++) {
        char b[64];
        const sim_result *x = &r[i];
        if (!x->has_demotions) snprintf(b, sizeof b, "-");
        else if (isnan(x->ci_demotions_per_1k.half)) snprintf(b, sizeof b, "%.0f (%.1f)", x->demotions, x->demotions_per_1k);
        else snprintf(b, sizeof b, "%.0f (%.1f \xc2\xb1%.1f)", x->demotions, x->demotions_per_1k, x->ci_demotions_per_1k.half);
        cell(&t, b);
    }
    row_end(&t);
    ROW("hot-buffer rows per request and group, mean", x->mean_budget_rows, 0);
    ROW("  of which optional rows, mean", x->mean_optional_rows, 0);
    if (spec) {
        row_begin(&t, "speculative decoding");
        for (int i = 0; i < n; i++) cell(&t, r[i].spec[0] ? r[i].spec : "-");
        row_end(&t);
        row_begin(&t, "  shared retrieval/draft ring/staging reuse");
        for (int i = 0; i < n; i++) {
            char b[32];
            snprintf(b, sizeof b, "%s/%s/%s", r[i].shared_retrieval ? "on" : "off", r[i].draft_ring ? "on" : "off",
                     r[i].staging_reuse ? "on" : "off");
            cell(&t, r[i].spec[0] ? b : "-");
        }
        row_end(&t);
        row_begin(&t, "  tokens per request and step (accepted + 1)");
        for (int i = 0; i < n; i++) cell_ci(&t, r[i].spec[0] ? r[i].tokens_per_step : -1, &r[i].ci_tokens_per_step, 1, 3);
        row_end(&t);
        SROW("  drafts verified per request and step", x->mean_verify_len, 3);
        SROW("  union of the verify selections (rows)", sim_opt_or(x->union_rows, -1), 0);
        SROW("  union / top-k", sim_opt_or(x->union_rows_k, -1), 3);
        SROW("  rows fetched per request and group, shared", sim_opt_or(x->fetched_shared_rows, -1), 1);
        SROW("  the same, if each query fetched its own", sim_opt_or(x->fetched_per_query_rows, -1), 1);
        SROW("  draft share of step time", x->draft_share, 3);
        SROW("  verify share of step time", x->verify_share, 3);
        SROW("  draft KV, peak (GB)", x->hbm_peak[MEM_DRAFT] / 1e9, 3);
        SROW("  staging reserved, peak (GB)", x->hbm_peak[MEM_STAGING] / 1e9, 3);
        SROW("  staging used, peak (GB)", x->staging_used_peak / 1e9, 3);
    }
    ROW("steps measured", (double)x->measured_steps, 0);
    ROW("output tokens measured", x->measured_tokens, 0);
    row_begin(&t, "batches for the intervals (lag-1 autocorr.)");
    for (int i = 0; i < n; i++) {
        char b[48];
        if (r[i].batches.b) snprintf(b, sizeof b, "%u x %u%s (%.2f)", r[i].batches.b, r[i].batches.len,
                                     r[i].batches.lag1_ok ? "" : "!", r[i].ci_tok_s.lag1);
        else snprintf(b, sizeof b, "too few steps");
        cell(&t, b);
    }
    row_end(&t);
    row_begin(&t, "warm-up steps excluded (MSER-5 suggests)");
    for (int i = 0; i < n; i++) {
        char b[48];
        snprintf(b, sizeof b, "%u (%u)%s", r[i].warmup_steps, r[i].mser_warmup, r[i].mser_warmup > r[i].warmup_steps ? "!" : "");
        cell(&t, b);
    }
    row_end(&t);
    ROW("  output tokens/s per GPU during the warm-up", x->warmup_steps ? x->warmup_tok_s : -1, 1);
    ROW("simulated seconds", x->sim_time, 3);
    row_begin(&t, "requests finished / still running");
    for (int i = 0; i < n; i++) {
        char b[32];
        snprintf(b, sizeof b, "%u/%u", r[i].completed, r[i].unfinished);
        cell(&t, b);
    }
    row_end(&t);
    ROW("wall: M rows decided per second", x->rows_per_wall_s / 1e6, 1);
    ROW("wall seconds", x->wall_s, 2);
#undef ROW_CI
#undef ROW
#undef SROW
    fprintf(f, "\xc2\xb1: 95 %% confidence half-width by batch means over the measured steps (common/stats.h); the\n"
               "   speculative tokens/s and TPOT mean with the accepted drafts as a control variate (their\n"
               "   expectation is known, docs/HEADLINE.md); demotions: the run's count, then per 1000 measured\n"
               "   steps. The headline's ratios combine the two columns' intervals as if independent (wider\n"
               "   than paired).\n"
               "   \"!\" after the batches: their means stay correlated, the interval may be too narrow; after\n"
               "   the warm-up: MSER-5 finds a longer transient than was excluded.\n"
               "TPOT: a step's time over the tokens each request emitted in it, weighted by tokens. Fetch\n"
               "   fraction: rows copied from host memory over rows the attention selected; per output token,\n"
               "   every layer's rows and bytes count (comparable between plain and speculative columns).\n"
               "Protected rows: each request's current top-k, which must be on the GPU; optional rows: rows\n"
               "   kept beyond them while memory allows (adaptive). A group: the layers sharing one selection.\n"
               "Extrapolated costs (below): a fitted form extends its formula beyond its inputs' range (the\n"
               "   fetch is compared with its inputs held at the range's ends; a profile's tables hold their\n"
               "   end values and are compared with their end slopes carried on); an affine form extends its\n"
               "   line (no other choice to compare); the host pool enters the fetch only through its page\n"
               "   walks, which the fit found 0, and gemm_fp8_m was fitted at one value (the GPU replay checks\n"
               "   8-query verification steps, analysis/VALIDATION.md).\n");
    /* Once per run and input: a cost table asked outside the range its fit saw. */
    for (int i = 0; i < n; i++) {
        const hw_range_log *g = &r[i].ranges;
        if (!g->n) continue;
        fprintf(f, "note: %s: outside the profile's [fit_range] (costs extrapolated):", r[i].policy);
        for (uint32_t j = 0; j < g->n; j++) {
            char b[160];
            range_extent(b, sizeof b, g, j);
            double all = hw_range_evals(g, g->e[j].key);
            fprintf(f, "%s %s %s in %.0f %% of %.0f evaluations", j ? ";" : "", g->e[j].key, b,
                    all > 0 ? 100 * g->e[j].count / all : 100, all > 0 ? all : g->e[j].count);
        }
        /* The size of the effect where the fetch left its fitted range: the fetch time with
         * the other plausible extrapolation (step.c: the fitted form's inputs held at the
         * range's ends, or a profile's tables' end slopes carried on). The fetch runs partly
         * hidden under compute, so the share of the run is an upper bound on how much
         * tokens/s moves. */
        int fetch = 0;
        for (uint32_t j = 0; j < g->n; j++) fetch |= !strncmp(g->e[j].key, "fetch_", 6);
        if (fetch && r[i].fetch_busy_s > 0)
            fprintf(f, "; effect: the fetch's other extrapolation (inputs held at the range's ends) changes the fetch "
                       "time by %+.2f %%, %+.2f %% of the run's time (at most that on tokens/s)",
                    100 * r[i].fetch_slope_delta_s / r[i].fetch_busy_s,
                    r[i].sim_time > 0 ? 100 * r[i].fetch_slope_delta_s / r[i].sim_time : 0);
        fprintf(f, "\n");
    }
    return ferror(f) ? dh_err("write error on the report") : 0;
}

/* A number, or null when it is not one (an interval that could not be computed). */
static void json_num(FILE *f, double v)
{
    if (isfinite(v)) fprintf(f, "%.17g", v);
    else fputs("null", f);
}

/* A config file's entries as {"section": {"key": "value", ...}, ...}, sections in
 * file order, one a line; values are the file's text (after the overrides), typed
 * by their loaders, so strings here. */
static void json_cfg_values(FILE *f, const cfg *c, const char *indent)
{
    fputs("{", f);
    size_t ns = cfg_section_count(c), ne = cfg_entry_count(c);
    for (size_t s = 0; s < ns; s++) {
        const char *name = cfg_section_name(c, s);
        fprintf(f, "%s\n%s", s ? "," : "", indent);
        json_str(f, name);
        fputs(": {", f);
        int k = 0;
        for (size_t i = 0; i < ne; i++) {
            const char *sec, *key, *val;
            cfg_entry_at(c, i, &sec, &key, &val);
            if (strcmp(sec, name)) continue;
            fputs(k++ ? ", " : "", f);
            json_str(f, key);
            fputs(": ", f);
            json_str(f, val);
        }
        fputs("}", f);
    }
    fputs("}", f);
}

/* The defaults a file's loaders took (cfg_default_at) that the file does not give,
 * grouped by section in the order first read: as JSON like json_cfg_values, or
 * (json 0) as INI text. */
static void cfg_defaults(FILE *f, const cfg *c, const char *indent, int json)
{
    size_t nd = cfg_default_count(c);
    const char **secs = calloc(nd ? nd : 1, sizeof *secs);
    if (!secs) abort();
    size_t ns = 0;
    for (size_t i = 0; i < nd; i++) {
        const char *sec, *key, *val;
        cfg_default_at(c, i, &sec, &key, &val);
        if (cfg_has(c, sec, key)) continue;
        size_t j = 0;
        while (j < ns && strcmp(secs[j], sec)) j++;
        if (j == ns) secs[ns++] = sec;
    }
    if (json) fputs("{", f);
    for (size_t s = 0; s < ns; s++) {
        if (json) {
            fprintf(f, "%s\n%s", s ? "," : "", indent);
            json_str(f, secs[s]);
            fputs(": {", f);
        } else fprintf(f, "[%s]\n", secs[s]);
        int k = 0;
        for (size_t i = 0; i < nd; i++) {
            const char *sec, *key, *val;
            cfg_default_at(c, i, &sec, &key, &val);
            if (strcmp(sec, secs[s]) || cfg_has(c, sec, key)) continue;
            if (json) {
                fputs(k++ ? ", " : "", f);
                json_str(f, key);
                fputs(": ", f);
                json_str(f, val);
            } else fprintf(f, "%s = %s\n", key, val);
        }
        if (json) fputs("}", f);
    }
    if (json) fputs("}", f);
    free(secs);
}

static void json_strs(FILE *f, char *const *v, int n)
{
    fputs("[", f);
    for (int i = 0; i < n; i++) {
        fputs(i ? ", " : "", f);
        json_str(f, v[i]);
    }
    fputs("]", f);
}

/* One run's inputs: "config_digest", "sets" (its own overrides) and "config", its
 * three files with their paths and entries. */
static void json_run_inputs(FILE *f, const out_run_inputs *ri)
{
    fprintf(f, "{\"config_digest\": \"%s\", \"seed\": %llu, \"steps\": %u, \"sets\": ", ri->digest,
            (unsigned long long)ri->seed, ri->steps);
    json_strs(f, ri->sets, ri->n_sets);
    fputs(",\n    \"config\": {", f);
    for (int i = 0; i < PROV_N_FILES; i++) {
        fprintf(f, "%s\n     \"%s\": {\"file\": ", i ? "," : "", prov_file_role[i]);
        json_str(f, cfg_name(ri->files[i]));
        fputs(", \"values\": ", f);
        json_cfg_values(f, ri->files[i], "      ");
        fputs(",\n      \"defaults\": ", f);
        cfg_defaults(f, ri->files[i], "      ", 1);
        fputs("}", f);
    }
    fputs("}}", f);
}

/* The options as one JSON object {"--name": value, ...} (HDF5 stores the same text). */
static void json_opts(FILE *f, const out_opt *o, int n)
{
    fputs("{", f);
    for (int i = 0; i < n; i++) {
        fputs(i ? ", " : "", f);
        json_str(f, o[i].name);
        fputs(": ", f);
        if (o[i].kind == OUT_OPT_STR) json_str(f, o[i].str);
        else if (o[i].kind == OUT_OPT_BOOL) fputs(o[i].num != 0 ? "true" : "false", f);
        else json_num(f, o[i].num);
    }
    fputs("}", f);
}

int out_json(FILE *f, const sim_result *r, int n, int with_wall) { return out_json_inputs(f, r, n, with_wall, NULL); }

int out_json_inputs(FILE *f, const sim_result *r, int n, int with_wall, const out_inputs *in)
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
        /* Uncertainty (common/stats.h): half-widths of the 95 % intervals, null where none. */
        fprintf(f, ",\n   \"warmup_steps\": %u, \"mser5_warmup_steps\": %u, \"warmup_tok_s_per_gpu\": %.17g,\n", x->warmup_steps,
                x->mser_warmup, x->warmup_tok_s);
        fprintf(f, "   \"fetched_rows_per_token\": %.17g, \"fetched_bytes_per_token\": %.17g,\n", x->fetched_rows_per_token,
                x->fetched_bytes_per_token);
        fprintf(f, "   \"batches\": {\"count\": %u, \"steps_each\": %u, \"first_measured_step_used\": %u, \"lag1_ok\": %s, \"lag1_tok_s\": ",
                x->batches.b, x->batches.len, x->batches.first, x->batches.lag1_ok ? "true" : "false");
        json_num(f, x->ci_tok_s.lag1);
        fputs("},\n   \"ci95_half\": {", f);
        const struct { const char *name; const stats_ci *c; } cis[] = {
            { "tok_s_per_gpu", &x->ci_tok_s }, { "tpot_mean_s", &x->ci_tpot_mean }, { "tpot_p50_s", &x->ci_tpot_p50 },
            { "tpot_p90_s", &x->ci_tpot_p90 }, { "tpot_p99_s", &x->ci_tpot_p99 }, { "fetch_fraction", &x->ci_fetch_fraction },
            { "fetched_rows_per_token", &x->ci_rows_per_token }, { "fetched_bytes_per_token", &x->ci_bytes_per_token },
            { "tokens_per_step", &x->ci_tokens_per_step },
        };
        for (size_t k = 0; k < sizeof cis / sizeof cis[0]; k++) {
            fprintf(f, "%s\"%s\": ", k ? ", " : "", cis[k].name);
            json_num(f, cis[k].c->half);
        }
        fputs("}", f);
        if (x->cv_used) {
            fprintf(f, ",\n   \"control_variate\": {\"tok_s_per_gpu_plain\": %.17g, \"ci95_half_plain\": ", x->tok_s_plain);
            json_num(f, x->cv.raw.half);
            fprintf(f, ", \"beta\": %.17g, \"rho\": ", x->cv.beta);
            json_num(f, x->cv.rho);
            fputs("}", f);
        }
        if (x->has_demotions) {
            fprintf(f, ",\n   \"demotions\": {\"count\": %.17g, \"measured\": %.17g, \"per_1k_steps\": %.17g, \"ci95_half\": ",
                    x->demotions, x->measured_demotions, x->demotions_per_1k);
            json_num(f, x->ci_demotions_per_1k.half);
            fputs("}", f);
        }
        if (x->has_retractions) /* [instance] admission = sglang (sim/admit.h) */
            fprintf(f, ",\n   \"retractions\": {\"count\": %.17g, \"measured\": %.17g}", x->retractions,
                    x->measured_retractions);
        fprintf(f, ",\n   \"fit_range_exceeded\": [");
        for (uint32_t j = 0; j < x->ranges.n; j++)
        {
            fprintf(f, "%s{\"input\": ", j ? ", " : "");
            json_str(f, x->ranges.e[j].key);
            fprintf(f, ", \"first\": %.17g, \"min\": %.17g, \"max\": %.17g, \"evaluations\": %.17g, \"evaluations_checked\": %.17g, \"seen_min\": %.17g, \"seen_max\": %.17g}",
                    x->ranges.e[j].first, x->ranges.e[j].lo, x->ranges.e[j].hi, x->ranges.e[j].count,
                    hw_range_evals(&x->ranges, x->ranges.e[j].key), x->ranges.e[j].vmin, x->ranges.e[j].vmax);
        }
        fprintf(f, "],\n   \"fetch_busy_s\": %.17g, \"fetch_slope_extrapolation_delta_s\": %.17g", x->fetch_busy_s,
                x->fetch_slope_delta_s);
        if (with_wall) fprintf(f, ",\n   \"wall_s\": %.6g, \"rows_per_wall_s\": %.6g", x->wall_s, x->rows_per_wall_s);
        /* Last in the object: the figures above keep their place for the readers
         * that take the first occurrence of a key (paper-figs/jget.sh). */
        if (in) {
            fputs(",\n   \"inputs\": ", f);
            json_run_inputs(f, &in->run[i]);
        }
        fprintf(f, "}");
    }
    fprintf(f, "\n]");
    if (in) {
        fputs(",\n \"inputs\": {\"tool\": ", f);
        json_str(f, in->tool);
        fputs(", \"commit\": ", f);
        json_str(f, in->commit);
        fputs(", \"config\": ", f);
        json_str(f, in->config);
        fputs(", \"sets\": ", f);
        json_strs(f, in->sets, in->n_sets);
        fputs(",\n  \"options\": ", f);
        json_opts(f, in->opts, in->n_opts);
        fputs("}", f);
    }
    fprintf(f, "}\n");
    return ferror(f) ? dh_err("write error on the JSON report") : 0;
}

/* The units of the JSON run object's figures, by key as a flattening reader
 * names them (nested keys joined with '_': spec_union_rows, batches_count);
 * "" for counts of events, flags and names, "1" for ratios and shares. */
static const struct { const char *key, *unit; } json_units[] = {
    { "policy", "" }, { "model", "" }, { "hw", "" }, { "source", "" }, { "a2a", "" },
    { "concurrency", "requests" }, { "per_gpu", "requests" }, { "steps", "steps" }, { "measured_steps", "steps" },
    { "sim_time_s", "s" }, { "measured_time_s", "s" }, { "tokens", "tokens" }, { "measured_tokens", "tokens" },
    { "tok_s_per_gpu", "tokens/s" }, { "tpot_p50_s", "s/token" }, { "tpot_p90_s", "s/token" },
    { "tpot_p99_s", "s/token" }, { "tpot_mean_s", "s/token" }, { "selected_rows", "rows" }, { "missed_rows", "rows" },
    { "fetch_fraction", "1" }, { "fetch_bytes", "bytes" }, { "write_bytes", "bytes" }, { "h2d_util", "1" },
    { "d2h_util", "1" }, { "h2d_gbps", "GB/s" }, { "compute_util", "1" }, { "hbm_capacity", "bytes" },
    { "hbm_peak", "bytes" }, { "mean_active", "requests" }, { "admitted", "requests" }, { "completed", "requests" },
    { "unfinished", "requests" }, { "never_admitted", "requests" }, { "budget_rows", "rows" },
    { "mean_budget_rows", "rows" }, { "mean_optional_rows", "rows" }, { "spec_mode", "" },
    { "spec_shared_retrieval", "" }, { "spec_draft_ring", "" }, { "spec_staging_reuse", "" },
    { "spec_mean_accepted", "tokens" }, { "spec_tokens_per_step", "tokens" }, { "spec_mean_verify_len", "tokens" },
    { "spec_union_rows", "rows" }, { "spec_union_rows_k", "1" }, { "spec_fetched_shared_rows", "rows" },
    { "spec_fetched_per_query_rows", "rows" }, { "spec_draft_share", "1" }, { "spec_verify_share", "1" },
    { "spec_draft_peak", "bytes" }, { "spec_staging_peak", "bytes" }, { "spec_staging_used_peak", "bytes" },
    { "warmup_steps", "steps" }, { "mser5_warmup_steps", "steps" }, { "warmup_tok_s_per_gpu", "tokens/s" },
    { "fetched_rows_per_token", "rows/token" }, { "fetched_bytes_per_token", "bytes/token" },
    { "tokens_per_step", "tokens" }, { "batches_count", "" }, { "batches_steps_each", "steps" },
    { "batches_first_measured_step_used", "steps" }, { "batches_lag1_ok", "" }, { "batches_lag1_tok_s", "1" },
    { "fit_range_exceeded_n", "" }, { "fetch_busy_s", "s" }, { "fetch_slope_extrapolation_delta_s", "s" },
    { "wall_s", "s" }, { "rows_per_wall_s", "rows/s" },
};

static const char *unit_of_config_key(const char *name)
{
    const char *dot = strrchr(name, '.');
    if (!dot || dot == name) return NULL;
    char sec[128];
    size_t n = (size_t)(dot - name);
    if (n >= sizeof sec) return NULL;
    memcpy(sec, name, n);
    sec[n] = 0;
    const cfg_schema *all[] = { &instance_schema, &wl_schema, &specrun_schema, &model_schema, &hw_schema, &gen_schema };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        const cfg_key *k = cfgk_find(all[i], sec, dot + 1);
        if (k) return k->unit;
    }
    return NULL;
}

const char *out_unit_of(const char *name)
{
    for (size_t i = 0; i < sizeof json_units / sizeof json_units[0]; i++)
        if (!strcmp(json_units[i].key, name)) return json_units[i].unit;
    if (!strncmp(name, "hbm_peak_by_category_", 21) || !strncmp(name, "hbm_mean_by_category_", 21)) return "bytes";
    if (!strncmp(name, "ci95_half_", 10)) return out_unit_of(name + 10);
    /* A sweep table's mean and interval over seeds have the figure's unit. */
    size_t l = strlen(name);
    char base[256];
    if (l < sizeof base && ((l > 5 && !strcmp(name + l - 5, "_mean")) || (l > 5 && !strcmp(name + l - 5, "_ci95")))) {
        memcpy(base, name, l - 5);
        base[l - 5] = 0;
        return out_unit_of(base);
    }
    return unit_of_config_key(name);
}

/* Timeline columns shared by TSV and HDF5: name, unit ("1": a ratio; "" an
 * index) and what the value is. Per-step figures are the simulated GPU's. */
typedef struct {
    const char *name, *unit, *doc;
} tl_col;
#define N_FIXED 13
static const tl_col tl_fixed[N_FIXED] = {
    { "step", "", "decode step, from 0 (warm-up steps included)" },
    { "t_start_s", "s", "simulated time the step began" },
    { "t_end_s", "s", "simulated time the step ended" },
    { "active", "requests", "requests decoding in the step" },
    { "tokens", "tokens", "output tokens the step emitted" },
    { "admitted_total", "requests", "requests admitted since the start (cumulative)" },
    { "tok_s", "tokens/s", "tokens / (t_end_s - t_start_s)" },
    { "selected_rows", "rows", "KV rows the attention selected, summed over requests and layers" },
    { "missed_rows", "rows", "of the selected rows, those fetched from host memory" },
    { "fetch_fraction", "1", "missed_rows / selected_rows (0 when none selected)" },
    { "fetch_bytes", "bytes", "bytes copied host to device" },
    { "pcie_h2d_util", "1", "share of the step's time the host-to-device link was busy" },
    { "write_bytes", "bytes", "bytes written back device to host" },
};
/* Speculative decoding (zero in plain runs). */
#define N_SPEC 6
static const tl_col tl_spec[N_SPEC] = {
    { "accepted", "tokens", "draft tokens accepted, summed over requests" },
    { "verified", "tokens", "draft tokens verified, summed over requests" },
    { "union_rows", "rows", "union of the verify selections, summed over (request, layer group)" },
    { "fetched_union_rows", "rows", "rows fetched for the union, summed over (request, layer group)" },
    { "draft_s", "s", "time of the step's draft pass" },
    { "staging_bytes", "bytes", "bytes of union rows staged" },
};
#define N_COLS (N_FIXED + MEM_N_CATEGORIES + 1 + N_SPEC)

/* Column c; the HBM columns' texts are written into b, which the result
 * points into (so it must live as long as the result is used). */
typedef struct {
    char name[32], doc[80];
} tl_col_buf;
static tl_col col_info(int c, tl_col_buf *b)
{
    if (c < N_FIXED) return tl_fixed[c];
    if (c < N_FIXED + MEM_N_CATEGORIES) {
        const char *cat = ledger_category_name[c - N_FIXED];
        snprintf(b->name, sizeof b->name, "hbm_%s", cat);
        snprintf(b->doc, sizeof b->doc, "HBM bytes held by '%s' during the step", cat);
        return (tl_col){ b->name, "bytes", b->doc };
    }
    if (c == N_FIXED + MEM_N_CATEGORIES)
        return (tl_col){ "optional_rows", "rows", "adaptive: optional rows kept per (request, layer group), mean" };
    return tl_spec[c - N_FIXED - MEM_N_CATEGORIES - 1];
}

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

/* The speculative mode of a result: its [spec] mode, "none" when plain. */
static const char *spec_mode(const sim_result *r) { return r->spec[0] ? r->spec : "none"; }

int out_tsv(const char *path, const sim_result *r, int n)
{
    FILE *f = fopen(path, "w");
    if (!f) return dh_err("unable to write '%s': %s", path, strerror(errno));
    /* Long form: the policy (the column's label, e.g. adaptive+dflash2 or
     * hisparse-spec) and its speculative mode name every row. */
    fputs("policy\tspec_mode", f);
    for (int c = 0; c < N_COLS; c++) {
        tl_col_buf b;
        fprintf(f, "\t%s", col_info(c, &b).name);
    }
    fputs("\n", f);
    for (int i = 0; i < n; i++)
        for (uint32_t s = 0; s < r[i].n_tl; s++) {
            fprintf(f, "%s\t%s", r[i].policy, spec_mode(&r[i]));
            for (int c = 0; c < N_COLS; c++) fprintf(f, "\t%.10g", col_value(&r[i].tl[s], c));
            fputs("\n", f);
        }
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) return dh_err("write error on '%s'", path);
    return 0;
}

/* A run's inputs as attributes of obj (a /timeline/<policy> group, or the root
 * for the command line's configuration): each file as INI text with its path,
 * the digest, the seed, the steps and the column's own overrides (JSON text). */
static int h5_run_attrs(hid_t obj, const out_run_inputs *ri)
{
    for (int i = 0; i < PROV_N_FILES; i++) {
        char a[64], b[64], d[64];
        snprintf(a, sizeof a, "config_%s", prov_file_role[i]);
        snprintf(b, sizeof b, "config_%s_file", prov_file_role[i]);
        snprintf(d, sizeof d, "config_%s_defaults", prov_file_role[i]);
        char *text = cfg_to_string(ri->files[i]), *defs = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&defs, &len);
        if (!m) abort();
        cfg_defaults(m, ri->files[i], "", 0);
        fclose(m);
        int rc = h5_attr_str(obj, a, text) < 0 || h5_attr_str(obj, d, defs) < 0 ? -1 : 0;
        free(text);
        free(defs);
        if (rc < 0 || h5_attr_str(obj, b, cfg_name(ri->files[i])) < 0) return -1;
    }
    char *sets = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&sets, &len);
    if (!m) abort();
    json_strs(m, ri->sets, ri->n_sets);
    fclose(m);
    int rc = h5_attr_str(obj, "config_digest", ri->digest) < 0 || h5_attr_u64(obj, "seed", ri->seed) < 0 ||
                     h5_attr_u64(obj, "steps", ri->steps) < 0 || h5_attr_str(obj, "sets", sets) < 0
                 ? -1 : 0;
    free(sets);
    return rc;
}

/* The root's attributes: what wrote the file, from what (in may be NULL). */
static int h5_root_attrs(hid_t file, const out_inputs *in)
{
    if (h5_attr_str(file, "layout", "/timeline/POLICY/COLUMN: one value per decode step (attributes unit and "
                                    "description); /requests/POLICY/COLUMN: one value per arrived request") < 0)
        return -1;
    if (!in) return 0;
    char *opts = NULL, *sets = NULL;
    size_t l1 = 0, l2 = 0;
    FILE *m = open_memstream(&opts, &l1);
    if (!m) abort();
    json_opts(m, in->opts, in->n_opts);
    fclose(m);
    m = open_memstream(&sets, &l2);
    if (!m) abort();
    json_strs(m, in->sets, in->n_sets);
    fclose(m);
    int rc = h5_attr_str(file, "tool", in->tool) < 0 || h5_attr_str(file, "commit", in->commit) < 0 ||
                     h5_attr_str(file, "config", in->config) < 0 || h5_attr_str(file, "command_sets", sets) < 0 ||
                     h5_attr_str(file, "options", opts) < 0 || h5_run_attrs(file, &in->base) < 0
                 ? -1 : 0;
    free(opts);
    free(sets);
    return rc;
}

int out_h5(const char *path, const sim_result *r, int n) { return out_h5_inputs(path, r, n, NULL); }

int out_h5_inputs(const char *path, const sim_result *r, int n, const out_inputs *in)
{
    const char *tmp = path; /* the caller's temporary name (common/ofile.h) */
    h5_init();
    /* No object times: the same run writes the same bytes. */
    hid_t fcpl = h5_untimed_fcpl(), gcpl = h5_untimed(H5P_GROUP_CREATE), dcpl = h5_untimed(H5P_DATASET_CREATE);
    hid_t file = fcpl < 0 || gcpl < 0 || dcpl < 0 ? -1 : H5Fcreate(tmp, H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
    int rc = -1;
    hid_t top = -1;
    if (file < 0) { dh_err("unable to create HDF5 file '%s'", tmp); goto props; }
    if (h5_root_attrs(file, in) < 0) { dh_err_prefix("'%s': ", tmp); goto done; }
    top = H5Gcreate2(file, "timeline", H5P_DEFAULT, gcpl, H5P_DEFAULT);
    if (top < 0) { dh_err("'%s': unable to create group /timeline", tmp); goto done; }
    for (int i = 0; i < n; i++) {
        hid_t g = H5Gcreate2(top, r[i].policy, H5P_DEFAULT, gcpl, H5P_DEFAULT);
        if (g < 0) { dh_err("'%s': unable to create group /timeline/%s", tmp, r[i].policy); H5Gclose(top); goto done; }
        if (h5_attr_str(g, "policy", r[i].policy) < 0 || h5_attr_str(g, "spec_mode", spec_mode(&r[i])) < 0 ||
            (in && h5_run_attrs(g, &in->run[i]) < 0)) {
            dh_err_prefix("'%s': /timeline/%s: ", tmp, r[i].policy);
            H5Gclose(g);
            H5Gclose(top);
            goto done;
        }
        hsize_t dims[1] = { r[i].n_tl };
        double *col = malloc((r[i].n_tl ? r[i].n_tl : 1) * sizeof *col);
        if (!col) abort();
        for (int c = 0; c < N_COLS; c++) {
            tl_col_buf b;
            tl_col ci = col_info(c, &b);
            for (uint32_t s = 0; s < r[i].n_tl; s++) col[s] = col_value(&r[i].tl[s], c);
            hid_t sp = H5Screate_simple(1, dims, NULL);
            hid_t ds = sp < 0 ? -1 : H5Dcreate2(g, ci.name, H5T_IEEE_F64LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
            herr_t w = ds < 0 ? -1 : (r[i].n_tl ? H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, col) : 0);
            if (w >= 0 && (h5_attr_str(ds, "unit", ci.unit) < 0 || h5_attr_str(ds, "description", ci.doc) < 0)) w = -1;
            if (ds >= 0) H5Dclose(ds);
            if (sp >= 0) H5Sclose(sp);
            if (w < 0) {
                free(col);
                H5Gclose(g);
                H5Gclose(top);
                dh_err("'%s': unable to write dataset /timeline/%s/%s", tmp, r[i].policy, ci.name);
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
