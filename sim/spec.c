/* spec.c: draft configs, acceptance sampling, DSpark's verify-length rule and
 * the draft pass's cost; see spec.h for the models and their sources.
 *
 * Everything here runs once per request per step (sampling, confidence) or
 * once per step (the verify-length choice, O(n gamma log(n gamma))), so none of
 * it depends on k or on the context length. */
#include "sim/spec.h"
#include "common/cfgkey.h"
#include "common/dh_err.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A reported tau is checked against the table it documents; 4-decimal tables
 * over at most SPEC_MAX_GAMMA positions round by less than 0.001, so a larger
 * gap means the table does not reproduce its source. */
#define SPEC_TAU_TOLERANCE 0.005

const char *spec_kind_name(spec_kind k)
{
    return k == SPEC_DFLASH2 ? "dflash2" : k == SPEC_DSPARK ? "dspark" : k == SPEC_MTP ? "mtp" : "?";
}

/* ---- loading ---------------------------------------------------------- */

/* ---- the schema (docs/CONFIG.md is printed from it: bin/dhconfig schema) ---- */

static const cfg_key draft_keys[] = {
    CK_STR_ROW("draft", "name", NULL, NULL, "Label of the draft.", 0),
    CK_STR_ROW("draft", "target", NULL, NULL, "The model it drafts for (its [model] name).", 0),
    CK_STR_ROW("draft", "kind", NULL, "dflash2|dspark|mtp", "dflash2, dspark, or mtp (the model's own MTP / EAGLE "
               "layer, SGLang's --speculative-algorithm EAGLE).", 0),
    CK_STR_ROW("draft", "layer_kind", NULL, NULL, "mtp: the target's layer kind the MTP layer copies (its attention, "
               "indexer and experts are costed as the target's).", 0),
    CK_ROW("draft", "num_steps", CK_INT, "tokens", 1, SPEC_MAX_GAMMA, NULL, "mtp: SGLang's speculative_num_steps.", 0),
    CK_ROW("draft", "topk", CK_INT, "", 1, 64, NULL, "mtp: SGLang's speculative_eagle_topk (1: a chain).", 0),
    CK_ROW("draft", "num_draft_tokens", CK_INT, "tokens", 2, 1024, NULL, "mtp: SGLang's speculative_num_draft_tokens "
           "(num_steps + 1 with topk 1).", 0),
    CK_ROW("draft", "layers", CK_INT, "", 1, 1024, NULL, "Draft layers.", 0),
    CK_ROW("draft", "block", CK_INT, "tokens", 1, SPEC_MAX_GAMMA + 1, NULL, "Tokens one draft pass proposes a block of.", 0),
    CK_ROW("draft", "gamma", CK_INT, "tokens", 1, SPEC_MAX_GAMMA, NULL, "Drafted tokens verified per step (at most block).", 0),
    CK_ROW("draft", "window", CK_INT, "tokens", 1, 1L << 40, NULL, "The draft's attention window (mtp: optional, the "
           "newest rows a window-kind MTP layer keeps; absent: the whole context).", 0),
    CK_ROW("draft", "hidden", CK_NUM, "", 1, 1e6, NULL, "Draft hidden size.", 0),
    CK_ROW("draft", "row_bytes", CK_NUM, "bytes", 1, 1e9, NULL, "Bytes of one draft KV row.", 0),
    CK_ROW("draft", "weight_bytes", CK_NUM, "bytes", 1, 1e13, NULL, "Draft weights.", 0),
    CK_ROW("draft", "weight_shards", CK_NUM, "", 1, 1024, NULL, "GPUs the draft weights are split over.", 0),
    CK_ROW("draft", "pass_bytes", CK_NUM, "bytes", 0, 1e13, NULL, "Bytes one draft pass reads besides weights and KV.", 0),
    CK_ROW("draft", "flops_per_token", CK_NUM, "FLOP", 0, 1e15, NULL, "Draft FLOPs per token.", 0),
    CK_ROW("draft", "attn_flops_per_row", CK_NUM, "FLOP", 0, 1e12, NULL, "Draft attention FLOPs per KV row.", 0),
    CK_ROW("draft", "fp8", CK_BOOL, "", 0, 0, NULL, "Draft math at the FP8 rate (else BF16).", 0),
    CK_ROW("dspark", "markov_rank", CK_NUM, "", 1, 1e5, NULL, "DSpark: rank of the Markov head.", 0),
    CK_ROW("dspark", "vocab", CK_NUM, "tokens", 1, 1e8, NULL, "DSpark: vocabulary size.", 0),
    CK_ROW("dspark", "markov_value_bytes", CK_NUM, "bytes", 0.125, 8, NULL, "DSpark: bytes per Markov value.", 0),
    CK_ROW("dspark", "confidence_params", CK_NUM, "", 0, 1e11, NULL, "DSpark: parameters of the confidence head.", 0),
    CK_ROW("dspark", "confidence_concentration", CK_NUM, "", 1e-3, 1e9, NULL, "DSpark: concentration of the confidence model.", 0),
    CK_ROW("dspark", "confidence_error", CK_NUM, "", 0, 10, NULL, "DSpark: error of the confidence model.", 0),
    CK_ROW("accept.BUCKET", "marginal", CK_LIST, "", 0, 1, NULL, "P(position i accepted), i = 1 .. gamma, not increasing. BUCKET is ctx_le_N (contexts up to N tokens) or ctx_any (the rest, required).", 0),
    CK_DYN_ROW("accept.BUCKET", "reported_tau", CK_NUM, "tokens", 1, 1 + SPEC_MAX_GAMMA, "(none)", "1 .. 1 + gamma", "The paper's mean accepted length, checked against the table (with reported_tau_positions).", 0),
    CK_DYN_ROW("accept.BUCKET", "reported_tau_positions", CK_INT, "", 1, SPEC_MAX_GAMMA, "(none)", "1 .. gamma", "Positions the reported tau counts.", 0),
};
const cfg_schema draft_schema = CFG_SCHEMA("models/drafts/NAME.ini", "Speculative draft", "A draft model and its acceptance tables per context bucket (sim/spec.h); [dspark] for kind = dspark.", draft_keys);

