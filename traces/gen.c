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
 * Cost. Each position does work proportional to the rows that change: a
 * uniform choice from a dense array of the population per leaving row, one
 * 32-bit draw into an inverse-CDF table for its reuse distance, a calendar
 * bucket per position for returns, bitset updates for the group's selection,
 * and one LSD radix sort of the added and removed rows. A keyframe scans the
 * selection bitset (nrows / 64 words). Memory per stream: about 12.4 bytes
 * per context row (three 32-bit arrays, three bitsets) plus the pending
 * re-references and three 256 KB sampling tables per source.
 */
#include "traces/gen.h"
#include "common/cfg.h"
#include "common/dh_err.h"
#include "common/rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static void *xcalloc(size_t n, size_t sz)
{
    void *p = calloc(n ? n : 1, sz);
    if (!p) { fprintf(stderr, "out of memory\n"); abort(); }
    return p;
}

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
    p->group_sizes = xcalloc(n, sizeof(uint32_t));
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

static int get_u32(cfg *c, const char *sec, const char *key, uint32_t *out, long def, int required, long lo, long hi)
{
    long v;
    int rc = cfg_get_int(c, sec, key, &v, required ? CFG_REQUIRED : &def, lo, hi);
    if (rc < 0) return -1;
    *out = (uint32_t)v;
    return 0;
}

static int get_d(cfg *c, const char *sec, const char *key, double *out, double lo, double hi)
{
    return cfg_get_double(c, sec, key, out, CFG_REQUIRED, lo, hi) < 0 ? -1 : 0;
}

/* Read every parameter from p->c (again after a gen_params_set). */
static int params_parse(gen_params *p)
{
    cfg *c = p->c;
    const char *s;
    if (cfg_get_string(c, "preset", "name", &s, CFG_REQUIRED) < 0) return -1;
    snprintf(p->name, sizeof p->name, "%s", s);
    if (cfg_get_string(c, "preset", "description", &s, "") < 0) return -1;

    if (cfg_get_string(c, "shape", "model", &s, CFG_REQUIRED) < 0) return -1;
    snprintf(p->model, sizeof p->model, "%s", s);
    if (get_u32(c, "shape", "n_requests", &p->n_requests, 0, 1, 1, 1 << 20) < 0 ||
        get_u32(c, "shape", "n_layers", &p->n_layers, 0, 1, 1, 4096) < 0 ||
        get_u32(c, "shape", "k", &p->k, 0, 1, 1, 1 << 24) < 0 ||
        get_u32(c, "shape", "compress", &p->compress, 1, 0, 1, 1 << 16) < 0 ||
        get_u32(c, "shape", "prompt_len", &p->prompt_len, 0, 1, 1, 1L << 30) < 0 ||
        get_u32(c, "shape", "output_len", &p->output_len, 0, 1, 0, 1L << 30) < 0)
        return -1;
    if (cfg_get_string(c, "shape", "group_sizes", &s, CFG_REQUIRED) < 0 || parse_group_sizes(p, s) < 0) return -1;
    uint64_t sum = 0;
    for (uint32_t i = 0; i < p->n_group_sizes; i++) sum += p->group_sizes[i];
    if (sum != p->n_layers)
        return dh_err("%s: [shape] group_sizes add up to %llu layers, but n_layers = %u", cfg_name(c), (unsigned long long)sum, p->n_layers);

    if (get_u32(c, "selection", "sinks", &p->sinks, 0, 1, 0, 1 << 20) < 0 ||
        get_u32(c, "selection", "window", &p->window, 0, 1, 0, 1 << 20) < 0 ||
        get_u32(c, "selection", "warmup", &p->warmup, 0, 1, 0, 1 << 16) < 0 ||
        get_d(c, "selection", "step_overlap", &p->step_overlap, 0, 1) < 0 ||
        get_d(c, "selection", "heavy_fraction", &p->heavy_fraction, 0, 1) < 0 ||
        get_d(c, "selection", "heavy_leave", &p->heavy_leave, 0, 1) < 0 ||
        get_d(c, "selection", "heavy_return_mean", &p->heavy_return_mean, 1, 1e6) < 0 ||
        get_d(c, "selection", "reuse_p", &p->reuse_p, 0, 1) < 0 ||
        get_d(c, "selection", "reuse_near_p", &p->reuse_near_p, 0, 1) < 0 ||
        get_d(c, "selection", "reuse_near_mean", &p->reuse_near_mean, 1, 1e6) < 0 ||
        get_u32(c, "selection", "reuse_far_max", &p->reuse_far_max, 0, 1, 1, 1 << 20) < 0 ||
        get_d(c, "selection", "run_mean", &p->run_mean, 1, 1e4) < 0 ||
        get_d(c, "selection", "fresh_recent_p", &p->fresh_recent_p, 0, 1) < 0 ||
        get_u32(c, "selection", "fresh_recent_span", &p->fresh_recent_span, 0, 1, 1, 1L << 30) < 0)
        return -1;
    if (p->sinks + p->window >= p->k)
        return dh_err("%s: sinks (%u) + window (%u) leave no dynamic rows of k = %u", cfg_name(c), p->sinks, p->window, p->k);

    if (get_d(c, "groups", "substitute", &p->substitute, 0, 1) < 0 ||
        get_u32(c, "groups", "substitute_span", &p->substitute_span, 0, 1, 1, 1 << 24) < 0)
        return -1;
    if (cfg_get_string(c, "groups", "substitute_profile", &s, "") < 0) return -1;
    snprintf(p->substitute_spec, sizeof p->substitute_spec, "%s", s);
    if (cfg_get_string(c, "groups", "overlap_profile", &s, "") < 0) return -1;
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
        snprintf(path, cap, "%s", preset);
        return 0;
    }
    const char *root = getenv("DHSPARSE_ROOT");
    snprintf(path, cap, "traces/presets/%s.ini", preset);
    FILE *f = fopen(path, "r");
    if (f) { fclose(f); return 0; }
    if (root) {
        snprintf(path, cap, "%s/traces/presets/%s.ini", root, preset);
        f = fopen(path, "r");
        if (f) { fclose(f); return 0; }
    }
    return dh_err("preset '%s': no traces/presets/%s.ini here%s", preset, preset,
                  root ? " nor under DHSPARSE_ROOT" : " (set DHSPARSE_ROOT to the source tree)");
}

