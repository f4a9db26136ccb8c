/* gen.c: the calibrated synthetic generator of attention selections; see gen.h.
 *
 * Model. For each request and each distinct (k, compress) pair of its
 * selection groups there is one *latent* selection process, keyed by
 * (seed, request, latent id); every group of that request derives its stream
 * from the latent one, so group g's stream is computable alone (it replays the
 * latent process itself) and adjacent groups share most of their rows
 * (IndexCache: 70-100 % top-k overlap between adjacent layers).
 *
 * The latent selection of min(k, nrows) rows is the union of
 *   - attention sinks: the first `sinks` rows, always selected;
 *   - the local window: the newest `window` rows, always selected;
 *   - a dynamic part in between, itself two populations: *heavy hitters*
 *     (heavy_fraction of the dynamic slots) that stay selected for long and
 *     leave only briefly (heavy_leave per position, back after a geometric
 *     absence of mean heavy_return_mean), and *volatile* rows that churn.
 * At each position the volatile part loses as many rows as needed for the
 * mean step overlap |S_t ∩ S_t-1| / k to equal step_overlap (the verification
 * union knob: sweeping it sweeps the union of consecutive selections). A
 * leaving volatile row comes back with probability reuse_p after a reuse
 * distance drawn from a mixture (geometric of mean reuse_near_mean with
 * probability reuse_near_p, else log-uniform on [1, reuse_far_max]); these
 * re-references are what shape the LRU / FIFO / random / Belady curves. Slots
 * left free are filled with fresh rows taken in contiguous runs (mean length
 * run_mean), from the newest fresh_recent_span rows with probability
 * fresh_recent_p and from the whole context otherwise. A burn-in of `warmup`
 * positions before position 0 fills the re-reference calendar.
 *
 * A group maps each latent dynamic row x to an image row: x itself, or, with
 * probability substitute (a hash of (seed, request, group, x), so x gets the
 * same image every time it returns), a nearby row within substitute_span
 * (linear probing keeps the images distinct). A group whose profile asks for a
 * lower step overlap than the latent one redraws the images of that many
 * persisting rows per position (its own Philox stream), which lowers its
 * overlap without touching the latent process (DeepSeek-V3.2's first layers).
 *
 * Structure. The latent process writes each step as a record of what
 * happened, in order (members leaving by index, rows entering), and a group
 * replays records against its own view; the groups of a request that share
 * the latent process share its records within a source (the first group to
 * need a step generates it; records are dropped once every group has replayed
 * them), so a request's latent process runs once however many groups read it,
 * in any order, and a stream read alone regenerates it. Content is the same
 * whichever way a stream is produced. Opening a stream allocates its view and
 * joins the share; the burn-in runs at the first position read.
 *
 * Cost. Each position does work proportional to the rows that change: a
 * uniform choice from a dense array of the population per leaving row, one
 * 32-bit draw into an inverse-CDF table for its reuse distance, a calendar
 * bucket per position for returns (once per request), then per group one
 * bitset update per event and, for the delta, a walk over the 64-row words
 * it changed (already in row order: no sort). A keyframe scans the selection
 * bitset (nrows / 64 words). Memory: per stream 0.25 bytes per context row
 * (the selection and its value at the start of the position, interleaved by
 * word) plus 4 bytes per selected row (12 for a group that redraws images);
 * per request the latent process's 0.25 bytes per context row, its pending
 * re-references and the records not yet replayed by every group; per source
 * three 256 KB sampling tables.
 */
#include "common/mem.h"
#include "common/path.h"
#include "traces/gen.h"
#include "common/cfg.h"
#include "common/cfgkey.h"
#include "common/dh_err.h"
#include "common/rng.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define GEN_MAX_GROUPS_SPEC 1024 /* parts in a group_sizes list */

struct gen_params {
    cfg *c;
    char name[64];
    /* [shape]: the default workload. */
    char model[64];
    uint32_t n_requests, n_layers, k, compress, prompt_len, output_len;
    uint32_t n_group_sizes;
    uint32_t *group_sizes;
    /* [selection]: the latent process. */
    uint32_t sinks, window, warmup, reuse_far_max, fresh_recent_span, substitute_span;
    double step_overlap, heavy_fraction, heavy_leave, heavy_return_mean;
    double reuse_p, reuse_near_p, reuse_near_mean, run_mean, fresh_recent_p;
    /* [groups]: per-group profile specs ("a-b:v, c:v0..v1"); "" = the default. */
    char substitute_spec[512], overlap_spec[512];
    double substitute;
};

/* ---------------------------------------------------------------- params */

/* "1, 4*19, 1" -> sizes. */
static int parse_group_sizes(gen_params *p, const char *v)
{
    uint32_t tmp[GEN_MAX_GROUPS_SPEC], n = 0;
    const char *s = v;
    while (*s) {
        char *end;
        while (*s == ' ') s++;
        long a = strtol(s, &end, 10);
        if (end == s || a <= 0) return dh_err("%s: [shape] group_sizes = '%s': expected positive sizes like '1, 4*19, 1'", cfg_name(p->c), v);
        long rep = 1;
        s = end;
        while (*s == ' ') s++;
        if (*s == '*') {
            s++;
            rep = strtol(s, &end, 10);
            if (end == s || rep <= 0) return dh_err("%s: [shape] group_sizes = '%s': bad repeat count", cfg_name(p->c), v);
            s = end;
        }
        for (long i = 0; i < rep; i++) {
            if (n == GEN_MAX_GROUPS_SPEC) return dh_err("%s: [shape] group_sizes has more than %d groups", cfg_name(p->c), GEN_MAX_GROUPS_SPEC);
            tmp[n++] = (uint32_t)a;
        }
        while (*s == ' ') s++;
        if (*s == ',') s++;
        else if (*s) return dh_err("%s: [shape] group_sizes = '%s': expected ','", cfg_name(p->c), v);
    }
    free(p->group_sizes);
    p->group_sizes = dh_calloc(n, sizeof(uint32_t));
    memcpy(p->group_sizes, tmp, n * sizeof(uint32_t));
    p->n_group_sizes = n;
    return 0;
}

/* Resolve a per-group profile "a-b:v, c:v0..v1" into out[n_groups]; groups
 * not named keep def. A ramp v0..v1 is linear over its range. */
static int resolve_profile(const char *cfgname, const char *key, const char *spec, double def,
                           double lo, double hi, uint32_t n_groups, double *out)
{
    for (uint32_t g = 0; g < n_groups; g++) out[g] = def;
    const char *s = spec;
    while (*s) {
        char *end;
        while (*s == ' ') s++;
        if (!*s) break;
        long a = strtol(s, &end, 10), b;
        if (end == s || a < 0) return dh_err("%s: [groups] %s = '%s': expected 'first-last:value'", cfgname, key, spec);
        s = end;
        b = a;
        if (*s == '-') {
            s++;
            b = strtol(s, &end, 10);
            if (end == s || b < a) return dh_err("%s: [groups] %s = '%s': bad group range", cfgname, key, spec);
            s = end;
        }
        if (*s != ':') return dh_err("%s: [groups] %s = '%s': expected ':' after the group range", cfgname, key, spec);
        s++;
        double v0 = strtod(s, &end), v1;
        if (end == s) return dh_err("%s: [groups] %s = '%s': expected a value", cfgname, key, spec);
        s = end;
        v1 = v0;
        if (s[0] == '.' && s[1] == '.') {
            s += 2;
            v1 = strtod(s, &end);
            if (end == s) return dh_err("%s: [groups] %s = '%s': expected a value after '..'", cfgname, key, spec);
            s = end;
        }
        if (v0 < lo || v0 > hi || v1 < lo || v1 > hi)
            return dh_err("%s: [groups] %s: value outside [%g, %g]", cfgname, key, lo, hi);
        if ((uint64_t)b >= n_groups)
            return dh_err("%s: [groups] %s names group %ld, but the shape has %u groups", cfgname, key, b, n_groups);
        for (long g = a; g <= b; g++)
            out[g] = a == b ? v0 : v0 + (v1 - v0) * (double)(g - a) / (double)(b - a);
        while (*s == ' ') s++;
        if (*s == ',') s++;
        else if (*s) return dh_err("%s: [groups] %s = '%s': expected ','", cfgname, key, spec);
    }
    return 0;
}

/* ---- the schema of a preset (docs/CONFIG.md is printed from it: bin/dhconfig schema) ---- */