static int parse_bucket(const char *file, const char *sec, uint64_t *ctx_max)
{
    const char *p = sec + strlen("accept.");
    if (!strcmp(p, "ctx_any")) {
        *ctx_max = UINT64_MAX;
        return 0;
    }
    if (strncmp(p, "ctx_le_", 7) != 0 || !p[7])
        return dh_err("%s: section [%s]: expected [accept.ctx_le_N] or [accept.ctx_any]", file, sec);
    uint64_t v = 0;
    for (const char *q = p + 7; *q; q++) {
        if (*q < '0' || *q > '9' || v > (UINT64_MAX - 9) / 10)
            return dh_err("%s: section [%s]: '%s' is not a context length in tokens", file, sec, p + 7);
        v = v * 10 + (uint64_t)(*q - '0');
    }
    if (v == 0) return dh_err("%s: section [%s]: the context bound must be at least 1 token", file, sec);
    *ctx_max = v;
    return 0;
}

static int load_bucket(cfg *c, const char *sec, uint32_t gamma, spec_accept_table *t)
{
    const char *file = cfg_name(c);
    size_t n;
    memset(t->marginal, 0, sizeof t->marginal);
    if (cfgk_doubles(c, &draft_schema, sec, "marginal", t->marginal, SPEC_MAX_GAMMA, &n) < 0) return -1;
    if (n != gamma)
        return dh_err("%s: [%s] marginal has %zu values, expected gamma = %u", file, sec, n, gamma);
    for (uint32_t i = 1; i < gamma; i++)
        if (t->marginal[i] > t->marginal[i - 1])
            return dh_err("%s: [%s] marginal: item %u = %g exceeds item %u = %g; the table lists "
                          "P(position i accepted), which cannot rise (a position is accepted only "
                          "if every earlier one was)", file, sec, i + 1, t->marginal[i], i, t->marginal[i - 1]);
    for (uint32_t i = 0; i < gamma; i++) {
        double prev = i ? t->marginal[i - 1] : 1.0;
        t->cond[i] = prev > 0 ? t->marginal[i] / prev : 0.0;
        if (t->cond[i] > 1) t->cond[i] = 1; /* rounding of a[i] / a[i-1] with a[i] == a[i-1] */
    }
    int have_tau = cfg_has(c, sec, "reported_tau"), have_pos = cfg_has(c, sec, "reported_tau_positions");
    if (have_tau != have_pos)
        return dh_err("%s: [%s] reported_tau and reported_tau_positions go together (missing key '%s')",
                      file, sec, have_tau ? "reported_tau_positions" : "reported_tau");
    if (have_tau) {
        double tau;
        long npos;
        if (cfgk_double_in(c, &draft_schema, sec, "reported_tau", &tau, CFG_REQUIRED, 1, 1 + (double)gamma) < 0) return -1;
        if (cfgk_int_in(c, &draft_schema, sec, "reported_tau_positions", &npos, CFG_REQUIRED, 1, gamma) < 0) return -1;
        double model = 1 + spec_expected_accepted(t, (uint32_t)npos);
        if (fabs(model - tau) > SPEC_TAU_TOLERANCE)
            return dh_err("%s: [%s] the table gives tau = 1 + a[0] + ... + a[%ld] = %.4f at %ld positions, "
                          "but reported_tau = %g", file, sec, npos - 1, model, npos, tau);
    }
    return 0;
}