int gen_params_load(const char *preset, gen_params **out)
{
    char path[4096];
    *out = NULL;
    if (find_preset(preset, path, sizeof path) < 0) return -1;
    gen_params *p = xcalloc(1, sizeof *p);
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
    return cfg_get_double(p->c, "targets", key, out, CFG_REQUIRED, -1e300, 1e300) < 0 ? -1 : 0;
}

int gen_params_default_shape(const gen_params *p, trace_shape *sh)
{
    memset(sh, 0, sizeof *sh);
    snprintf(sh->model, sizeof sh->model, "%s", p->model);
    sh->n_requests = p->n_requests;
    sh->n_layers = p->n_layers;
    sh->n_groups = p->n_group_sizes;
    sh->layer_group = xcalloc(p->n_layers, sizeof(uint32_t));
    sh->group_k = xcalloc(sh->n_groups, sizeof(uint32_t));
    sh->group_compress = xcalloc(sh->n_groups, sizeof(uint32_t));
    sh->prompt_len = xcalloc(sh->n_requests, sizeof(uint32_t));
    sh->output_len = xcalloc(sh->n_requests, sizeof(uint32_t));
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

typedef struct {
    gen_params prm;        /* a copy of the scalar parameters (no cfg) */
    uint32_t *vol_return;  /* [GEN_TABLE] reuse distance of a leaving volatile row, 0 = never returns */
    uint32_t *heavy_return;/* [GEN_TABLE] absence of a leaving heavy hitter */
    uint32_t *run_len;     /* [GEN_TABLE] length of a run of fresh rows */
    double *substitute;    /* [n_groups] */
    double *overlap;       /* [n_groups] target step overlap of each group */
} gen_src;

enum { CLS_NONE = 0, CLS_HEAVY = 1, CLS_VOL = 2, CLS_FIXED = 3 };
#define CLS_SHIFT 30
#define IDX_MASK ((1u << CLS_SHIFT) - 1)

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

typedef struct {
    sel_stream_head head;
    const gen_src *src;
    const gen_params *p;
    const trace_shape *sh;
    uint32_t req, group, k, compress, out_len, max_rows;
    uint32_t pos;          /* next position to emit */
    uint32_t keyframe_interval;
    /* Latent process. */
    rng_stream lat_rng;
    uint32_t *lat;         /* [max_rows] class << 30 | index in its population array */
    uint32_t *heavy, *vol; /* dense arrays of the populations */
    uint32_t n_heavy, n_vol, heavy_target;
    uint32_t nrows, wlo;   /* context rows; first window row */
    uint64_t step;         /* latent step counter (burn-in included) */
    u32vec *cal;           /* calendar of re-references: [horizon] buckets of row << 1 | heavy */
    uint32_t horizon;
    double vol_churn_mean; /* volatile plus heavy leavers per position */
    uint32_t entered;      /* latent rows entering at this step */
    uint32_t *mark;        /* [max_rows] step + 1 at which the row entered or was redrawn */
    rng_stream redraw_rng; /* shared by the groups of the latent process, seeked per step */
    /* Group view. */
    uint64_t grp_key;
    uint32_t subst_threshold; /* substitute probability as a 32-bit threshold */
    double remap_rate;        /* persisting rows redrawn per position, per dynamic row */
    uint32_t *img;            /* [max_rows] image of each latent dynamic row */
    uint64_t *gsel, *touched, *orig; /* bitsets over rows */
    uint32_t n_sel;
    int tracking;
    u32vec touch;
    uint32_t *added, *removed, *full, *tmp;
    uint32_t n_added, n_removed;
} gen_stream;

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
    gs->vol_return = xcalloc(GEN_TABLE, sizeof(uint32_t));
    gs->heavy_return = xcalloc(GEN_TABLE, sizeof(uint32_t));
    gs->run_len = xcalloc(GEN_TABLE, sizeof(uint32_t));
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

/* ---- group view: every change of the group's selection goes through here. */

static inline void grp_flip(gen_stream *s, uint32_t y, int on)
{
    if (s->tracking && !bit_get(s->touched, y)) {
        bit_set(s->touched, y);
        if (bit_get(s->gsel, y)) bit_set(s->orig, y); else bit_clr(s->orig, y);
        vec_push(&s->touch, y);
    }
    if (on) { bit_set(s->gsel, y); s->n_sel++; }
    else { bit_clr(s->gsel, y); s->n_sel--; }
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
            if (!bit_get(s->gsel, x) && (pass || !(bit_get(s->touched, x) && bit_get(s->orig, x)))) return x;
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

static void grp_add_dyn(gen_stream *s, uint32_t x)
{
    uint64_t h = mix64(s->grp_key ^ x);
    uint32_t y = x;
    if ((uint32_t)h < s->subst_threshold || bit_get(s->gsel, x))
        y = grp_probe(s, (int64_t)x + subst_offset(s, h) + ((uint32_t)h < s->subst_threshold ? 0 : 1));
    s->img[x] = y;
    grp_flip(s, y, 1);
}

static inline void grp_remove_dyn(gen_stream *s, uint32_t x) { grp_flip(s, s->img[x], 0); }

/* ---- latent process. */

static inline void lat_add(gen_stream *s, uint32_t x, int heavy)
{
    if (heavy) { s->lat[x] = (CLS_HEAVY << CLS_SHIFT) | s->n_heavy; s->heavy[s->n_heavy++] = x; }
    else { s->lat[x] = (CLS_VOL << CLS_SHIFT) | s->n_vol; s->vol[s->n_vol++] = x; }
    s->entered++;
    s->mark[x] = (uint32_t)s->step + 1;
    grp_add_dyn(s, x);
}

/* Remove the population member at index i (swap with the last). */
static inline uint32_t lat_take(gen_stream *s, int heavy, uint32_t i)
{
    uint32_t *a = heavy ? s->heavy : s->vol;
    uint32_t *n = heavy ? &s->n_heavy : &s->n_vol;
    uint32_t x = a[i], last = a[--*n];
    a[i] = last;
    s->lat[last] = (s->lat[last] & ~IDX_MASK) | i;
    s->lat[x] = 0;
    s->mark[x] = (uint32_t)s->step + 1;
    grp_remove_dyn(s, x);
    return x;
}

static inline void lat_schedule(gen_stream *s, uint32_t x, uint32_t dist, int heavy)
{
    if (dist >= s->horizon) return; /* beyond the calendar: never returns */
    vec_push(&s->cal[(s->step + dist) & (s->horizon - 1)], x << 1 | (uint32_t)heavy);
}

static void lat_vol_leave(gen_stream *s)
{
    uint32_t x = lat_take(s, 0, rng_below(&s->lat_rng, s->n_vol));
    uint32_t d = table_draw(&s->lat_rng, s->src->vol_return);
    if (d) lat_schedule(s, x, d, 0);
}

static uint32_t lat_target(const gen_stream *s)
{
    uint32_t keff = s->nrows < s->k ? s->nrows : s->k;
    return keff - s->p->sinks - s->p->window;
}

/* Fill the dynamic part up to its target with fresh runs of rows. */
static void lat_fill(gen_stream *s)
{
    const gen_params *p = s->p;
    uint32_t target = lat_target(s), lo = p->sinks, span = s->wlo - lo;
    /* In a context barely larger than k the only free rows may be those that
     * just left; after one fruitless sweep they are taken too. */
    int take_marked = 0;
    while (s->n_heavy + s->n_vol < target) {
        uint32_t before = s->n_heavy + s->n_vol;
        uint32_t start;
        if (u01(&s->lat_rng) < p->fresh_recent_p) {
            uint32_t w = p->fresh_recent_span < span ? p->fresh_recent_span : span;
            start = s->wlo - 1 - rng_below(&s->lat_rng, w);
        } else {
            start = lo + rng_below(&s->lat_rng, span);
        }
        uint32_t len = table_draw(&s->lat_rng, s->src->run_len);
        /* A run walks forward over selected rows; in a nearly full region
         * that is a scan, bounded by the region (short contexts only). */
        uint32_t x = start;
        for (uint32_t walked = 0; len && walked < span && s->n_heavy + s->n_vol < target; walked++) {
            /* A row that left at this step stays out: re-adding it would be no change. */
            if (s->lat[x] == 0 && (take_marked || s->mark[x] != (uint32_t)s->step + 1)) {
                lat_add(s, x, s->n_heavy < s->heavy_target);
                len--;
            }
            if (++x == s->wlo) x = lo;
        }
        if (s->n_heavy + s->n_vol == before) take_marked = 1;
    }
}

/* Advance the window to s->nrows rows: rows that leave it are unselected,
 * new rows are selected. */
static void lat_slide(gen_stream *s, uint32_t nrows)
{
    uint32_t wlo = nrows - s->p->window;
    for (uint32_t x = s->wlo; x < wlo; x++) {
        s->lat[x] = 0;
        grp_flip(s, x, 0);
    }
    for (uint32_t x = s->nrows > wlo ? s->nrows : wlo; x < nrows; x++) {
        s->lat[x] = CLS_FIXED << CLS_SHIFT;
        grp_flip(s, x, 1);
    }
    s->nrows = nrows;
    s->wlo = wlo;
}

/* One position of the latent process plus the group's redraws. */
static void gen_step(gen_stream *s, uint32_t nrows)
{
    const gen_params *p = s->p;
    s->entered = 0;
    if (nrows != s->nrows) lat_slide(s, nrows);
    /* Heavy hitters leave briefly and always come back. */
    uint32_t nh = sround(&s->lat_rng, p->heavy_leave * s->n_heavy);
    for (uint32_t i = 0; i < nh && s->n_heavy; i++) {
        uint32_t x = lat_take(s, 1, rng_below(&s->lat_rng, s->n_heavy));
        lat_schedule(s, x, table_draw(&s->lat_rng, s->src->heavy_return), 1);
    }
    /* The volatile rows make up the rest of the step's churn, counted with
     * the heavy leavers actually drawn so the overlap stays on target. */
    double vmean = s->vol_churn_mean - nh;
    uint32_t nv = vmean > 0 ? sround(&s->lat_rng, vmean) : 0;
    for (uint32_t i = 0; i < nv && s->n_vol; i++) lat_vol_leave(s);
    /* Re-references due now. */
    u32vec *b = &s->cal[s->step & (s->horizon - 1)];
    for (uint32_t i = 0; i < b->n; i++) {
        uint32_t x = b->v[i] >> 1;
        if (x < s->wlo && s->lat[x] == 0 && s->mark[x] != (uint32_t)s->step + 1) lat_add(s, x, (b->v[i] & 1) && s->n_heavy < s->heavy_target);
    }
    b->n = 0;
    uint32_t target = lat_target(s);
    while (s->n_heavy + s->n_vol > target) {
        if (s->n_vol) lat_vol_leave(s);
        else lat_schedule(s, lat_take(s, 1, rng_below(&s->lat_rng, s->n_heavy)), table_draw(&s->lat_rng, s->src->heavy_return), 1);
    }
    lat_fill(s);
    /* Group redraws: this group keeps fewer rows than the latent process, so
     * it gives `remap_rate` of the dynamic rows that persisted a new image.
     * The candidates and their new images come from a stream shared by all
     * groups of the latent process (seeked to the step), and each group takes
     * a prefix of it: a group with a lower overlap redraws a superset of the
     * rows of a group with a higher one, which keeps adjacent groups alike.
     * Distinct persisting rows are drawn by rejection (a row that entered or
     * was redrawn at this step is marked). */
    uint32_t ndyn = s->n_heavy + s->n_vol;
    if (s->remap_rate > 0 && ndyn > s->entered) {
        rng_seek(&s->redraw_rng, (uint32_t)s->step);
        uint32_t persisting = ndyn - s->entered;
        double want = s->remap_rate * (double)ndyn;
        uint32_t n = (uint32_t)floor(want), tries = 0;
        double frac = want - n;
        /* The fractional part is drawn first so every group consumes the shared stream alike. */
        if (u01(&s->redraw_rng) < frac) n++;
        if (n > persisting) n = persisting;
        for (uint32_t i = 0; i < n && tries < 8 * n + 64; tries++) {
            uint32_t j = rng_below(&s->redraw_rng, ndyn);
            uint32_t off = rng_below(&s->redraw_rng, 2 * p->substitute_span + 1);
            uint32_t x = j < s->n_heavy ? s->heavy[j] : s->vol[j - s->n_heavy];
            if (s->mark[x] == (uint32_t)s->step + 1) continue;
            s->mark[x] = (uint32_t)s->step + 1;
            grp_flip(s, s->img[x], 0);
            uint32_t y = grp_probe(s, (int64_t)x + (int64_t)off - p->substitute_span);
            s->img[x] = y;
            grp_flip(s, y, 1);
            i++;
        }
    }
    s->step++;
}

/* LSD radix sort of n row indices below maxv (11 bits per pass). */
static void radix_sort(uint32_t *a, uint32_t *tmp, uint32_t n, uint32_t maxv)
{
    uint32_t cnt[2048];
    for (int shift = 0; shift < 32 && (maxv >> shift); shift += 11) {
        memset(cnt, 0, sizeof cnt);
        for (uint32_t i = 0; i < n; i++) cnt[(a[i] >> shift) & 2047]++;
        uint32_t sum = 0;
        for (int i = 0; i < 2048; i++) { uint32_t c = cnt[i]; cnt[i] = sum; sum += c; }
        for (uint32_t i = 0; i < n; i++) tmp[cnt[(a[i] >> shift) & 2047]++] = a[i];
        memcpy(a, tmp, n * sizeof *a);
    }
}

static uint32_t collect_full(const gen_stream *s, uint32_t *out)
{
    uint32_t n = 0, words = (s->nrows + 63) / 64;
    for (uint32_t w = 0; w < words; w++)
        for (uint64_t b = s->gsel[w]; b; b &= b - 1) out[n++] = w * 64 + (uint32_t)__builtin_ctzll(b);
    return n;
}

static int gen_open(sel_source *src, uint32_t req, uint32_t group, sel_stream **out);
static int gen_next(sel_stream *st, sel_delta *d);
static void gen_close(sel_stream *st);
static void gen_free(sel_source *src);
static const sel_source_ops gen_ops = {gen_open, gen_next, gen_close, gen_free};

static int gen_open(sel_source *src, uint32_t req, uint32_t group, sel_stream **out)
{
    const gen_src *gs = src->impl;
    const trace_shape *sh = &src->meta.shape;
    const gen_params *p = &gs->prm;
    *out = NULL;
    if (req >= sh->n_requests || group >= sh->n_groups)
        return dh_err("generator: no stream (request %u, group %u) in a trace of %u requests and %u groups",
                      req, group, sh->n_requests, sh->n_groups);
    gen_stream *s = xcalloc(1, sizeof *s);
    s->head.ops = &gen_ops;
    s->src = gs;
    s->p = p;
    s->sh = sh;
    s->req = req;
    s->group = group;
    s->k = sh->group_k[group];
    s->compress = sh->group_compress[group];
    s->out_len = sh->output_len[req];
    s->keyframe_interval = src->meta.keyframe_interval;
    uint32_t rows0 = sel_rows_at(sh, req, group, 0);
    s->max_rows = s->out_len ? sel_rows_at(sh, req, group, s->out_len - 1) : rows0;
    if (p->sinks + p->window >= sh->group_k[group] || rows0 < p->sinks + p->window + 1) {
        free(s);
        if (p->sinks + p->window >= sh->group_k[group])
            return dh_err("generator: group %u has k = %u, not above sinks + window = %u", group, sh->group_k[group], p->sinks + p->window);
        return dh_err("generator: request %u starts with %u rows in group %u; the preset needs more than sinks + window = %u",
                      req, rows0, group, p->sinks + p->window);
    }
    /* Groups with the same (k, compress) share one latent process. */
    uint32_t latent_id = 0x80000000u | (uint32_t)(mix64(((uint64_t)s->k << 32) | s->compress) & 0x7FFFFFFF);
    rng_init(&s->lat_rng, src->meta.seed, req, latent_id, 1);
    rng_init(&s->redraw_rng, src->meta.seed, req, latent_id, 4);
    s->grp_key = mix64(src->meta.seed ^ mix64(((uint64_t)req << 32) | group));
    s->subst_threshold = (uint32_t)fmin(4294967295.0, gs->substitute[group] * 4294967296.0);
    s->lat = xcalloc(s->max_rows, sizeof(uint32_t));
    s->img = xcalloc(s->max_rows, sizeof(uint32_t));
    s->mark = xcalloc(s->max_rows, sizeof(uint32_t));
    size_t words = (s->max_rows + 63) / 64;
    s->gsel = xcalloc(words, 8);
    s->touched = xcalloc(words, 8);
    s->orig = xcalloc(words, 8);
    s->heavy = xcalloc(s->k, sizeof(uint32_t));
    s->vol = xcalloc(s->k, sizeof(uint32_t));
    s->added = xcalloc(s->k + 1, sizeof(uint32_t));
    s->removed = xcalloc(s->k + 1, sizeof(uint32_t));
    s->full = xcalloc(s->k + 1, sizeof(uint32_t));
    s->tmp = xcalloc(s->k + 1, sizeof(uint32_t));
    s->horizon = 1;
    while (s->horizon <= p->reuse_far_max) s->horizon <<= 1;
    s->cal = xcalloc(s->horizon, sizeof(u32vec));
    uint32_t dyn = s->k - p->sinks - p->window;
    s->heavy_target = (uint32_t)floor(p->heavy_fraction * dyn + 0.5);
    double heavy_out = p->heavy_leave * s->heavy_target;
    (void)heavy_out;
    s->vol_churn_mean = (1.0 - p->step_overlap) * s->k - (p->window ? 1.0 : 0.0);
    s->remap_rate = gs->overlap[group] < p->step_overlap
                        ? (p->step_overlap - gs->overlap[group]) * s->k / (double)dyn : 0;
    /* Initial state: sinks, window, and a full dynamic part; then burn-in at
     * the context of position 0 so the calendar holds re-references. */
    s->nrows = rows0;
    s->wlo = rows0 - p->window;
    for (uint32_t x = 0; x < p->sinks; x++) { s->lat[x] = CLS_FIXED << CLS_SHIFT; grp_flip(s, x, 1); }
    for (uint32_t x = s->wlo; x < rows0; x++) { s->lat[x] = CLS_FIXED << CLS_SHIFT; grp_flip(s, x, 1); }
    lat_fill(s);
    for (uint32_t i = 0; i < p->warmup; i++) gen_step(s, rows0);
    s->pos = 0;
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
    if (pos == 0) {
        s->n_added = collect_full(s, s->added);
        s->n_removed = 0;
    } else {
        s->tracking = 1;
        gen_step(s, sel_rows_at(s->sh, s->req, s->group, pos));
        s->tracking = 0;
        /* Net change of each touched row: a row removed and re-added within
         * the position is no change. */
        uint32_t na = 0, nr = 0;
        for (uint32_t i = 0; i < s->touch.n; i++) {
            uint32_t y = s->touch.v[i];
            int now = bit_get(s->gsel, y), before = bit_get(s->orig, y);
            bit_clr(s->touched, y);
            if (now && !before) s->added[na++] = y;
            else if (!now && before) s->removed[nr++] = y;
        }
        s->touch.n = 0;
        radix_sort(s->added, s->tmp, na, s->nrows);
        radix_sort(s->removed, s->tmp, nr, s->nrows);
        s->n_added = na;
        s->n_removed = nr;
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
    for (uint32_t i = 0; i < s->horizon; i++) free(s->cal[i].v);
    free(s->cal);
    free(s->touch.v);
    free(s->lat); free(s->img); free(s->mark); free(s->gsel); free(s->touched); free(s->orig);
    free(s->heavy); free(s->vol);
    free(s->added); free(s->removed); free(s->full); free(s->tmp);
    free(s);
}

static void gen_free(sel_source *src)
{
    if (!src) return;
    gen_src *gs = src->impl;
    if (gs) {
        free(gs->substitute);
        free(gs->overlap);
        free(gs->vol_return);
        free(gs->heavy_return);
        free(gs->run_len);
        free(gs);
    }
    trace_meta_release(&src->meta);
    free(src);
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
        for (uint32_t g = 0; g < sh->n_groups; g++)
            if (sel_rows_at(sh, r, g, 0) <= p->sinks + p->window)
                return dh_err("generator: request %u has %u rows in group %u at position 0; preset '%s' needs more than sinks + window = %u",
                              r, sel_rows_at(sh, r, g, 0), g, p->name, p->sinks + p->window);
    gen_src *gs = xcalloc(1, sizeof *gs);
    gs->prm = *p;
    gs->prm.c = NULL;
    gs->prm.group_sizes = NULL;
    gs->substitute = xcalloc(sh->n_groups, sizeof(double));
    gs->overlap = xcalloc(sh->n_groups, sizeof(double));
    if (resolve_profile(cfg_name(p->c), "substitute_profile", p->substitute_spec, p->substitute, 0, 1, sh->n_groups, gs->substitute) < 0 ||
        resolve_profile(cfg_name(p->c), "overlap_profile", p->overlap_spec, p->step_overlap, 0, p->step_overlap, sh->n_groups, gs->overlap) < 0) {
        free(gs->substitute); free(gs->overlap); free(gs);
        return -1;
    }
    build_tables(gs);
    sel_source *src = xcalloc(1, sizeof *src);
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