static const cfg_key gen_keys[] = {
    CK_ROW("preset", "name", CK_STR, "", 0, 0, NULL, "The preset's name (dhtrace gen --preset NAME).", 0),
    CK_ROW("preset", "description", CK_STR, "", 0, 0, "", "What it reproduces, in words.", 0),
    CK_ROW("shape", "model", CK_STR, "", 0, 0, NULL, "The model the selections are of.", 0),
    CK_ROW("shape", "n_requests", CK_INT, "requests", 1, 1 << 20, NULL, "Requests of the default shape.", 0),
    CK_ROW("shape", "n_layers", CK_INT, "layers", 1, 4096, NULL, "Layers (the sum of group_sizes).", 0),
    CK_ROW("shape", "group_sizes", CK_STR, "", 0, 0, NULL, "Layers per selection group, e.g. 1, 4*19, 1.", 0),
    CK_ROW("shape", "k", CK_INT, "rows", 1, 1 << 24, NULL, "Rows selected per query (top-k).", 0),
    CK_ROW("shape", "compress", CK_INT, "tokens/row", 1, 1 << 16, "1", "Tokens per KV row.", 0),
    CK_ROW("shape", "prompt_len", CK_INT, "tokens", 1, 1L << 30, NULL, "Prompt length of the default shape.", 0),
    CK_ROW("shape", "output_len", CK_INT, "tokens", 0, 1L << 30, NULL, "Output length of the default shape.", 0),
    CK_ROW("selection", "sinks", CK_INT, "rows", 0, 1 << 20, NULL, "The first rows, always selected (attention "
           "sinks).", 0),
    CK_ROW("selection", "window", CK_INT, "rows", 0, 1 << 20, NULL, "The newest rows, always selected.", 0),
    CK_ROW("selection", "warmup", CK_INT, "positions", 0, 1 << 16, NULL, "Burn-in positions before position 0.", 0),
    CK_ROW("selection", "step_overlap", CK_NUM, "", 0, 1, NULL, "Mean step overlap of consecutive selections, "
           "|S_t and S_t-1| / k.", 0),
    CK_ROW("selection", "heavy_fraction", CK_NUM, "", 0, 1, NULL, "Share of the dynamic slots held by heavy hitters.", 0),
    CK_ROW("selection", "heavy_leave", CK_NUM, "1/position", 0, 1, NULL, "Probability a heavy hitter leaves at a "
           "position.", 0),
    CK_ROW("selection", "heavy_return_mean", CK_NUM, "positions", 1, 1e6, NULL, "Mean absence of a heavy hitter.", 0),
    CK_ROW("selection", "reuse_p", CK_NUM, "", 0, 1, NULL, "Probability a leaving volatile row comes back.", 0),
    CK_ROW("selection", "reuse_near_p", CK_NUM, "", 0, 1, NULL, "Probability its reuse distance is near (geometric).",
           0),
    CK_ROW("selection", "reuse_near_mean", CK_NUM, "positions", 1, 1e6, NULL, "Mean of the near reuse distance.", 0),
    CK_ROW("selection", "reuse_far_max", CK_INT, "positions", 1, 1 << 20, NULL, "Upper end of the far (log-uniform) "
           "reuse distance.", 0),
    CK_ROW("selection", "run_mean", CK_NUM, "rows", 1, 1e4, NULL, "Mean length of a run of fresh rows.", 0),
    CK_ROW("selection", "fresh_recent_p", CK_NUM, "", 0, 1, NULL, "Probability fresh rows come from the newest "
           "fresh_recent_span rows.", 0),
    CK_ROW("selection", "fresh_recent_span", CK_INT, "rows", 1, 1L << 30, NULL, "The newest rows fresh ones are drawn "
           "from with fresh_recent_p.", 0),
    CK_ROW("groups", "substitute", CK_NUM, "", 0, 1, NULL, "Probability a group maps a latent row to a nearby one.", 0),
    CK_ROW("groups", "substitute_span", CK_INT, "rows", 1, 1 << 24, NULL, "How near a substitute row is.", 0),
    CK_ROW("groups", "substitute_profile", CK_STR, "", 0, 0, "", "Per-group substitute probabilities (GROUPS:P, ...); "
           "empty: substitute for every group.", 0),
    CK_ROW("groups", "overlap_profile", CK_STR, "", 0, 0, "", "Per-group step overlaps below the latent one (GROUPS:LO..HI, "
           "...); empty: every group keeps it.", 0),
    CK_ROW("targets", "STATISTIC", CK_NUM, "", -1e300, 1e300, "(none)", "A published statistic the tests and the "
           "calibration reproduce from a fresh trace (e.g. lru_miss_2k), and its tolerance; not read by the generator.", 0),
};
const cfg_schema gen_schema = CFG_SCHEMA("traces/presets/NAME.ini", "Trace generator preset", "The calibrated "
    "synthetic generator's parameters (traces/gen.h, traces/README.md).", gen_keys);

/* Keys read through the table: its range and default. */
static int get_u32(cfg *c, const char *sec, const char *key, uint32_t *out)
{
    long v;
    if (cfgk_int(c, &gen_schema, sec, key, &v) < 0) return -1;
    *out = (uint32_t)v;
    return 0;
}

static int get_d(cfg *c, const char *sec, const char *key, double *out)
{
    return cfgk_double(c, &gen_schema, sec, key, out) < 0 ? -1 : 0;
}

/* Read every parameter from p->c (again after a gen_params_set). */
static int params_parse(gen_params *p)
{
    cfg *c = p->c;
    const char *s;
    if (cfgk_string(c, &gen_schema, "preset", "name", &s) < 0) return -1;
    snprintf(p->name, sizeof p->name, "%s", s);
    if (cfgk_string(c, &gen_schema, "preset", "description", &s) < 0) return -1;

    if (cfgk_string(c, &gen_schema, "shape", "model", &s) < 0) return -1;
    snprintf(p->model, sizeof p->model, "%s", s);
    if (get_u32(c, "shape", "n_requests", &p->n_requests) < 0 ||
        get_u32(c, "shape", "n_layers", &p->n_layers) < 0 ||
        get_u32(c, "shape", "k", &p->k) < 0 ||
        get_u32(c, "shape", "compress", &p->compress) < 0 ||
        get_u32(c, "shape", "prompt_len", &p->prompt_len) < 0 ||
        get_u32(c, "shape", "output_len", &p->output_len) < 0)
        return -1;
    if (cfgk_string(c, &gen_schema, "shape", "group_sizes", &s) < 0 || parse_group_sizes(p, s) < 0) return -1;
    uint64_t sum = 0;
    for (uint32_t i = 0; i < p->n_group_sizes; i++) sum += p->group_sizes[i];
    if (sum != p->n_layers)
        return dh_err("%s: [shape] group_sizes add up to %llu layers, but n_layers = %u", cfg_name(c), (unsigned long long)sum, p->n_layers);

    if (get_u32(c, "selection", "sinks", &p->sinks) < 0 ||
        get_u32(c, "selection", "window", &p->window) < 0 ||
        get_u32(c, "selection", "warmup", &p->warmup) < 0 ||
        get_d(c, "selection", "step_overlap", &p->step_overlap) < 0 ||
        get_d(c, "selection", "heavy_fraction", &p->heavy_fraction) < 0 ||
        get_d(c, "selection", "heavy_leave", &p->heavy_leave) < 0 ||
        get_d(c, "selection", "heavy_return_mean", &p->heavy_return_mean) < 0 ||
        get_d(c, "selection", "reuse_p", &p->reuse_p) < 0 ||
        get_d(c, "selection", "reuse_near_p", &p->reuse_near_p) < 0 ||
        get_d(c, "selection", "reuse_near_mean", &p->reuse_near_mean) < 0 ||
        get_u32(c, "selection", "reuse_far_max", &p->reuse_far_max) < 0 ||
        get_d(c, "selection", "run_mean", &p->run_mean) < 0 ||
        get_d(c, "selection", "fresh_recent_p", &p->fresh_recent_p) < 0 ||
        get_u32(c, "selection", "fresh_recent_span", &p->fresh_recent_span) < 0)
        return -1;
    if (p->sinks + p->window >= p->k)
        return dh_err("%s: sinks (%u) + window (%u) leave no dynamic rows of k = %u", cfg_name(c), p->sinks, p->window, p->k);

    if (get_d(c, "groups", "substitute", &p->substitute) < 0 ||
        get_u32(c, "groups", "substitute_span", &p->substitute_span) < 0)
        return -1;
    if (cfgk_string(c, &gen_schema, "groups", "substitute_profile", &s) < 0) return -1;
    snprintf(p->substitute_spec, sizeof p->substitute_spec, "%s", s);
    if (cfgk_string(c, &gen_schema, "groups", "overlap_profile", &s) < 0) return -1;
    snprintf(p->overlap_spec, sizeof p->overlap_spec, "%s", s);

    /* [targets] is read by the tests and the calibration, not the generator. */
    const char *own[] = {"preset", "shape", "selection", "groups"};
    for (size_t i = 0; i < sizeof own / sizeof *own; i++)
        if (cfg_check_unused_section(c, own[i]) < 0) return -1;
    for (size_t i = 0; i < cfg_section_count(c); i++) {
        const char *sec = cfg_section_name(c, i);
        int known = !strcmp(sec, "targets");
        for (size_t j = 0; j < sizeof own / sizeof *own; j++) known |= !strcmp(sec, own[j]);
        if (!known) return dh_err("%s: unknown section [%s]", cfg_name(c), sec);
    }
    /* The volatile churn must be able to absorb the requested overlap. */
    double dyn = (double)(p->k - p->sinks - p->window);
    double heavy_out = p->heavy_leave * floor(p->heavy_fraction * dyn + 0.5);
    double vol_leave = (1.0 - p->step_overlap) * p->k - (p->window ? 1.0 : 0.0) - heavy_out;
    if (vol_leave < 0)
        return dh_err("%s: step_overlap %g is higher than heavy_leave and the window allow", cfg_name(c), p->step_overlap);
    if (vol_leave > dyn * (1.0 - p->heavy_fraction))
        return dh_err("%s: step_overlap %g needs more churn than the volatile rows provide", cfg_name(c), p->step_overlap);
    return 0;
}

static int find_preset(const char *preset, char *path, size_t cap)
{
    if (strchr(preset, '/') || strstr(preset, ".ini")) {
        if (snprintf(path, cap, "%s", preset) >= (int)cap) return dh_err("preset path '%s' is too long", preset);
        return 0;
    }
    char rel[512];
    if (snprintf(rel, sizeof rel, "traces/presets/%s.ini", preset) >= (int)sizeof rel)
        return dh_err("preset name '%s' is too long", preset);
    if (dh_path_find(rel, path, cap) < 0) return -1;
    if (access(path, R_OK) == 0) return 0;
    const char *root = getenv("DHSPARSE_ROOT");
    return dh_err("preset '%s': no traces/presets/%s.ini here%s", preset, preset,
                  root ? " nor under DHSPARSE_ROOT" : " (set DHSPARSE_ROOT to the source tree)");
}

int gen_params_load(const char *preset, gen_params **out)
{
    char path[4096];
    *out = NULL;
    if (find_preset(preset, path, sizeof path) < 0) return -1;
    gen_params *p = dh_calloc(1, sizeof *p);
    if (cfg_load(path, &p->c) < 0) { free(p); return -1; }
    if (params_parse(p) < 0) { gen_params_free(p); return -1; }
    *out = p;
    return 0;
}

int gen_params_set(gen_params *p, const char *assignment)
{
    if (cfg_set_arg(p->c, assignment) < 0) return -1;
    return params_parse(p);
}

void gen_params_free(gen_params *p)
{
    if (!p) return;
    cfg_free(p->c);
    free(p->group_sizes);
    free(p);
}

const char *gen_params_name(const gen_params *p) { return p->name; }
char *gen_params_to_string(const gen_params *p) { return cfg_to_string(p->c); }

int gen_params_target(const gen_params *p, const char *key, double *out)
{
    return cfgk_double_or(p->c, &gen_schema, "targets", key, out, CFG_REQUIRED) < 0 ? -1 : 0;
}

int gen_params_default_shape(const gen_params *p, trace_shape *sh)
{
    memset(sh, 0, sizeof *sh);
    snprintf(sh->model, sizeof sh->model, "%s", p->model);
    sh->n_requests = p->n_requests;
    sh->n_layers = p->n_layers;
    sh->n_groups = p->n_group_sizes;
    sh->layer_group = dh_calloc(p->n_layers, sizeof(uint32_t));
    sh->group_k = dh_calloc(sh->n_groups, sizeof(uint32_t));
    sh->group_compress = dh_calloc(sh->n_groups, sizeof(uint32_t));
    sh->prompt_len = dh_calloc(sh->n_requests, sizeof(uint32_t));
    sh->output_len = dh_calloc(sh->n_requests, sizeof(uint32_t));
    uint32_t l = 0;
    for (uint32_t g = 0; g < sh->n_groups; g++) {
        for (uint32_t i = 0; i < p->group_sizes[g]; i++) sh->layer_group[l++] = g;
        sh->group_k[g] = p->k;
        sh->group_compress[g] = p->compress;
    }
    for (uint32_t r = 0; r < sh->n_requests; r++) {
        sh->prompt_len[r] = p->prompt_len;
        sh->output_len[r] = p->output_len;
    }
    return trace_shape_validate(sh);
}