static int cmp_bucket(const void *a, const void *b)
{
    uint64_t x = ((const spec_accept_table *)a)->ctx_max, y = ((const spec_accept_table *)b)->ctx_max;
    return x < y ? -1 : x > y;
}

/* The [draft] keys of kind = mtp (spec.h): SGLang's three speculative settings, the layer
 * kind and the extra bytes and FLOPs of a draft forward. The chain's drafts are gamma =
 * num_steps; the verified tokens per request, block = num_draft_tokens; no ring (the MTP
 * layers keep their KV for the whole context). */
static int mtp_keys(cfg *c, spec_draft *d)
{
    const char *file = cfg_name(c), *S = "draft", *s;
    long steps, topk, tokens;
    if (cfg_get_string(c, S, "layer_kind", &s, CFG_REQUIRED) < 0) return -1;
    if (strlen(s) >= sizeof d->layer_kind) return dh_err("%s: [draft] layer_kind '%s' is too long", file, s);
    snprintf(d->layer_kind, sizeof d->layer_kind, "%s", s);
    if (cfg_get_int(c, S, "num_steps", &steps, CFG_REQUIRED, 1, SPEC_MAX_GAMMA) < 0 ||
        cfg_get_int(c, S, "topk", &topk, CFG_REQUIRED, 1, 64) < 0 ||
        cfg_get_int(c, S, "num_draft_tokens", &tokens, CFG_REQUIRED, 2, 1024) < 0)
        return -1;
    /* SGLang's rule: one branch verifies its chain and the last accepted token; a tree at most
     * every branch of every step. */
    if (topk == 1 && tokens != steps + 1)
        return dh_err("%s: [draft] num_draft_tokens = %ld with topk = 1 must be num_steps + 1 = %ld", file, tokens,
                      steps + 1);
    if (tokens < steps + 1 || tokens > topk * steps + 1)
        return dh_err("%s: [draft] num_draft_tokens = %ld is outside [num_steps + 1, topk x num_steps + 1] = [%ld, %ld]",
                      file, tokens, steps + 1, topk * steps + 1);
    d->gamma = (uint32_t)steps;
    d->topk = (uint32_t)topk;
    d->draft_tokens = d->block = (uint32_t)tokens;
    /* A window-kind MTP layer (DeepSeek-V4's: compress ratio 0) keeps its newest rows only. */
    const long whole = 0;
    long win;
    if (cfg_get_int(c, S, "window", &win, &whole, 1, 1L << 40) < 0) return -1;
    d->window = win ? (uint64_t)win : UINT64_MAX;
    if (cfg_get_double(c, S, "hidden", &d->hidden, CFG_REQUIRED, 1, 1e6) < 0 ||
        cfg_get_double(c, S, "row_bytes", &d->row_bytes, CFG_REQUIRED, 1, 1e9) < 0 ||
        cfg_get_double(c, S, "weight_bytes", &d->weight_bytes, CFG_REQUIRED, 1, 1e13) < 0 ||
        cfg_get_double(c, S, "weight_shards", &d->weight_shards, CFG_REQUIRED, 1, 1024) < 0 ||
        cfg_get_double(c, S, "pass_bytes", &d->pass_bytes, CFG_REQUIRED, 0, 1e13) < 0 ||
        cfg_get_double(c, S, "flops_per_token", &d->flops_per_token, CFG_REQUIRED, 0, 1e15) < 0 ||
        cfg_get_bool(c, S, "fp8", &d->fp8, CFG_REQUIRED) < 0)
        return -1;
    return 0;
}