/* ---------------------------------------------------------------- source */

/* Distributions are sampled by inverse-CDF tables of GEN_TABLE equiprobable
 * quantiles (one 32-bit draw per sample, no libm in the hot loop): the
 * sampled distribution is the parameterised one quantised to 2^-16 of
 * probability mass. */
#define GEN_TABLE_BITS 16
#define GEN_TABLE (1u << GEN_TABLE_BITS)

/* Memory the latent logs of one source may hold before sharing gives way to
 * regeneration (gen_source_set_share_limit). A request of the default
 * glm51-longbench shape needs about 6 MB for 1,000 positions when its groups
 * are read one after the other, a few KB when they are read in lockstep. */
#define GEN_SHARE_LIMIT_DEFAULT ((size_t)512 << 20)

typedef struct gen_share gen_share;

typedef struct {
    gen_params prm;        /* a copy of the scalar parameters (no cfg) */
    uint32_t *vol_return;  /* [GEN_TABLE] reuse distance of a leaving volatile row, 0 = never returns */
    uint32_t *heavy_return;/* [GEN_TABLE] absence of a leaving heavy hitter */
    uint32_t *run_len;     /* [GEN_TABLE] length of a run of fresh rows */
    double *substitute;    /* [n_groups] */
    double *overlap;       /* [n_groups] target step overlap of each group */
    /* Latent processes: one per distinct (k, compress) of the shape's groups. */
    uint32_t n_latents;
    uint32_t *group_latent;   /* [n_groups] the group's latent process */
    uint32_t *group_member;   /* [n_groups] its rank among the groups of that process */
    uint32_t *latent_members; /* [n_latents] groups per latent process */
    uint32_t *latent_group;   /* [n_latents] its first group (for row counts) */
    /* Shared latent logs, one slot per (request, latent process); mu guards them. */
    pthread_mutex_t mu;
    gen_share **share;        /* [n_requests * n_latents] */
    uint8_t *share_state;     /* [n_requests * n_latents] SHARE_* */
    size_t n_slots;           /* n_requests * n_latents */
    size_t share_bytes, share_limit;
} gen_src;

enum { SHARE_FRESH = 0, SHARE_RETIRED, SHARE_EVICTED };

typedef struct {
    uint32_t *v;
    uint32_t n, cap;
} u32vec;

static inline void vec_push(u32vec *a, uint32_t x)
{
    if (a->n == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 64;
        a->v = realloc(a->v, a->cap * sizeof(uint32_t));
        if (!a->v) abort();
    }
    a->v[a->n++] = x;
}

static inline int bit_get(const uint64_t *b, uint32_t i) { return (int)((b[i >> 6] >> (i & 63)) & 1); }
static inline void bit_set(uint64_t *b, uint32_t i) { b[i >> 6] |= 1ull << (i & 63); }
static inline void bit_clr(uint64_t *b, uint32_t i) { b[i >> 6] &= ~(1ull << (i & 63)); }

static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in (0, 1) from one 32-bit draw. */
static inline double u01(rng_stream *r) { return ((double)rng_u32(r) + 0.5) * (1.0 / 4294967296.0); }

/* Stochastic rounding: an integer with expectation x, from one draw. */
static inline uint32_t sround(rng_stream *r, double x)
{
    double f = floor(x);
    return (uint32_t)f + (u01(r) < x - f);
}

/* Quantile u of a geometric distribution on {1, 2, ...} of the given mean. */
static uint32_t geom_quantile(double u, double mean)
{
    if (mean <= 1) return 1;
    double d = 1.0 + floor(log1p(-u) / log1p(-1.0 / mean));
    return d > 4e9 ? 4000000000u : (uint32_t)d;
}

static inline uint32_t table_draw(rng_stream *r, const uint32_t *table) { return table[rng_u32(r) >> (32 - GEN_TABLE_BITS)]; }

static void build_tables(gen_src *gs)
{
    const gen_params *p = &gs->prm;
    gs->vol_return = dh_calloc(GEN_TABLE, sizeof(uint32_t));
    gs->heavy_return = dh_calloc(GEN_TABLE, sizeof(uint32_t));
    gs->run_len = dh_calloc(GEN_TABLE, sizeof(uint32_t));
    double far_log = log((double)p->reuse_far_max + 1.0);
    for (uint32_t i = 0; i < GEN_TABLE; i++) {
        double u = (i + 0.5) / GEN_TABLE;
        gs->heavy_return[i] = geom_quantile(u, p->heavy_return_mean);
        gs->run_len[i] = geom_quantile(u, p->run_mean);
        /* The volatile mixture: never (1 - reuse_p), near (geometric), far (log-uniform). */
        uint32_t d = 0;
        if (u < p->reuse_p) {
            double v = u / p->reuse_p;
            if (v < p->reuse_near_p) d = geom_quantile(v / p->reuse_near_p, p->reuse_near_mean);
            else d = (uint32_t)floor(exp((v - p->reuse_near_p) / (1.0 - p->reuse_near_p) * far_log));
            if (d < 1) d = 1;
        }
        gs->vol_return[i] = d;
    }
}

/* ---- the latent process: records of what changed at each step.
 *
 * Record 0 is the initial fill; record i >= 1 is latent step i - 1 (steps
 * 0 .. warmup-1 are the burn-in at the context of position 0, step
 * warmup + pos - 1 makes position pos >= 1). A record lists, in the order
 * they happened, the removals of population members (by their index in the
 * dense array, which is all a group needs to find the member in its own copy)
 * and the additions (by row), plus the context rows of the step. A group
 * replays the record against its own state; the latent process never looks
 * at a group. */

#define EV_TAKE 0x80000000u  /* removal of member ARG; else addition of row ARG */
#define EV_HEAVY 0x40000000u /* the heavy-hitter population; else the volatile one */
#define EV_ARG 0x3FFFFFFFu
#define GEN_MAX_ROWS EV_ARG  /* rows must fit in ARG */

typedef struct {
    uint32_t nrows, n_ev, cap;
    uint32_t *ev;
} lat_rec;

typedef struct {
    const gen_src *src;
    const gen_params *p;
    const trace_shape *sh;
    uint32_t req, group;     /* group: any group of this process (row counts) */
    uint32_t k, rows0;
    rng_stream rng;
    uint64_t *occ;           /* [max_rows bits] row selected (sinks, window or dynamic) */
    uint64_t *mark;          /* [max_rows bits] row entered or left at this step */
    u32vec marked;           /* the rows set in mark */
    uint32_t *heavy, *vol;   /* dense arrays of the populations */
    uint32_t n_heavy, n_vol, heavy_target;
    uint32_t nrows, wlo;     /* context rows; first window row */
    uint64_t step;           /* latent step counter (burn-in included) */
    u32vec *cal;             /* calendar of re-references: [horizon] buckets of row << 1 | heavy */
    uint32_t horizon;
    double vol_churn_mean;   /* volatile plus heavy leavers per position */
    uint64_t produced;       /* records produced so far */
    lat_rec *rec;            /* the record being written */
    size_t bytes;            /* memory held, for the share limit */
} lat_proc;

static inline void rec_push(lat_rec *r, uint32_t ev)
{
    if (r->n_ev == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 1024;
        r->ev = realloc(r->ev, (size_t)r->cap * sizeof *r->ev);
        if (!r->ev) abort();
    }
    r->ev[r->n_ev++] = ev;
}

static inline void lat_mark(lat_proc *L, uint32_t x)
{
    if (!bit_get(L->mark, x)) { bit_set(L->mark, x); vec_push(&L->marked, x); }
}

static inline void lat_add(lat_proc *L, uint32_t x, int heavy)
{
    if (heavy) L->heavy[L->n_heavy++] = x;
    else L->vol[L->n_vol++] = x;
    bit_set(L->occ, x);
    lat_mark(L, x);
    rec_push(L->rec, (heavy ? EV_HEAVY : 0) | x);
}

/* Remove the population member at index i (swap with the last). */
static inline uint32_t lat_take(lat_proc *L, int heavy, uint32_t i)
{
    uint32_t *a = heavy ? L->heavy : L->vol;
    uint32_t *n = heavy ? &L->n_heavy : &L->n_vol;
    uint32_t x = a[i];
    a[i] = a[--*n];
    bit_clr(L->occ, x);
    lat_mark(L, x);
    rec_push(L->rec, EV_TAKE | (heavy ? EV_HEAVY : 0) | i);
    return x;
}

static inline void lat_schedule(lat_proc *L, uint32_t x, uint32_t dist, int heavy)
{
    if (dist >= L->horizon) return; /* beyond the calendar: never returns */
    vec_push(&L->cal[(L->step + dist) & (L->horizon - 1)], x << 1 | (uint32_t)heavy);
}

static void lat_vol_leave(lat_proc *L)
{
    uint32_t x = lat_take(L, 0, rng_below(&L->rng, L->n_vol));
    uint32_t d = table_draw(&L->rng, L->src->vol_return);
    if (d) lat_schedule(L, x, d, 0);
}

static uint32_t lat_target(const lat_proc *L)
{
    uint32_t keff = L->nrows < L->k ? L->nrows : L->k;
    return keff - L->p->sinks - L->p->window;
}

/* Fill the dynamic part up to its target with fresh runs of rows. */
static void lat_fill(lat_proc *L)
{
    const gen_params *p = L->p;
    uint32_t target = lat_target(L), lo = p->sinks, span = L->wlo - lo;
    /* In a context barely larger than k the only free rows may be those that
     * just left; after one fruitless sweep they are taken too. */
    int take_marked = 0;
    while (L->n_heavy + L->n_vol < target) {
        uint32_t before = L->n_heavy + L->n_vol;
        uint32_t start;
        if (u01(&L->rng) < p->fresh_recent_p) {
            uint32_t w = p->fresh_recent_span < span ? p->fresh_recent_span : span;
            start = L->wlo - 1 - rng_below(&L->rng, w);
        } else {
            start = lo + rng_below(&L->rng, span);
        }
        uint32_t len = table_draw(&L->rng, L->src->run_len);
        /* A run walks forward over selected rows; in a nearly full region
         * that is a scan, bounded by the region (short contexts only). */
        uint32_t x = start;
        for (uint32_t walked = 0; len && walked < span && L->n_heavy + L->n_vol < target; walked++) {
            /* A row that left at this step stays out: re-adding it would be no change. */
            if (!bit_get(L->occ, x) && (take_marked || !bit_get(L->mark, x))) {
                lat_add(L, x, L->n_heavy < L->heavy_target);
                len--;
            }
            if (++x == L->wlo) x = lo;
        }
        if (L->n_heavy + L->n_vol == before) take_marked = 1;
    }
}

/* Advance the window to nrows rows. */
static void lat_slide(lat_proc *L, uint32_t nrows)
{
    uint32_t wlo = nrows - L->p->window;
    for (uint32_t x = L->wlo; x < wlo; x++) bit_clr(L->occ, x);
    for (uint32_t x = L->nrows > wlo ? L->nrows : wlo; x < nrows; x++) bit_set(L->occ, x);
    L->nrows = nrows;
    L->wlo = wlo;
}

/* One step of the latent process. */
static void lat_step(lat_proc *L, uint32_t nrows)
{
    const gen_params *p = L->p;
    if (nrows != L->nrows) lat_slide(L, nrows);
    /* Heavy hitters leave briefly and always come back. */
    uint32_t nh = sround(&L->rng, p->heavy_leave * L->n_heavy);
    for (uint32_t i = 0; i < nh && L->n_heavy; i++) {
        uint32_t x = lat_take(L, 1, rng_below(&L->rng, L->n_heavy));
        lat_schedule(L, x, table_draw(&L->rng, L->src->heavy_return), 1);
    }
    /* The volatile rows make up the rest of the step's churn, counted with
     * the heavy leavers actually drawn so the overlap stays on target. */
    double vmean = L->vol_churn_mean - nh;
    uint32_t nv = vmean > 0 ? sround(&L->rng, vmean) : 0;
    for (uint32_t i = 0; i < nv && L->n_vol; i++) lat_vol_leave(L);
    /* Re-references due now. */
    u32vec *b = &L->cal[L->step & (L->horizon - 1)];
    for (uint32_t i = 0; i < b->n; i++) {
        uint32_t x = b->v[i] >> 1;
        if (x < L->wlo && !bit_get(L->occ, x) && !bit_get(L->mark, x)) lat_add(L, x, (b->v[i] & 1) && L->n_heavy < L->heavy_target);
    }
    b->n = 0;
    uint32_t target = lat_target(L);
    while (L->n_heavy + L->n_vol > target) {
        if (L->n_vol) lat_vol_leave(L);
        else lat_schedule(L, lat_take(L, 1, rng_below(&L->rng, L->n_heavy)), table_draw(&L->rng, L->src->heavy_return), 1);
    }
    lat_fill(L);
    /* Marks last one step: the rows of the initial fill count as entering at step 0. */
    for (uint32_t i = 0; i < L->marked.n; i++) bit_clr(L->mark, L->marked.v[i]);
    L->marked.n = 0;
    L->step++;
}

static lat_proc *lat_new(const gen_src *gs, const trace_shape *sh, uint64_t seed, uint32_t req, uint32_t latent)
{
    const gen_params *p = &gs->prm;
    lat_proc *L = dh_calloc(1, sizeof *L);
    uint32_t g = gs->latent_group[latent];
    L->src = gs;
    L->p = p;
    L->sh = sh;
    L->req = req;
    L->group = g;
    L->k = sh->group_k[g];
    L->rows0 = sel_rows_at(sh, req, g, 0);
    uint32_t out_len = sh->output_len[req];
    uint32_t max_rows = out_len ? sel_rows_at(sh, req, g, out_len - 1) : L->rows0;
    uint32_t latent_id = 0x80000000u | (uint32_t)(mix64(((uint64_t)L->k << 32) | sh->group_compress[g]) & 0x7FFFFFFF);
    rng_init(&L->rng, seed, req, latent_id, 1);
    size_t words = (max_rows + 63) / 64;
    L->occ = dh_calloc(words, 8);
    L->mark = dh_calloc(words, 8);
    L->heavy = dh_calloc(L->k, sizeof(uint32_t));
    L->vol = dh_calloc(L->k, sizeof(uint32_t));
    L->horizon = 1;
    while (L->horizon <= p->reuse_far_max) L->horizon <<= 1;
    L->cal = dh_calloc(L->horizon, sizeof(u32vec));
    uint32_t dyn = L->k - p->sinks - p->window;
    L->heavy_target = (uint32_t)floor(p->heavy_fraction * dyn + 0.5);
    L->vol_churn_mean = (1.0 - p->step_overlap) * L->k - (p->window ? 1.0 : 0.0);
    L->bytes = sizeof *L + 2 * words * 8 + 2 * (size_t)L->k * 4 + L->horizon * sizeof(u32vec);
    return L;
}

static void lat_free(lat_proc *L)
{
    if (!L) return;
    for (uint32_t i = 0; i < L->horizon; i++) free(L->cal[i].v);
    free(L->cal);
    free(L->occ); free(L->mark); free(L->marked.v);
    free(L->heavy); free(L->vol);
    free(L);
}

/* Produce the next record into rec. */
static void lat_produce(lat_proc *L, lat_rec *rec)
{
    const gen_params *p = L->p;
    rec->n_ev = 0;
    L->rec = rec;
    if (L->produced == 0) {
        /* Initial state: sinks, window, and a full dynamic part. */
        L->nrows = L->rows0;
        L->wlo = L->rows0 - p->window;
        for (uint32_t x = 0; x < p->sinks; x++) bit_set(L->occ, x);
        for (uint32_t x = L->wlo; x < L->rows0; x++) bit_set(L->occ, x);
        lat_fill(L);
    } else {
        uint64_t i = L->produced;
        uint32_t pos = i <= p->warmup ? 0 : (uint32_t)(i - p->warmup);
        lat_step(L, sel_rows_at(L->sh, L->req, L->group, pos));
    }
    rec->nrows = L->nrows;
    L->rec = NULL;
    L->produced++;
}

/* ---- sharing one latent process between the groups of a request.
 *
 * The first group to need a record produces it into the share's log; the
 * others replay it. Records are dropped once every group of the process has
 * replayed them (a group not yet opened holds the whole log, so groups read
 * one after the other share it too). A group that arrives after records were
 * dropped, or when the log would pass the source's limit, regenerates the
 * latent process on its own: the content is the same either way. */

enum { M_UNOPENED = 0, M_ATTACHED, M_DONE };

struct gen_share {
    lat_proc *proc;
    lat_rec *ring;       /* [ring_cap] record i at ring[i & (ring_cap - 1)] */
    uint32_t ring_cap;
    uint64_t base, end;  /* records held: [base, end) */
    uint32_t n_members, n_attached;
    uint64_t *at;        /* [members] next record the member needs */
    uint8_t *state;      /* [members] M_* */
    size_t bytes;
};

static void share_free(gen_src *gs, gen_share *sh)
{
    if (!sh) return;
    gs->share_bytes -= sh->bytes;
    lat_free(sh->proc);
    for (uint32_t i = 0; i < sh->ring_cap; i++) free(sh->ring[i].ev);
    free(sh->ring); free(sh->at); free(sh->state);
    free(sh);
}

/* Drop the records every member has replayed; free the share when all are done. */
static void share_trim(gen_src *gs, uint32_t slot)
{
    gen_share *sh = gs->share[slot];
    uint64_t lo = sh->end;
    int live = 0;
    for (uint32_t m = 0; m < sh->n_members; m++) {
        if (sh->state[m] == M_DONE) continue;
        live = 1;
        uint64_t a = sh->state[m] == M_UNOPENED ? 0 : sh->at[m];
        if (a < lo) lo = a;
    }
    if (!live) {
        share_free(gs, sh);
        gs->share[slot] = NULL;
        gs->share_state[slot] = SHARE_RETIRED;
        return;
    }
    if (lo > sh->base) sh->base = lo;
}

/* Free shares no open stream reads (they only wait for groups not yet
 * opened); those groups will regenerate. */
static void share_evict_idle(gen_src *gs)
{
    for (size_t i = 0; i < gs->n_slots; i++) {
        gen_share *sh = gs->share[i];
        if (!sh || sh->n_attached) continue;
        share_free(gs, sh);
        gs->share[i] = NULL;
        gs->share_state[i] = SHARE_EVICTED;
    }
}

/* ---- group view. */

/* One latent population as one group sees it, in the process's order: the
 * group's image of each member, and (only for a group that redraws images)
 * the latent row and the step + 1 at which it entered or was redrawn. */
typedef struct {
    uint32_t *img, *x, *mark;
    uint32_t n;
} gen_pop;

typedef struct {
    sel_stream_head head;
    gen_src *src;
    const gen_params *p;
    const trace_shape *sh;
    uint32_t req, group, latent, member, k, out_len, max_rows;
    uint32_t pos;          /* next position to emit */
    uint32_t keyframe_interval;
    /* Where the latent records come from: a share, or a process of its own. */
    gen_share *share;
    uint32_t slot;         /* the share's slot in src->share */
    lat_proc *own;
    lat_rec own_rec;
    uint64_t next_rec;     /* next record to replay */
    uint64_t seed;
    gen_pop heavy, vol;
    uint32_t nrows, wlo;
    uint64_t step;         /* latent steps replayed */
    rng_stream redraw_rng; /* shared by the groups of the latent process, seeked per step */
    uint64_t grp_key;
    uint32_t subst_threshold; /* substitute probability as a 32-bit threshold */
    double remap_rate;        /* persisting rows redrawn per position, per dynamic row */
    /* The group's selection, 64 rows per word, each word next to its value
     * when the position began (sel[2w], sel[2w + 1]); the latter is valid
     * only for words marked in dirty (one bit per word) while a position is
     * built, so a change costs one cache line and the delta is read off the
     * dirty words in row order. */
    uint64_t *sel, *dirty;
    uint32_t n_sel;
    int tracking;
    uint32_t *added, *removed, *full;
    uint32_t n_added, n_removed;
} gen_stream;

static inline int sel_get(const gen_stream *s, uint32_t y) { return (int)((s->sel[2 * (y >> 6)] >> (y & 63)) & 1); }

/* Every change of the group's selection goes through here. While a position
 * is built (tracking) the first change of a word saves its old value; done
 * without a branch, since which change comes first is unpredictable. */
static inline __attribute__((always_inline)) void grp_flip_t(gen_stream *s, uint32_t y, int tracking)
{
    uint32_t w = y >> 6;
    uint64_t cur = s->sel[2 * w];
    if (tracking) {
        uint64_t *dw = &s->dirty[w >> 6];
        uint64_t keep = -((*dw >> (w & 63)) & 1);
        s->sel[2 * w + 1] = (s->sel[2 * w + 1] & keep) | (cur & ~keep);
        *dw |= 1ull << (w & 63);
    }
    s->sel[2 * w] = cur ^ (1ull << (y & 63));
}

static inline void grp_flip(gen_stream *s, uint32_t y, int on)
{
    if (s->tracking) grp_flip_t(s, y, 1); else grp_flip_t(s, y, 0);
    s->n_sel += on ? 1 : (uint32_t)-1;
}