int spec_draft_from_cfg(cfg *c, spec_draft **out)
{
    *out = NULL;
    const char *file = cfg_name(c);
    spec_draft *d = calloc(1, sizeof *d);
    if (!d) abort();
    const char *S = "draft", *s;
    long l;
    if (!cfg_has_section(c, S)) { dh_err("%s: missing section [draft]", file); goto fail; }
    if (cfgk_string(c, &draft_schema, S, "name", &s) < 0) goto fail;
    snprintf(d->name, sizeof d->name, "%s", s);
    if (cfgk_string(c, &draft_schema, S, "target", &s) < 0) goto fail;
    snprintf(d->target, sizeof d->target, "%s", s);
    if (cfgk_string(c, &draft_schema, S, "kind", &s) < 0) goto fail;
    if (!strcmp(s, "dflash2")) d->kind = SPEC_DFLASH2;
    else if (!strcmp(s, "dspark")) d->kind = SPEC_DSPARK;
    else if (!strcmp(s, "mtp")) d->kind = SPEC_MTP;
    else { dh_err("%s: [draft] kind = '%s' (expected dflash2, dspark or mtp)", file, s); goto fail; }
    if (cfgk_int(c, &draft_schema, S, "layers", &l) < 0) goto fail;
    d->layers = (uint32_t)l;
    if (d->kind == SPEC_MTP) {
        if (mtp_keys(c, d) < 0) goto fail;
        goto tables;
    }
    if (cfgk_double(c, &draft_schema, S, "hidden", &d->hidden) < 0) goto fail;
    if (cfgk_int(c, &draft_schema, S, "block", &l) < 0) goto fail;
    d->block = (uint32_t)l;
    if (cfgk_int(c, &draft_schema, S, "gamma", &l) < 0) goto fail;
    d->gamma = (uint32_t)l;
    if (d->gamma > d->block) {
        dh_err("%s: [draft] gamma = %u exceeds block = %u (a pass drafts at most its block)", file, d->gamma, d->block);
        goto fail;
    }
    if (cfgk_int(c, &draft_schema, S, "window", &l) < 0) goto fail;
    d->window = (uint64_t)l;
    if (cfgk_double(c, &draft_schema, S, "row_bytes", &d->row_bytes) < 0 ||
        cfgk_double(c, &draft_schema, S, "weight_bytes", &d->weight_bytes) < 0 ||
        cfgk_double(c, &draft_schema, S, "weight_shards", &d->weight_shards) < 0 ||
        cfgk_double(c, &draft_schema, S, "pass_bytes", &d->pass_bytes) < 0 ||
        cfgk_double(c, &draft_schema, S, "flops_per_token", &d->flops_per_token) < 0 ||
        cfgk_double(c, &draft_schema, S, "attn_flops_per_row", &d->attn_flops_per_row) < 0 ||
        cfgk_bool(c, &draft_schema, S, "fp8", &d->fp8) < 0)
        goto fail;

tables:;
    /* Acceptance buckets, and no section this module does not know. */
    int has_dspark = 0;
    for (size_t i = 0; i < cfg_section_count(c); i++) {
        const char *sec = cfg_section_name(c, i);
        if (!strcmp(sec, "draft")) continue;
        if (!strcmp(sec, "dspark")) { has_dspark = 1; continue; }
        if (strncmp(sec, "accept.", 7) != 0) {
            dh_err("%s: unknown section [%s] (expected [draft], [accept.ctx_le_N], [accept.ctx_any], [dspark])", file, sec);
            goto fail;
        }
        if (d->n_buckets == SPEC_MAX_BUCKETS) {
            dh_err("%s: more than %d acceptance buckets", file, SPEC_MAX_BUCKETS);
            goto fail;
        }
        spec_accept_table *t = &d->bucket[d->n_buckets];
        if (parse_bucket(file, sec, &t->ctx_max) < 0 || load_bucket(c, sec, d->gamma, t) < 0) goto fail;
        for (uint32_t j = 0; j < d->n_buckets; j++)
            if (d->bucket[j].ctx_max == t->ctx_max) {
                dh_err("%s: section [%s] repeats an earlier bucket's context bound", file, sec);
                goto fail;
            }
        d->n_buckets++;
    }
    qsort(d->bucket, d->n_buckets, sizeof d->bucket[0], cmp_bucket);
    if (d->n_buckets == 0 || d->bucket[d->n_buckets - 1].ctx_max != UINT64_MAX) {
        dh_err("%s: missing section [accept.ctx_any] (the acceptance table for every context beyond the last bucket)", file);
        goto fail;
    }

    if (d->kind == SPEC_DSPARK) {
        const char *D = "dspark";
        if (!has_dspark) { dh_err("%s: kind = dspark needs a [dspark] section", file); goto fail; }
        if (cfgk_double(c, &draft_schema, D, "markov_rank", &d->markov_rank) < 0 ||
            cfgk_double(c, &draft_schema, D, "vocab", &d->vocab) < 0 ||
            cfgk_double(c, &draft_schema, D, "markov_value_bytes", &d->markov_value_bytes) < 0 ||
            cfgk_double(c, &draft_schema, D, "confidence_params", &d->confidence_params) < 0 ||
            cfgk_double(c, &draft_schema, D, "confidence_concentration", &d->confidence_concentration) < 0 ||
            cfgk_double(c, &draft_schema, D, "confidence_error", &d->confidence_error) < 0)
            goto fail;
    } else if (has_dspark) {
        dh_err("%s: section [dspark] given for kind = %s (it belongs to kind = dspark)", file, spec_kind_name(d->kind));
        goto fail;
    }
    if (cfg_check_unused(c) < 0) goto fail;
    *out = d;
    return 0;
fail:
    free(d);
    return -1;
}