/* Was row y selected when this position began? (Only asked of rows not selected now.) */
static inline int was_selected(const gen_stream *s, uint32_t y)
{
    uint32_t w = y >> 6;
    return bit_get(s->dirty, w) && ((s->sel[2 * w + 1] >> (y & 63)) & 1);
}

/* A free row near `from` in the dynamic region [sinks, wlo), by linear
 * probing. Rows that were selected when this position began are skipped
 * while a position is being built (taking one would cancel its removal and
 * make no change); if only such rows are free they are taken. */
static uint32_t grp_probe(gen_stream *s, int64_t from)
{
    uint32_t lo = s->p->sinks, span = s->wlo - lo;
    int64_t y = from - lo;
    y %= span;
    if (y < 0) y += span;
    uint32_t start = lo + (uint32_t)y;
    for (int pass = s->tracking ? 0 : 1; pass < 2; pass++) {
        uint32_t x = start;
        for (uint32_t i = 0; i < span; i++) {
            if (!sel_get(s, x) && (pass || !was_selected(s, x))) return x;
            if (++x == s->wlo) x = lo;
        }
    }
    DH_BUG_ON(1); /* the caller guarantees a free row */
    return 0;
}

static inline int64_t subst_offset(const gen_stream *s, uint64_t h)
{
    uint32_t span = s->p->substitute_span;
    return (int64_t)((h >> 32) % (2ull * span + 1)) - (int64_t)span;
}

/* The image of a latent row entering the selection. */
static inline __attribute__((always_inline)) uint32_t grp_add_dyn_t(gen_stream *s, uint32_t x, int tracking)
{
    uint64_t h = mix64(s->grp_key ^ x);
    uint32_t y = x;
    if ((uint32_t)h < s->subst_threshold || sel_get(s, x))
        y = grp_probe(s, (int64_t)x + subst_offset(s, h) + ((uint32_t)h < s->subst_threshold ? 0 : 1));
    grp_flip_t(s, y, tracking);
    s->n_sel++;
    return y;
}

static void grp_slide(gen_stream *s, uint32_t nrows)
{
    uint32_t wlo = nrows - s->p->window;
    for (uint32_t x = s->wlo; x < wlo; x++) grp_flip(s, x, 0);
    for (uint32_t x = s->nrows > wlo ? s->nrows : wlo; x < nrows; x++) grp_flip(s, x, 1);
    s->nrows = nrows;
    s->wlo = wlo;
}

/* The record's events in order; returns the rows that entered. With
 * prefetch, rows a few events ahead are prefetched: in lockstep many groups
 * take turns and their selections are not in cache. */
static inline __attribute__((always_inline)) uint32_t grp_events_t(gen_stream *s, const lat_rec *r, uint32_t mark,
                                                                   int redraws, int tracking, int prefetch)
{
    const uint32_t *ev = r->ev;
    uint32_t n_ev = r->n_ev, entered = 0;
    for (uint32_t e = 0; e < n_ev; e++) {
        /* Two stages for a removal: its image's slot, then the image's word. */
        if (prefetch && e + 16 < n_ev) {
            uint32_t f = ev[e + 16];
            if (f & EV_TAKE) __builtin_prefetch(&(f & EV_HEAVY ? s->heavy.img : s->vol.img)[f & EV_ARG]);
            else __builtin_prefetch(&s->sel[2 * ((f & EV_ARG) >> 6)]);
        }
        if (prefetch && e + 8 < n_ev) {
            uint32_t f = ev[e + 8];
            if (f & EV_TAKE) {
                const gen_pop *pf = f & EV_HEAVY ? &s->heavy : &s->vol;
                uint32_t i = f & EV_ARG;
                /* The slot may have moved by then; a stale hint costs nothing. */
                if (i < pf->n) __builtin_prefetch(&s->sel[2 * (pf->img[i] >> 6)], 1);
            }
        }
        uint32_t v = ev[e];
        gen_pop *a = v & EV_HEAVY ? &s->heavy : &s->vol;
        if (v & EV_TAKE) {
            uint32_t i = v & EV_ARG, y = a->img[i], last = --a->n;
            a->img[i] = a->img[last];
            if (redraws) { a->x[i] = a->x[last]; a->mark[i] = a->mark[last]; }
            grp_flip_t(s, y, tracking);
            s->n_sel--;
        } else {
            uint32_t x = v & EV_ARG, i = a->n++;
            a->img[i] = grp_add_dyn_t(s, x, tracking);
            if (redraws) { a->x[i] = x; a->mark[i] = mark; }
            entered++;
        }
    }
    return entered;
}

/* Apply record rec_index (see lat_rec) to the group. */
static void grp_replay(gen_stream *s, const lat_rec *r, uint64_t rec_index)
{
    const gen_params *p = s->p;
    uint32_t mark = (uint32_t)s->step + 1, entered = 0;
    int redraws = s->remap_rate > 0;
    if (rec_index == 0) {
        s->nrows = r->nrows;
        s->wlo = r->nrows - p->window;
        for (uint32_t x = 0; x < p->sinks; x++) grp_flip(s, x, 1);
        for (uint32_t x = s->wlo; x < r->nrows; x++) grp_flip(s, x, 1);
    } else if (r->nrows != s->nrows) {
        grp_slide(s, r->nrows);
    }
    /* Prefetch only when this thread last replayed another stream: then this
     * one's view is likely out of cache (streams read in lockstep); reading
     * one stream on, it is in cache and the hints only cost. */
    static _Thread_local const gen_stream *last_replayed;
    int cold = last_replayed != s;
    last_replayed = s;
    if (s->tracking) entered = cold ? grp_events_t(s, r, mark, redraws, 1, 1) : grp_events_t(s, r, mark, redraws, 1, 0);
    else entered = cold ? grp_events_t(s, r, mark, redraws, 0, 1) : grp_events_t(s, r, mark, redraws, 0, 0);
    if (rec_index == 0) return;
    /* Group redraws: this group keeps fewer rows than the latent process, so
     * it gives `remap_rate` of the dynamic rows that persisted a new image.
     * The candidates and their new images come from a stream shared by all
     * groups of the latent process (seeked to the step), and each group takes
     * a prefix of it: a group with a lower overlap redraws a superset of the
     * rows of a group with a higher one, which keeps adjacent groups alike.
     * Distinct persisting rows are drawn by rejection (a row that entered or
     * was redrawn at this step is marked). */
    uint32_t ndyn = s->heavy.n + s->vol.n;
    if (redraws && ndyn > entered) {
        rng_seek(&s->redraw_rng, (uint32_t)s->step);
        uint32_t persisting = ndyn - entered;
        double want = s->remap_rate * (double)ndyn;
        uint32_t n = (uint32_t)floor(want), tries = 0;
        double frac = want - n;
        /* The fractional part is drawn first so every group consumes the shared stream alike. */
        if (u01(&s->redraw_rng) < frac) n++;
        if (n > persisting) n = persisting;
        for (uint32_t i = 0; i < n && tries < 8 * n + 64; tries++) {
            uint32_t j = rng_below(&s->redraw_rng, ndyn);
            uint32_t off = rng_below(&s->redraw_rng, 2 * p->substitute_span + 1);
            gen_pop *a = j < s->heavy.n ? &s->heavy : &s->vol;
            if (j >= s->heavy.n) j -= s->heavy.n;
            if (a->mark[j] == mark) continue;
            a->mark[j] = mark;
            grp_flip(s, a->img[j], 0);
            a->img[j] = grp_probe(s, (int64_t)a->x[j] + (int64_t)off - p->substitute_span);
            grp_flip(s, a->img[j], 1);
            i++;
        }
    }
    s->step++;
}

/* Leave the share and regenerate the latent process alone, up to the next
 * record this stream needs. Called with src->mu held. */
static void stream_go_private(gen_stream *s)
{
    gen_src *gs = s->src;
    if (s->share) {
        gen_share *sh = s->share;
        sh->state[s->member] = M_DONE;
        sh->n_attached--;
        s->share = NULL;
        share_trim(gs, s->slot);
    }
    s->own = lat_new(gs, s->sh, s->seed, s->req, s->latent);
    while (s->own->produced < s->next_rec) lat_produce(s->own, &s->own_rec);
}

/* The next record for this stream. A shared record's events stay valid
 * while this member has not passed it (the log keeps it); the record itself
 * is copied since the log may be reallocated by another stream. */
static lat_rec stream_record(gen_stream *s)
{
    if (s->own) {
        lat_produce(s->own, &s->own_rec);
        return s->own_rec;
    }
    gen_src *gs = s->src;
    pthread_mutex_lock(&gs->mu);
    gen_share *sh = s->share;
    /* Records before next_rec are replayed: let them go. */
    sh->at[s->member] = s->next_rec;
    share_trim(gs, s->slot);
    if (s->next_rec == sh->end) {
        if (sh->end - sh->base == sh->ring_cap) {
            /* The log is full: doubling it must stay within the limit. */
            if (gs->share_bytes + sh->bytes > gs->share_limit) share_evict_idle(gs);
            if (gs->share_bytes + sh->bytes > gs->share_limit) {
                stream_go_private(s);
                pthread_mutex_unlock(&gs->mu);
                lat_produce(s->own, &s->own_rec);
                return s->own_rec;
            }
            uint32_t cap = sh->ring_cap ? 2 * sh->ring_cap : 4;
            lat_rec *ring = dh_calloc(cap, sizeof *ring);
            /* The log is full, so every old slot holds a record (and its buffer). */
            for (uint64_t i = sh->base; i < sh->end; i++) ring[i & (cap - 1)] = sh->ring[i & (sh->ring_cap - 1)];
            free(sh->ring);
            sh->ring = ring;
            size_t add = (size_t)(cap - sh->ring_cap) * sizeof *ring;
            sh->ring_cap = cap;
            sh->bytes += add;
            gs->share_bytes += add;
        }
        lat_rec *r = &sh->ring[sh->end & (sh->ring_cap - 1)];
        size_t before = (size_t)r->cap * 4;
        lat_produce(sh->proc, r);
        size_t grown = (size_t)r->cap * 4 - before;
        sh->bytes += grown;
        gs->share_bytes += grown;
        sh->end++;
    }
    lat_rec r = sh->ring[s->next_rec & (sh->ring_cap - 1)];
    pthread_mutex_unlock(&gs->mu);
    return r;
}

/* Replay records until the group is at record `upto` (exclusive). */
static void stream_advance(gen_stream *s, uint64_t upto)
{
    while (s->next_rec < upto) {
        lat_rec r = stream_record(s);
        grp_replay(s, &r, s->next_rec);
        s->next_rec++;
    }
}

static uint32_t collect_full(const gen_stream *s, uint32_t *out)
{
    uint32_t n = 0, words = (s->nrows + 63) / 64;
    for (uint32_t w = 0; w < words; w++)
        for (uint64_t b = s->sel[2 * w]; b; b &= b - 1) out[n++] = w * 64 + (uint32_t)__builtin_ctzll(b);
    return n;
}

/* The net change of the position, in ascending row order: a row removed and
 * re-added within the position is no change. Walks only the dirty words. */
static void collect_delta(gen_stream *s)
{
    uint32_t na = 0, nr = 0, dwords = (s->nrows + 4095) / 4096;
    for (uint32_t dw = 0; dw < dwords; dw++) {
        for (uint64_t db = s->dirty[dw]; db; db &= db - 1) {
            uint32_t w = dw * 64 + (uint32_t)__builtin_ctzll(db);
            uint64_t now = s->sel[2 * w], before = s->sel[2 * w + 1];
            uint64_t a = now & ~before, b = before & ~now;
            /* Most words hold at most one added and one removed row: write the
             * first unconditionally (counted only if it exists; the arrays have
             * room for one more), loop only for the rest. */
            s->added[na] = w * 64 + (uint32_t)__builtin_ctzll(a | 1ull << 63);
            na += a != 0;
            s->removed[nr] = w * 64 + (uint32_t)__builtin_ctzll(b | 1ull << 63);
            nr += b != 0;
            for (a &= a - 1; a; a &= a - 1) s->added[na++] = w * 64 + (uint32_t)__builtin_ctzll(a);
            for (b &= b - 1; b; b &= b - 1) s->removed[nr++] = w * 64 + (uint32_t)__builtin_ctzll(b);
        }
        s->dirty[dw] = 0;
    }
    s->n_added = na;
    s->n_removed = nr;
}

static int gen_open(sel_source *src, uint32_t req, uint32_t group, sel_stream **out);
static int gen_next(sel_stream *st, sel_delta *d);
static void gen_close(sel_stream *st);
static void gen_free(sel_source *src);
static const sel_source_ops gen_ops = {gen_open, gen_next, gen_close, gen_free};

/* Opening is cheap: the group's state is allocated (O(k) plus three bitsets
 * over the context) and joined to its request's share; the burn-in runs at
 * the first sel_next. */
static int gen_open(sel_source *src, uint32_t req, uint32_t group, sel_stream **out)
{
    gen_src *gs = src->impl;
    const trace_shape *sh = &src->meta.shape;
    const gen_params *p = &gs->prm;
    *out = NULL;
    if (req >= sh->n_requests || group >= sh->n_groups)
        return dh_err("generator: no stream (request %u, group %u) in a trace of %u requests and %u groups",
                      req, group, sh->n_requests, sh->n_groups);
    uint32_t rows0 = sel_rows_at(sh, req, group, 0);
    if (p->sinks + p->window >= sh->group_k[group])
        return dh_err("generator: group %u has k = %u, not above sinks + window = %u", group, sh->group_k[group], p->sinks + p->window);
    if (rows0 < p->sinks + p->window + 1)
        return dh_err("generator: request %u starts with %u rows in group %u; the preset needs more than sinks + window = %u",
                      req, rows0, group, p->sinks + p->window);
    gen_stream *s = dh_calloc(1, sizeof *s);
    s->head.ops = &gen_ops;
    s->src = gs;
    s->p = p;
    s->sh = sh;
    s->req = req;
    s->group = group;
    s->latent = gs->group_latent[group];
    s->member = gs->group_member[group];
    s->k = sh->group_k[group];
    s->out_len = sh->output_len[req];
    s->keyframe_interval = src->meta.keyframe_interval;
    s->seed = src->meta.seed;
    s->max_rows = s->out_len ? sel_rows_at(sh, req, group, s->out_len - 1) : rows0;
    uint32_t latent_id = 0x80000000u | (uint32_t)(mix64(((uint64_t)s->k << 32) | sh->group_compress[group]) & 0x7FFFFFFF);
    rng_init(&s->redraw_rng, src->meta.seed, req, latent_id, 4);
    s->grp_key = mix64(src->meta.seed ^ mix64(((uint64_t)req << 32) | group));
    s->subst_threshold = (uint32_t)fmin(4294967295.0, gs->substitute[group] * 4294967296.0);
    uint32_t dyn = s->k - p->sinks - p->window;
    s->remap_rate = gs->overlap[group] < p->step_overlap
                        ? (p->step_overlap - gs->overlap[group]) * s->k / (double)dyn : 0;
    size_t words = (s->max_rows + 63) / 64;
    s->sel = dh_calloc(2 * words, 8);
    s->dirty = dh_calloc((words + 63) / 64, 8);
    gen_pop *pops[2] = {&s->heavy, &s->vol};
    for (int i = 0; i < 2; i++) {
        pops[i]->img = dh_calloc(s->k, sizeof(uint32_t));
        if (s->remap_rate > 0) {
            pops[i]->x = dh_calloc(s->k, sizeof(uint32_t));
            pops[i]->mark = dh_calloc(s->k, sizeof(uint32_t));
        }
    }
    s->added = dh_calloc(s->k + 4, sizeof(uint32_t));
    s->removed = dh_calloc(s->k + 4, sizeof(uint32_t));
    s->full = dh_calloc(s->k + 4, sizeof(uint32_t));
    /* Join the request's share if it still holds the log from the start. */
    pthread_mutex_lock(&gs->mu);
    s->slot = (uint32_t)((size_t)req * gs->n_latents + s->latent);
    gen_share *shr = gs->share[s->slot];
    if (!shr && gs->share_limit > 0 && gs->share_state[s->slot] != SHARE_EVICTED) {
        shr = dh_calloc(1, sizeof *shr);
        shr->n_members = gs->latent_members[s->latent];
        shr->at = dh_calloc(shr->n_members, sizeof *shr->at);
        shr->state = dh_calloc(shr->n_members, 1);
        /* After a first pass every group of the process is done with it: the
         * others are not waited for again. */
        if (gs->share_state[s->slot] == SHARE_RETIRED) memset(shr->state, M_DONE, shr->n_members);
        shr->proc = lat_new(gs, sh, s->seed, req, s->latent);
        shr->bytes = sizeof *shr + shr->n_members * 9 + shr->proc->bytes;
        gs->share_bytes += shr->bytes;
        gs->share[s->slot] = shr;
    }
    if (shr && shr->base == 0 && shr->state[s->member] != M_ATTACHED) {
        shr->state[s->member] = M_ATTACHED;
        shr->at[s->member] = 0;
        shr->n_attached++;
        s->share = shr;
    } else {
        s->own = lat_new(gs, sh, s->seed, req, s->latent);
    }
    pthread_mutex_unlock(&gs->mu);
    *out = (sel_stream *)s;
    return 0;
}

static int gen_next(sel_stream *st, sel_delta *d)
{
    gen_stream *s = (gen_stream *)st;
    if (s->pos >= s->out_len) return 1;
    uint32_t pos = s->pos++;
    memset(d, 0, sizeof *d);
    d->pos = pos;
    uint32_t warmup = s->p->warmup;
    if (pos == 0) {
        /* The initial fill and the burn-in; position 0 adds the whole selection. */
        stream_advance(s, (uint64_t)warmup + 1);
        s->n_added = collect_full(s, s->added);
        s->n_removed = 0;
    } else {
        s->tracking = 1;
        stream_advance(s, (uint64_t)warmup + 1 + pos);
        s->tracking = 0;
        collect_delta(s);
    }
    d->nrows = s->nrows;
    d->n_sel = s->n_sel;
    d->n_added = s->n_added;
    d->n_removed = s->n_removed;
    d->added = s->added;
    d->removed = s->removed;
    if (pos == 0 || (s->keyframe_interval && pos % s->keyframe_interval == 0)) {
        d->keyframe = 1;
        if (pos == 0) memcpy(s->full, s->added, s->n_added * sizeof(uint32_t));
        else collect_full(s, s->full);
        d->full = s->full;
    }
    return 0;
}

static void gen_close(sel_stream *st)
{
    gen_stream *s = (gen_stream *)st;
    if (!s) return;
    if (s->share) {
        gen_src *gs = s->src;
        pthread_mutex_lock(&gs->mu);
        s->share->state[s->member] = M_DONE;
        s->share->n_attached--;
        share_trim(gs, s->slot);
        pthread_mutex_unlock(&gs->mu);
    }
    lat_free(s->own);
    free(s->own_rec.ev);
    free(s->sel); free(s->dirty);
    free(s->heavy.img); free(s->heavy.x); free(s->heavy.mark);
    free(s->vol.img); free(s->vol.x); free(s->vol.mark);
    free(s->added); free(s->removed); free(s->full);
    free(s);
}

static void gen_src_free(gen_src *gs)
{
    if (!gs) return;
    if (gs->share) {
        for (size_t i = 0; i < gs->n_slots; i++) share_free(gs, gs->share[i]);
        pthread_mutex_destroy(&gs->mu);
    }
    free(gs->share); free(gs->share_state);
    free(gs->substitute);
    free(gs->overlap);
    free(gs->vol_return);
    free(gs->heavy_return);
    free(gs->run_len);
    free(gs->group_latent); free(gs->group_member); free(gs->latent_members); free(gs->latent_group);
    free(gs);
}

static void gen_free(sel_source *src)
{
    if (!src) return;
    gen_src_free(src->impl);
    trace_meta_release(&src->meta);
    free(src);
}

static int memo_set_limit(sel_source *src, size_t bytes);

int gen_source_set_share_limit(sel_source *src, size_t bytes)
{
    if (src && memo_set_limit(src, bytes) == 0) return 0;
    if (!src || src->ops != &gen_ops) return dh_err("generator: not a generator source");
    gen_src *gs = src->impl;
    pthread_mutex_lock(&gs->mu);
    gs->share_limit = bytes;
    pthread_mutex_unlock(&gs->mu);
    return 0;
}