int spec_draft_load(const char *path, spec_draft **out)
{
    *out = NULL;
    cfg *c;
    if (cfg_load(path, &c) < 0) return -1;
    int rc = spec_draft_from_cfg(c, out);
    cfg_free(c);
    return rc;
}

void spec_draft_free(spec_draft *d) { free(d); }

/* ---- acceptance ------------------------------------------------------- */

const spec_accept_table *spec_table(const spec_draft *d, uint64_t ctx_len)
{
    /* A handful of buckets: a linear scan is the obvious O(buckets). */
    for (uint32_t i = 0; i < d->n_buckets; i++)
        if (ctx_len <= d->bucket[i].ctx_max) return &d->bucket[i];
    DH_BUG_ON(1); /* the loader guarantees a ctx_any bucket */
    return NULL;
}

double spec_expected_accepted(const spec_accept_table *t, uint32_t gamma)
{
    DH_BUG_ON(gamma > SPEC_MAX_GAMMA);
    double e = 0;
    for (uint32_t i = 0; i < gamma; i++) e += t->marginal[i];
    return e;
}

double spec_variance_accepted(const spec_accept_table *t, uint32_t gamma)
{
    DH_BUG_ON(gamma > SPEC_MAX_GAMMA);
    /* E[A^2] = sum_j j^2 P(A = j) = sum_i (2i + 1) P(A >= i + 1). */
    double e = 0, e2 = 0;
    for (uint32_t i = 0; i < gamma; i++) {
        e += t->marginal[i];
        e2 += (2.0 * i + 1) * t->marginal[i];
    }
    return e2 - e * e;
}

void spec_stream(rng_stream *r, uint64_t seed, uint32_t request, uint32_t step, uint32_t purpose)
{
    rng_init(r, seed, request, 0, purpose);
    rng_seek(r, step);
}

uint32_t spec_sample_marginal(const double *marginal, uint32_t gamma, rng_stream *r)
{
    double u = rng_uniform(r);
    uint32_t a = 0;
    /* a[] does not rise, so the accepted prefix ends at the first a[i] <= u. */
    while (a < gamma && u < marginal[a]) a++;
    return a;
}

uint32_t spec_sample_accepted(const spec_draft *d, uint64_t ctx_len, uint32_t gamma, rng_stream *r)
{
    DH_BUG_ON(gamma > d->gamma);
    return spec_sample_marginal(spec_table(d, ctx_len)->marginal, gamma, r);
}