int gen_source_new(const gen_params *p, const trace_shape *sh, uint64_t seed,
                   uint32_t keyframe_interval, sel_source **out)
{
    *out = NULL;
    if (trace_shape_validate(sh) < 0) return -1;
    if (keyframe_interval == 0) return dh_err("generator: keyframe interval must be at least 1");
    for (uint32_t g = 0; g < sh->n_groups; g++)
        if (sh->group_k[g] <= p->sinks + p->window)
            return dh_err("generator: group %u has k = %u, not above sinks + window = %u of preset '%s'",
                          g, sh->group_k[g], p->sinks + p->window, p->name);
    for (uint32_t r = 0; r < sh->n_requests; r++)
        for (uint32_t g = 0; g < sh->n_groups; g++) {
            if (sel_rows_at(sh, r, g, 0) <= p->sinks + p->window)
                return dh_err("generator: request %u has %u rows in group %u at position 0; preset '%s' needs more than sinks + window = %u",
                              r, sel_rows_at(sh, r, g, 0), g, p->name, p->sinks + p->window);
            /* A k that covers the whole context to the last position selects
             * every row throughout: the latent process would refill by scanning
             * the context at every step, for hours on a long one. Such a shape
             * is not a sparse workload. (A k above the first positions' context
             * only is fine: the context grows past it.) */
            uint32_t last_rows = sel_rows_at(sh, r, g, sh->output_len[r] ? sh->output_len[r] - 1 : 0);
            if (sh->group_k[g] >= last_rows)
                return dh_err("generator: group %u has k = %u, not below the %u rows of request %u's largest context",
                              g, sh->group_k[g], last_rows, r);
            if (sh->output_len[r] && sel_rows_at(sh, r, g, sh->output_len[r] - 1) > GEN_MAX_ROWS)
                return dh_err("generator: request %u reaches %u rows in group %u; the generator handles at most %u",
                              r, sel_rows_at(sh, r, g, sh->output_len[r] - 1), g, GEN_MAX_ROWS);
        }
    gen_src *gs = dh_calloc(1, sizeof *gs);
    gs->prm = *p;
    gs->prm.c = NULL;
    gs->prm.group_sizes = NULL;
    gs->substitute = dh_calloc(sh->n_groups, sizeof(double));
    gs->overlap = dh_calloc(sh->n_groups, sizeof(double));
    if (resolve_profile(cfg_name(p->c), "substitute_profile", p->substitute_spec, p->substitute, 0, 1, sh->n_groups, gs->substitute) < 0 ||
        resolve_profile(cfg_name(p->c), "overlap_profile", p->overlap_spec, p->step_overlap, 0, p->step_overlap, sh->n_groups, gs->overlap) < 0) {
        gen_src_free(gs);
        return -1;
    }
    build_tables(gs);
    /* Groups with the same (k, compress) share one latent process. */
    gs->group_latent = dh_calloc(sh->n_groups, sizeof(uint32_t));
    gs->group_member = dh_calloc(sh->n_groups, sizeof(uint32_t));
    gs->latent_members = dh_calloc(sh->n_groups, sizeof(uint32_t));
    gs->latent_group = dh_calloc(sh->n_groups, sizeof(uint32_t));
    for (uint32_t g = 0; g < sh->n_groups; g++) {
        uint32_t l = 0;
        while (l < gs->n_latents && !(sh->group_k[gs->latent_group[l]] == sh->group_k[g] &&
                                       sh->group_compress[gs->latent_group[l]] == sh->group_compress[g]))
            l++;
        if (l == gs->n_latents) gs->latent_group[gs->n_latents++] = g;
        gs->group_latent[g] = l;
        gs->group_member[g] = gs->latent_members[l]++;
    }
    gs->n_slots = (size_t)sh->n_requests * gs->n_latents;
    gs->share = dh_calloc(gs->n_slots, sizeof *gs->share);
    gs->share_state = dh_calloc(gs->n_slots, 1);
    gs->share_limit = GEN_SHARE_LIMIT_DEFAULT;
    pthread_mutex_init(&gs->mu, NULL);
    sel_source *src = dh_calloc(1, sizeof *src);
    src->ops = &gen_ops;
    src->impl = gs;
    src->meta.format_version = TRACE_FORMAT_VERSION;
    trace_shape_copy(&src->meta.shape, sh);
    src->meta.keyframe_interval = keyframe_interval;
    src->meta.seed = seed;
    snprintf(src->meta.generator, sizeof src->meta.generator, "dhgen");
    snprintf(src->meta.preset, sizeof src->meta.preset, "%s", p->name);
    src->meta.generator_params = gen_params_to_string(p);
    *out = src;
    return 0;
}

/* ---------------------------------------------------------------- sharing between sources
 *
 * Simulations of one workload under different policies (dhsim --compare: one
 * source per policy, on several threads) read the same streams. Sources made
 * by gen_source_new_shared() with the same preset, shape, seed and keyframe
 * interval share one `gen_shared`: each (request, group) stream is generated
 * once, by whichever source first needs a position, into a memo of compact
 * records, and replayed from there by the others. A record is the position's
 * counts and its sorted rows as varint gaps (about 1.5 bytes per changed row
 * at 100K rows), in 64 KB chunks that never move, so readers decode without a
 * lock: a position is published by storing its record's address, then the
 * count (release/acquire). Producing takes the stream's own lock, a few
 * positions at a time. Once the memo would pass its limit a stream stops
 * growing: the reader at its end takes over the generator, a reader arriving
 * later regenerates the stream alone. The last gen_shared stays registered
 * after its sources are freed, so sources made one after the other share it
 * too; making one for another workload frees it. */

#define MEMO_CHUNK ((size_t)64 << 10)
#define MEMO_BATCH 8                         /* positions produced per lock */
#define MEMO_LIMIT_DEFAULT ((size_t)3 << 30) /* bytes of records per gen_shared */

typedef struct memo_chunk {
    struct memo_chunk *next;
    size_t used, cap;
    uint8_t data[];
} memo_chunk;

typedef struct {
    pthread_mutex_t mu;
    uint32_t n_pos;         /* positions published (atomic) */
    const uint8_t **rec;    /* [output_len] each position's record */
    memo_chunk *chunks;     /* newest first */
    sel_stream *prod;       /* the generator, at position n_pos */
    int closed;             /* no more positions will be published */
} memo_entry;

typedef struct gen_shared {
    struct gen_shared *next;
    uint32_t refs;
    char *params;           /* the key: preset text, seed, keyframe interval, shape */
    uint64_t seed;
    uint32_t kf;
    trace_shape shape;
    sel_source *gen;        /* every stream is generated from here */
    memo_entry *entry;      /* [n_requests * n_groups] */
    size_t bytes, limit;    /* records held (atomic), and the limit */
} gen_shared;

static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static gen_shared *registry;

typedef struct {
    sel_stream_head head;
    gen_shared *gs;
    memo_entry *e;
    uint32_t req, group, pos, out_len, kf;
    sel_stream *own;        /* the stream's own generator once the memo has stopped */
    uint32_t *added, *removed, *full;
    uint32_t n_sel;
} memo_cursor;

static inline uint8_t *put_varint(uint8_t *p, uint32_t v)
{
    while (v >= 128) { *p++ = (uint8_t)(v | 128); v >>= 7; }
    *p++ = (uint8_t)v;
    return p;
}

static inline const uint8_t *get_varint(const uint8_t *p, uint32_t *v)
{
    uint32_t x = 0;
    for (int shift = 0;; shift += 7) {
        uint8_t b = *p++;
        x |= (uint32_t)(b & 127) << shift;
        if (b < 128) break;
    }
    *v = x;
    return p;
}

/* Sorted rows as gaps in group-varint form: a control byte gives the byte
 * lengths (1-4) of the next four gaps. Neither direction has a
 * data-dependent branch: a gap is moved as four bytes (little-endian, the
 * records never leave the process) of which `length` count, so decoding
 * reads up to 3 bytes past a record and writes up to 3 rows past n (the
 * chunks and row arrays leave that room). */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the stream records of gen_source_new_shared assume a little-endian host"
#endif
static uint8_t *put_rows(uint8_t *p, const uint32_t *rows, uint32_t n)
{
    uint32_t prev = 0;
    for (uint32_t i = 0; i < n; i += 4) {
        uint8_t *ctrl = p++, c = 0;
        for (uint32_t j = 0; j < 4; j++) {
            uint32_t v = 0;
            if (i + j < n) { v = rows[i + j] - prev; prev = rows[i + j]; }
            /* Bytes needed, 1-4, without a branch; all four are stored and
             * the unused ones overwritten by the next gap. */
            uint32_t len = 1 + (v > 0xFFu) + (v > 0xFFFFu) + (v > 0xFFFFFFu);
            c |= (uint8_t)((len - 1) << (2 * j));
            memcpy(p, &v, 4);
            p += len;
        }
        *ctrl = c;
    }
    return p;
}

static const uint8_t *get_rows_scalar(const uint8_t *p, uint32_t *rows, uint32_t n)
{
    static const uint32_t mask[4] = {0xFFu, 0xFFFFu, 0xFFFFFFu, 0xFFFFFFFFu};
    uint32_t prev = 0;
    for (uint32_t i = 0; i < n; i += 4) {
        uint32_t c = *p++;
        for (uint32_t j = 0; j < 4; j++) {
            uint32_t len = (c >> (2 * j)) & 3, v;
            memcpy(&v, p, 4);
            prev += v & mask[len];
            rows[i + j] = prev;
            p += len + 1;
        }
    }
    return p;
}

/* Does a hold every stream of b? A stream (request r, group g) depends on the
 * preset, the seed, the group's k and compression and request r's prompt and
 * output lengths only (gen_open), never on the other requests, so a shape
 * with the same groups whose first requests are b's requests serves b: a
 * sweep over concurrency generates its largest point's streams once. */
#if defined(__x86_64__)
/* The same with SSSE3, as Stream VByte decodes (Lemire, Kurz and Rupp,
 * "Stream VByte: faster byte-oriented integer compression", 2018): one
 * shuffle per control byte moves the four gaps' bytes into four 32-bit
 * lanes, two shifted adds and the previous row make them rows. A shuffle
 * reads 16 bytes from the gaps: up to 12 past the group, within the slack
 * memo_produce leaves after every record. Every replay of a stream decodes
 * all its rows, so this was a sixth of a sweep's time. */
static uint8_t gap_shuffle[256][16], gap_bytes[256];

static void gap_tables_init(void)
{
    for (uint32_t c = 0; c < 256; c++) {
        uint32_t off = 0;
        for (uint32_t j = 0; j < 4; j++) {
            uint32_t len = ((c >> (2 * j)) & 3) + 1;
            for (uint32_t b = 0; b < 4; b++) gap_shuffle[c][4 * j + b] = b < len ? (uint8_t)(off + b) : 0x80;
            off += len;
        }
        gap_bytes[c] = (uint8_t)off;
    }
}

__attribute__((target("ssse3"))) static const uint8_t *get_rows_ssse3(const uint8_t *p, uint32_t *rows, uint32_t n)
{
    __m128i prev = _mm_setzero_si128();
    for (uint32_t i = 0; i < n; i += 4) {
        uint32_t c = *p++;
        __m128i v = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)p), _mm_loadu_si128((const __m128i *)gap_shuffle[c]));
        v = _mm_add_epi32(v, _mm_slli_si128(v, 4));
        v = _mm_add_epi32(v, _mm_slli_si128(v, 8));
        v = _mm_add_epi32(v, prev);
        _mm_storeu_si128((__m128i *)(rows + i), v);
        prev = _mm_shuffle_epi32(v, 0xFF);
        p += gap_bytes[c];
    }
    return p;
}

static pthread_once_t gap_once = PTHREAD_ONCE_INIT;
static int gap_simd;
static void gap_choose(void)
{
    gap_simd = __builtin_cpu_supports("ssse3");
    if (gap_simd) gap_tables_init();
}
#endif

static const uint8_t *get_rows(const uint8_t *p, uint32_t *rows, uint32_t n)
{
#if defined(__x86_64__)
    pthread_once(&gap_once, gap_choose);
    if (gap_simd) return get_rows_ssse3(p, rows, n);
#endif
    return get_rows_scalar(p, rows, n);
}

static int shape_covers(const trace_shape *a, const trace_shape *b)
{
    if (a->n_requests < b->n_requests || a->n_groups != b->n_groups) return 0;
    return !memcmp(a->group_k, b->group_k, a->n_groups * sizeof(uint32_t)) &&
           !memcmp(a->group_compress, b->group_compress, a->n_groups * sizeof(uint32_t)) &&
           !memcmp(a->prompt_len, b->prompt_len, b->n_requests * sizeof(uint32_t)) &&
           !memcmp(a->output_len, b->output_len, b->n_requests * sizeof(uint32_t));
}

static void shared_free(gen_shared *gs)
{
    size_t n = (size_t)gs->shape.n_requests * gs->shape.n_groups;
    for (size_t i = 0; i < n; i++) {
        memo_entry *e = &gs->entry[i];
        sel_close(e->prod);
        for (memo_chunk *c = e->chunks, *nx; c; c = nx) { nx = c->next; free(c); }
        free(e->rec);
        pthread_mutex_destroy(&e->mu);
    }
    free(gs->entry);
    sel_source_free(gs->gen);
    trace_shape_release(&gs->shape);
    free(gs->params);
    free(gs);
}

/* Produce up to MEMO_BATCH positions into e (its lock held). 0 or -1. */
static int memo_produce(gen_shared *gs, memo_entry *e, uint32_t req, uint32_t group, uint32_t out_len)
{
    if (!e->prod && sel_open(gs->gen, req, group, &e->prod) < 0) return -1;
    for (uint32_t b = 0; b < MEMO_BATCH && e->n_pos < out_len; b++) {
        sel_delta d;
        int rc = sel_next(e->prod, &d);
        if (rc < 0) return -1;
        DH_BUG_ON(rc > 0 || d.pos != e->n_pos);
        uint32_t n_full = d.keyframe && d.pos > 0 ? d.n_sel : 0;
        size_t need = 15 + 3 + 5 * ((size_t)d.n_added + d.n_removed + n_full + 12);
        memo_chunk *c = e->chunks;
        if (!c || c->cap - c->used < need) {
            size_t cap = need > MEMO_CHUNK ? need : MEMO_CHUNK;
            c = malloc(sizeof *c + cap);
            if (!c) abort();
            c->next = e->chunks;
            c->used = 0;
            c->cap = cap;
            e->chunks = c;
            __atomic_add_fetch(&gs->bytes, sizeof *c + cap, __ATOMIC_RELAXED);
        }
        uint8_t *start = c->data + c->used, *p = start;
        p = put_varint(p, d.n_sel);
        p = put_varint(p, d.n_added);
        p = put_varint(p, d.n_removed);
        p = put_rows(p, d.added, d.n_added);
        p = put_rows(p, d.removed, d.n_removed);
        p = put_rows(p, d.full, n_full);
        c->used += (size_t)(p - start);
        e->rec[e->n_pos] = start;
        __atomic_store_n(&e->n_pos, e->n_pos + 1, __ATOMIC_RELEASE);
    }
    if (e->n_pos == out_len) { sel_close(e->prod); e->prod = NULL; }
    return 0;
}

static int memo_open(sel_source *src, uint32_t req, uint32_t group, sel_stream **out);
static int memo_next(sel_stream *st, sel_delta *d);
static void memo_close(sel_stream *st);
static void memo_free(sel_source *src);
static const sel_source_ops memo_ops = {memo_open, memo_next, memo_close, memo_free};

static int memo_open(sel_source *src, uint32_t req, uint32_t group, sel_stream **out)
{
    gen_shared *gs = src->impl;
    const trace_shape *sh = &gs->shape, *own = &src->meta.shape; /* own: a prefix of sh (shape_covers) */
    *out = NULL;
    if (req >= own->n_requests || group >= own->n_groups)
        return dh_err("generator: no stream (request %u, group %u) in a trace of %u requests and %u groups",
                      req, group, own->n_requests, own->n_groups);
    memo_cursor *c = dh_calloc(1, sizeof *c);
    c->head.ops = &memo_ops;
    c->gs = gs;
    c->e = &gs->entry[(size_t)req * sh->n_groups + group];
    c->req = req;
    c->group = group;
    c->out_len = sh->output_len[req];
    c->kf = gs->kf;
    uint32_t k = sh->group_k[group];
    c->added = dh_calloc(k + 4, sizeof(uint32_t));
    c->removed = dh_calloc(k + 4, sizeof(uint32_t));
    c->full = dh_calloc(k + 4, sizeof(uint32_t));
    pthread_mutex_lock(&c->e->mu);
    if (!c->e->rec) c->e->rec = dh_calloc(c->out_len ? c->out_len : 1, sizeof *c->e->rec);
    pthread_mutex_unlock(&c->e->mu);
    *out = (sel_stream *)c;
    return 0;
}

/* The memo cannot serve position pos: continue on a generator of our own,
 * the memo's if it stands at pos, else a new one run up to pos. e->mu held. */
static int memo_go_alone(memo_cursor *c)
{
    memo_entry *e = c->e;
    if (e->prod && e->n_pos == c->pos) {
        c->own = e->prod;
        e->prod = NULL;
        e->closed = 1;
        return 0;
    }
    e->closed = 1;
    if (sel_open(c->gs->gen, c->req, c->group, &c->own) < 0) return -1;
    for (uint32_t p = 0; p < c->pos; p++) {
        sel_delta d;
        if (sel_next(c->own, &d) != 0) return dh_err("generator: stream (request %u, group %u) ended early", c->req, c->group);
    }
    return 0;
}

static int memo_next(sel_stream *st, sel_delta *d)
{
    memo_cursor *c = (memo_cursor *)st;
    if (c->own) { c->pos++; return sel_next(c->own, d); }
    if (c->pos >= c->out_len) return 1;
    memo_entry *e = c->e;
    uint32_t pos = c->pos;
    if (pos >= __atomic_load_n(&e->n_pos, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&e->mu);
        int rc = 0;
        if (pos >= e->n_pos) {
            if (e->closed || __atomic_load_n(&c->gs->bytes, __ATOMIC_RELAXED) > __atomic_load_n(&c->gs->limit, __ATOMIC_RELAXED))
                rc = memo_go_alone(c);
            else rc = memo_produce(c->gs, e, c->req, c->group, c->out_len);
        }
        pthread_mutex_unlock(&e->mu);
        if (rc < 0) return -1;
        if (c->own) { c->pos++; return sel_next(c->own, d); }
    }
    const uint8_t *p = e->rec[pos];
    uint32_t n_added, n_removed;
    p = get_varint(p, &c->n_sel);
    p = get_varint(p, &n_added);
    p = get_varint(p, &n_removed);
    p = get_rows(p, c->added, n_added);
    p = get_rows(p, c->removed, n_removed);
    memset(d, 0, sizeof *d);
    d->pos = pos;
    d->nrows = sel_rows_at(&c->gs->shape, c->req, c->group, pos);
    d->n_sel = c->n_sel;
    d->n_added = n_added;
    d->n_removed = n_removed;
    d->added = c->added;
    d->removed = c->removed;
    if (pos == 0 || pos % c->kf == 0) {
        d->keyframe = 1;
        if (pos == 0) memcpy(c->full, c->added, n_added * sizeof(uint32_t));
        else get_rows(p, c->full, c->n_sel);
        d->full = c->full;
    }
    c->pos++;
    return 0;
}

static void memo_close(sel_stream *st)
{
    memo_cursor *c = (memo_cursor *)st;
    if (!c) return;
    sel_close(c->own);
    free(c->added); free(c->removed); free(c->full);
    free(c);
}

static void memo_free(sel_source *src)
{
    if (!src) return;
    gen_shared *gs = src->impl;
    pthread_mutex_lock(&registry_mu);
    gs->refs--; /* stays registered for a source made later */
    pthread_mutex_unlock(&registry_mu);
    trace_meta_release(&src->meta);
    free(src);
}

/* 0 if src shares streams (its memo limit is set), else 1. */
static int memo_set_limit(sel_source *src, size_t bytes)
{
    if (src->ops != &memo_ops) return 1;
    gen_shared *gs = src->impl;
    __atomic_store_n(&gs->limit, bytes, __ATOMIC_RELAXED);
    return 0;
}

int gen_source_new_shared(const gen_params *p, const trace_shape *sh, uint64_t seed,
                          uint32_t keyframe_interval, sel_source **out)
{
    *out = NULL;
    char *params = gen_params_to_string(p);
    pthread_mutex_lock(&registry_mu);
    gen_shared *gs = NULL;
    for (gen_shared *x = registry; x; x = x->next)
        if (x->seed == seed && x->kf == keyframe_interval && !strcmp(x->params, params) && shape_covers(&x->shape, sh)) {
            gs = x;
            break;
        }
    if (!gs) {
        /* Another workload: the ones no source uses any more go. */
        for (gen_shared **pp = &registry; *pp;) {
            gen_shared *x = *pp;
            if (x->refs == 0) { *pp = x->next; shared_free(x); }
            else pp = &x->next;
        }
        sel_source *gen;
        if (gen_source_new(p, sh, seed, keyframe_interval, &gen) < 0) {
            pthread_mutex_unlock(&registry_mu);
            free(params);
            return -1;
        }
        gs = dh_calloc(1, sizeof *gs);
        gs->params = params;
        params = NULL;
        gs->seed = seed;
        gs->kf = keyframe_interval;
        trace_shape_copy(&gs->shape, sh);
        gs->gen = gen;
        gs->limit = MEMO_LIMIT_DEFAULT;
        size_t n = (size_t)sh->n_requests * sh->n_groups;
        gs->entry = dh_calloc(n, sizeof *gs->entry);
        for (size_t i = 0; i < n; i++) pthread_mutex_init(&gs->entry[i].mu, NULL);
        gs->next = registry;
        registry = gs;
    }
    gs->refs++;
    pthread_mutex_unlock(&registry_mu);
    free(params);
    sel_source *src = dh_calloc(1, sizeof *src);
    src->ops = &memo_ops;
    src->impl = gs;
    const trace_meta *m = sel_meta(gs->gen);
    src->meta = *m;
    trace_shape_copy(&src->meta.shape, sh);
    src->meta.generator_params = strdup(m->generator_params);
    if (!src->meta.generator_params) abort();
    *out = src;
    return 0;
}