/* Standard normal (Box-Muller; 1 - u keeps the log finite). */
static double normal(rng_stream *r)
{
    double u = 1.0 - rng_uniform(r), v = rng_uniform(r);
    return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}

/* Gamma(shape, 1) by Marsaglia and Tsang (2000); shape < 1 by the boost
 * Gamma(a) = Gamma(a + 1) U^(1/a). Expected draws per variate < 1.1 for a >= 1. */
static double gamma_variate(rng_stream *r, double a)
{
    if (a < 1) {
        double u = 1.0 - rng_uniform(r);
        return gamma_variate(r, a + 1) * pow(u, 1.0 / a);
    }
    double dd = a - 1.0 / 3.0, cc = 1.0 / sqrt(9.0 * dd);
    for (;;) {
        double z = normal(r), v = 1 + cc * z;
        if (v <= 0) continue;
        v = v * v * v;
        double u = 1.0 - rng_uniform(r);
        if (log(u) < 0.5 * z * z + dd - dd * v + dd * log(v)) return dd * v;
    }
}

/* Beta(kappa m, kappa (1 - m)): mean m; 0 and 1 stay exact. */
static double beta_mean(rng_stream *r, double m, double kappa)
{
    if (m <= 0 || m >= 1) return m;
    double x = gamma_variate(r, kappa * m), y = gamma_variate(r, kappa * (1 - m));
    /* Both can underflow to 0 only for absurdly small shapes; keep the mean then. */
    return x + y > 0 ? x / (x + y) : m;
}

void spec_confidence(const spec_draft *d, uint64_t ctx_len, uint64_t seed, uint32_t request,
                     uint32_t step, spec_conf *out)
{
    const spec_accept_table *t = spec_table(d, ctx_len);
    out->gamma = d->gamma;
    if (d->kind != SPEC_DSPARK) {
        for (uint32_t i = 0; i < d->gamma; i++) out->marginal[i] = out->predicted[i] = t->marginal[i];
        return;
    }
    rng_stream rt, rh;
    spec_stream(&rt, seed, request, step, SPEC_RNG_CONF_TRUE);
    spec_stream(&rh, seed, request, step, SPEC_RNG_CONF_HEAD);
    double m = 1, p = 1;
    for (uint32_t i = 0; i < d->gamma; i++) {
        double c = beta_mean(&rt, t->cond[i], d->confidence_concentration), ch = c;
        if (c > 0 && c < 1 && d->confidence_error > 0) {
            double z = log(c / (1 - c)) + d->confidence_error * normal(&rh);
            ch = 1.0 / (1.0 + exp(-z));
        }
        m *= c;
        p *= ch;
        out->marginal[i] = m;
        out->predicted[i] = p;
    }
}

uint32_t spec_accept(const spec_conf *cf, uint32_t verify_len, uint64_t seed, uint32_t request, uint32_t step)
{
    DH_BUG_ON(verify_len > cf->gamma);
    rng_stream r;
    spec_stream(&r, seed, request, step, SPEC_RNG_ACCEPT);
    return spec_sample_marginal(cf->marginal, verify_len, &r);
}

double spec_accept_expected(const spec_conf *cf, uint32_t verify_len)
{
    DH_BUG_ON(verify_len > cf->gamma);
    double e = 0;
    for (uint32_t i = 0; i < verify_len; i++) e += cf->marginal[i];
    return e;
}

/* ---- DSpark verify length --------------------------------------------- */

typedef struct {
    double p;
    uint32_t req, pos;
} candidate;

static int cmp_candidate(const void *a, const void *b)
{
    const candidate *x = a, *y = b;
    if (x->p != y->p) return x->p > y->p ? -1 : 1;
    if (x->req != y->req) return x->req < y->req ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

double spec_verify_objective(const double *predicted, uint32_t n, uint32_t stride,
                             const uint32_t *verify_len, spec_time_fn step_time, void *user)
{
    double tokens = 0, verified = 0;
    for (uint32_t r = 0; r < n; r++) {
        tokens += 1;
        verified += verify_len[r] + 1.0;
        for (uint32_t i = 0; i < verify_len[r]; i++) tokens += predicted[(size_t)r * stride + i];
    }
    double t = step_time(verified, user);
    DH_BUG_ON(!(t > 0));
    return tokens / t;
}

double spec_choose_verify(const double *predicted, uint32_t n, uint32_t gamma, uint32_t stride,
                          spec_time_fn step_time, void *user, uint32_t *verify_len)
{
    DH_BUG_ON(gamma > stride && n > 1);
    size_t nc = (size_t)n * gamma;
    candidate *c = malloc((nc ? nc : 1) * sizeof *c);
    if (!c) abort();
    for (uint32_t r = 0; r < n; r++)
        for (uint32_t i = 0; i < gamma; i++) {
            double p = predicted[(size_t)r * stride + i];
            /* Greedy is exact only for non-increasing lists; spec_confidence builds them so. */
            DH_BUG_ON(p < 0 || p > 1 || (i > 0 && p > predicted[(size_t)r * stride + i - 1]));
            c[(size_t)r * gamma + i] = (candidate){p, r, i};
        }
    /* Sorting by p (ties by request, then position) yields every request's
     * positions in order, so each prefix of c is a valid allocation, and the
     * best allocation of any total is the prefix of that length. */
    qsort(c, nc, sizeof *c, cmp_candidate);
    double tokens = n, best = -1;
    size_t best_k = 0;
    for (size_t k = 0; k <= nc; k++) {
        if (k > 0) tokens += c[k - 1].p;
        double t = step_time((double)n + (double)k, user);
        DH_BUG_ON(!(t > 0));
        double obj = tokens / t;
        if (obj > best) { best = obj; best_k = k; }
    }
    for (uint32_t r = 0; r < n; r++) verify_len[r] = 0;
    for (size_t k = 0; k < best_k; k++) verify_len[c[k].req]++;
    free(c);
    return best;
}

/* ---- memory and cost -------------------------------------------------- */

static double bias_bytes(const spec_draft *d)
{
    if (d->kind != SPEC_DSPARK) return 0;
    /* U (vocab x rank) and V (rank x vocab), plus the confidence head. */
    return (2.0 * d->markov_rank * d->vocab + d->confidence_params) * d->markov_value_bytes;
}

double spec_weight_bytes_per_gpu(const spec_draft *d)
{
    return d->weight_bytes / d->weight_shards + bias_bytes(d);
}

double spec_ring_rows(const spec_draft *d, uint64_t ctx, int ring_on)
{
    return (double)(ring_on && ctx > d->window ? d->window : ctx);
}

double spec_ring_bytes(const spec_draft *d, uint64_t ctx, int ring_on)
{
    return spec_ring_rows(d, ctx, ring_on) * d->row_bytes;
}

static void backbone_cost(const spec_draft *d, double n_req, double ring_rows, spec_cost *c)
{
    /* Weights once per pass; each of the block positions of every request does
     * the dense work and attends over its request's ring. */
    c->bytes = d->pass_bytes + ring_rows * d->row_bytes;
    c->flops = n_req * d->block * d->flops_per_token + d->block * ring_rows * d->attn_flops_per_row;
}

static void head_cost(const spec_draft *d, double n_req, spec_cost *c)
{
    c->bytes = bias_bytes(d);
    /* Per drafted token: the rank-r bias U[prev] V over the vocabulary and the
     * confidence head. */
    c->flops = d->kind == SPEC_DSPARK ? n_req * d->gamma * (2.0 * d->markov_rank * d->vocab + 2.0 * d->confidence_params) : 0;
}

void spec_draft_cost(const spec_draft *d, double n_req, double ring_rows, spec_cost *c)
{
    spec_cost b, h;
    backbone_cost(d, n_req, ring_rows, &b);
    head_cost(d, n_req, &h);
    c->bytes = b.bytes + h.bytes;
    c->flops = b.flops + h.flops;
}

double spec_draft_time(const spec_draft *d, const hw_profile *hw, double compute_sms, double n_req,
                       double ring_rows)
{
    if (n_req <= 0) return 0;
    spec_cost b, h;
    backbone_cost(d, n_req, ring_rows, &b);
    double t = d->layers * cost_roofline_time(&hw->cost.roof, b.bytes / d->layers, b.flops / d->layers, d->fp8, compute_sms);
    if (d->kind == SPEC_DSPARK) {
        head_cost(d, n_req, &h);
        t += cost_roofline_time(&hw->cost.roof, h.bytes, h.flops, d->fp8, compute_sms);
    }
    return t;
}
