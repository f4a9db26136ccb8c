/* model.c: model configs with per-layer kinds and a repeated layer list; see model.h. */
#include "sim/model.h"
#include "common/cfgkey.h"
#include "common/dh_err.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the schema (docs/CONFIG.md is generated from it: bin/dhconfig schema) ---- */

#define INH "the base kind's; required without base"
static const cfg_key model_keys[] = {
    CK_ROW("model", "name", CK_STR, "", 0, 0, NULL, "Label of the model.", 0),
    CK_ROW("model", "layers", CK_STR, "", 0, 0, NULL, "The layer list: item (',' item)*, item = KIND or '(' list ')', "
           "each with an optional '*' COUNT (at most 4096 layers).", 0),
    CK_ROW("model", "hidden", CK_NUM, "", 1, 1e7, NULL, "Hidden size.", 0),
    CK_ROW("model", "active_params", CK_NUM, "", 1, 1e15, NULL, "Parameters active per token (their FLOPs).", 0),
    CK_ROW("model", "experts", CK_NUM, "", 0, 1e6, NULL, "Routed experts per MoE layer (0: dense).", 0),
    CK_ROW("model", "experts_per_token", CK_NUM, "", 0, 1e6, NULL, "Experts each token is routed to (at most experts).", 0),
    CK_ROW("model", "expert_bytes", CK_NUM, "bytes", 0, 1e13, NULL, "Weights of one expert of one layer.", 0),
    CK_ROW("model", "moe_dispatch_bytes", CK_NUM, "bytes", 0, 1e9, "0", "All-to-all dispatch message per routed (token, "
           "expert) pair; 0: the instance's moe_comm_s is the whole cost.", 0),
    CK_ROW("model", "moe_combine_bytes", CK_NUM, "bytes", 0, 1e9, "0", "All-to-all combine message per routed pair.", 0),
    CK_ROW("model", "embed_params", CK_NUM, "", 0, 1e13, "0", "Embedding parameters (memplan.h); 0: not given.", 0),
    CK_ROW("model", "lm_head_params", CK_NUM, "", 0, 1e13, "0", "LM head parameters; 0: not given.", 0),
    CK_ROW("model", "quant_bytes_per_param", CK_NUM, "bytes", 0, 8, "0", "Bytes per parameter of the quantised weights "
           "(FP8: 1; with their scales); 0: the weights are not computed from the model.", 0),
    CK_ROW("model", "unquant_bytes_per_param", CK_NUM, "bytes", 0, 8, "0", "Bytes per parameter of the weights kept "
           "unquantised (embeddings, norms, router: BF16 2).", 0),
    CK_ROW("kind.NAME", "base", CK_STR, "", 0, 0, "", "An earlier kind whose values this one starts from.", 0),
    CK_DYN_ROW("kind.NAME", "select", CK_STR, "", 0, 0, INH, "`own`, `reuse`, `window`, `dense`", "How the layer picks its rows: "
               "its own indexer's top-k, the previous selecting layer's rows, a sliding window, or every row (always "
               "resident, as DeepSeek-V4's C128 layers).", 0),
    CK_DYN_ROW("kind.NAME", "kv", CK_STR, "", 0, 0, "the base kind's, else own", "`own`, `reuse`", "Whether the layer holds "
               "KV rows of its own or reads another layer's.", 0),
    CK_DYN_ROW("kind.NAME", "row_bytes", CK_NUM, "bytes", 1, 1e7, INH, NULL, "Bytes of one KV row of this layer.", 0),
    CK_DYN_ROW("kind.NAME", "row_bytes_bf16", CK_NUM, "bytes", 0, 1e7, "the base kind's, else 0 (not given)", NULL,
               "Bytes of one KV row in BF16 (instance kv_dtype = bf16).", 0),
    CK_DYN_ROW("kind.NAME", "compress", CK_INT, "tokens/row", 1, 1 << 20, "the base kind's, else 1", NULL, "Tokens per "
               "KV row (compressed attention).", 0),
    CK_DYN_ROW("kind.NAME", "topk", CK_INT, "rows", 0, 1 << 24, INH " (window: 0)", "1 .. 16777216; window layers 0 .. "
               "16777216", "Rows selected per query.", 0),
    CK_DYN_ROW("kind.NAME", "window", CK_INT, "rows", 0, 1 << 24, "the base kind's; required for select = window, else 0",
               "window layers 1 .. 16777216, else 0 .. 16777216", "Sliding window of a window layer.", 0),
    CK_DYN_ROW("kind.NAME", "indexer_key_bytes", CK_NUM, "bytes", 0, 1e7, INH " (select = own only)",
               "0 .. 1e+07 for select = own, else 0", "Bytes of one indexer key per row.", 0),
    CK_DYN_ROW("kind.NAME", "indexer_heads", CK_NUM, "", 0, 1e5, INH " (select = own)", "1 .. 100000 for select = own, "
               "else 0 .. 100000 (unused)", "Indexer heads.", 0),
    CK_DYN_ROW("kind.NAME", "indexer_dim", CK_NUM, "", 0, 1e6, INH " (select = own)", "1 .. 1e+06 for select = own, else "
               "0 .. 1e+06 (unused)", "Indexer head dimension.", 0),
    CK_DYN_ROW("kind.NAME", "attn_heads", CK_NUM, "", 1, 1e5, INH, NULL, "Attention heads.", 0),
    CK_DYN_ROW("kind.NAME", "attn_qk_dim", CK_NUM, "", 1, 1e6, INH, NULL, "Query/key head dimension.", 0),
    CK_DYN_ROW("kind.NAME", "attn_v_dim", CK_NUM, "", 1, 1e6, INH, NULL, "Value head dimension.", 0),
    CK_DYN_ROW("kind.NAME", "attn_fp8", CK_BOOL, "", 0, 0, "the base kind's, else true", NULL, "Attention math at the FP8 "
               "rate (else BF16).", 0),
    CK_DYN_ROW("kind.NAME", "attn_params", CK_NUM, "", 0, 1e13, "the base kind's, else 0 (not given)", NULL,
               "Attention parameters of one layer of this kind (memplan.h).", 0),
    CK_DYN_ROW("kind.NAME", "indexer_params", CK_NUM, "", 0, 1e13, "the base kind's, else 0", NULL,
               "Indexer parameters of one layer.", 0),
    CK_DYN_ROW("kind.NAME", "mlp_params", CK_NUM, "", 0, 1e13, "the base kind's, else 0", NULL,
               "A dense layer's MLP parameters.", 0),
    CK_DYN_ROW("kind.NAME", "shared_expert_params", CK_NUM, "", 0, 1e13, "the base kind's, else 0", NULL,
               "An MoE layer's shared-expert parameters.", 0),
    CK_DYN_ROW("kind.NAME", "router_params", CK_NUM, "", 0, 1e13, "the base kind's, else 0", NULL,
               "An MoE layer's router parameters.", 0),
    CK_DYN_ROW("kind.NAME", "absorb_params", CK_NUM, "", 0, 1e13, "the base kind's, else 0", NULL,
               "MLA up-projection parameters (heads x (qk_nope + v_head) x kv_lora_rank) a framework keeps again as "
               "the absorbed w_kc, w_vc (memplan.h).", 0),
    CK_DYN_ROW("kind.NAME", "moe", CK_BOOL, "", 0, 0, "the base kind's, else false", NULL, "The layer's FFN is routed "
               "experts.", 0),
};
#undef INH
const cfg_schema model_schema = CFG_SCHEMA("models/NAME.ini", "Model",
    "A model's layers as kinds ([kind.NAME] sections) and a repeated layer list (sim/model.h).", model_keys);

#define MAX_KINDS 32
#define MAX_LAYERS 4096

typedef struct {
    model_kind kind[MAX_KINDS];
    uint32_t n;
} kind_set;

static int find_kind(const kind_set *ks, const char *name, size_t len)
{
    for (uint32_t i = 0; i < ks->n; i++)
        if (strlen(ks->kind[i].name) == len && !strncmp(ks->kind[i].name, name, len)) return (int)i;
    return -1;
}

static int load_kind(cfg *c, const char *sec, kind_set *ks)
{
    if (ks->n == MAX_KINDS) return dh_err("%s: more than %d layer kinds", cfg_name(c), MAX_KINDS);
    model_kind k;
    memset(&k, 0, sizeof k);
    k.compress = 1;
    k.kv_own = 1;
    k.attn_fp8 = 1;
    const char *base;
    int rc = cfgk_string(c, &model_schema, sec, "base", &base);
    if (rc < 0) return -1;
    if (*base) {
        int b = find_kind(ks, base, strlen(base));
        if (b < 0) return dh_err("%s: [%s] base = '%s' is not an earlier kind", cfg_name(c), sec, base);
        k = ks->kind[b];
    }
    snprintf(k.name, sizeof k.name, "%s", sec + 5);
    double d;
    long l;
    int bv;
#define DBL(key, field, lo, hi) do { double def_ = k.field; \
        if (cfgk_double_in(c, &model_schema, sec, key, &d, *base ? &def_ : CFG_REQUIRED, lo, hi) < 0) { return -1; } \
        k.field = d; } while (0)
#define U32(key, field, lo, hi, req) do { long def_ = (long)k.field; \
        if (cfgk_int_in(c, &model_schema, sec, key, &l, (*base || !(req)) ? &def_ : CFG_REQUIRED, lo, hi) < 0) { return -1; } \
        k.field = (uint32_t)l; } while (0)
#define BOOL(key, field) do { int def_ = k.field; \
        if (cfgk_bool_or(c, &model_schema, sec, key, &bv, &def_) < 0) { return -1; } \
        k.field = bv; } while (0)
    const char *sel, *kv;
    static const char *const sel_name[] = { "own", "reuse", "window", "dense" };
    if (cfgk_string_or(c, &model_schema, sec, "select", &sel, *base ? sel_name[k.select] : CFG_REQUIRED) < 0) return -1;
    if (!strcmp(sel, "own")) k.select = MODEL_SELECT_OWN;
    else if (!strcmp(sel, "reuse")) k.select = MODEL_SELECT_REUSE;
    else if (!strcmp(sel, "window")) k.select = MODEL_SELECT_WINDOW;
    else if (!strcmp(sel, "dense")) k.select = MODEL_SELECT_DENSE;
    else return dh_err("%s: [%s] select = '%s' (expected own, reuse, window or dense)", cfg_name(c), sec, sel);
    if (cfgk_string_or(c, &model_schema, sec, "kv", &kv, k.kv_own ? "own" : "reuse") < 0) return -1;
    if (!strcmp(kv, "own")) k.kv_own = 1;
    else if (!strcmp(kv, "reuse")) k.kv_own = 0;
    else return dh_err("%s: [%s] kv = '%s' (expected own or reuse)", cfg_name(c), sec, kv);
    DBL("row_bytes", row_bytes, 1, 1e7);
    {   /* optional: the row in BF16 (0 = not given), inherited from a base */
        double def_ = k.row_bytes_bf16;
        if (cfg_get_double(c, sec, "row_bytes_bf16", &d, &def_, 0, 1e7) < 0) return -1;
        k.row_bytes_bf16 = d;
    }
    U32("compress", compress, 1, 1 << 20, 0);
    int needs_sel = k.select == MODEL_SELECT_OWN || k.select == MODEL_SELECT_REUSE;
    if (!needs_sel) k.topk = 0;
    U32("topk", topk, needs_sel ? 1 : 0, 1 << 24, needs_sel);
    if (!needs_sel && k.topk) return dh_err("%s: [%s] topk = %u: a %s layer selects no rows", cfg_name(c), sec, k.topk, sel);
    U32("window", window, k.select == MODEL_SELECT_WINDOW ? 1 : 0, 1 << 24, k.select == MODEL_SELECT_WINDOW);
    double zero = 0;
    if (k.select == MODEL_SELECT_OWN) {
        DBL("indexer_key_bytes", indexer_key_bytes, 0, 1e7);
        DBL("indexer_heads", indexer_heads, 1, 1e5);
        DBL("indexer_dim", indexer_dim, 1, 1e6);
    } else {
        /* Only a layer running its own indexer holds keys; reject them elsewhere. */
        if (cfgk_double_in(c, &model_schema, sec, "indexer_key_bytes", &d, &zero, 0, 0) < 0) return -1;
        k.indexer_key_bytes = 0;
        /* A reusing kind may still state its indexer's shape (it documents
         * the layer); the values are unused but must be valid numbers. */
        if (cfgk_double_in(c, &model_schema, sec, "indexer_heads", &d, &k.indexer_heads, 0, 1e5) < 0 ||
            cfgk_double_in(c, &model_schema, sec, "indexer_dim", &d, &k.indexer_dim, 0, 1e6) < 0)
            return -1;
    }
    DBL("attn_heads", attn_heads, 1, 1e5);
    DBL("attn_qk_dim", attn_qk_dim, 1, 1e6);
    DBL("attn_v_dim", attn_v_dim, 1, 1e6);
    BOOL("attn_fp8", attn_fp8);
    BOOL("moe", moe);
    /* Weights in parameters (memplan.h): optional, 0 = not given. */
    {
        struct { const char *key; double *dst; } w[] = {
            { "attn_params", &k.attn_params }, { "indexer_params", &k.indexer_params },
            { "mlp_params", &k.mlp_params }, { "shared_expert_params", &k.shared_expert_params },
            { "router_params", &k.router_params }, { "absorb_params", &k.absorb_params },
        };
        for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
            double def_ = *w[i].dst;
            if (cfg_get_double(c, sec, w[i].key, &d, &def_, 0, 1e13) < 0) return -1;
            *w[i].dst = d;
        }
        if (k.moe && k.mlp_params > 0)
            return dh_err("%s: [%s] mlp_params: an MoE layer's MLP is its experts (shared_expert_params, expert_bytes)", cfg_name(c), sec);
        if (!k.moe && (k.shared_expert_params > 0 || k.router_params > 0))
            return dh_err("%s: [%s] shared_expert_params / router_params on a dense layer (moe = false)", cfg_name(c), sec);
    }
#undef DBL
#undef U32
#undef BOOL
    if (cfg_check_unused_section(c, sec) < 0) return -1;
    ks->kind[ks->n++] = k;
    return 0;
}

/* Layer list grammar: list := item (',' item)* ; item := (NAME | '(' list ')') ['*' COUNT]. */
typedef struct {
    const char *s, *p;
    const kind_set *ks;
    int idx[MAX_LAYERS];
    uint32_t n;
    const char *file;
} layer_parser;

static void skip_ws(layer_parser *lp) { while (isspace((unsigned char)*lp->p)) lp->p++; }

static int parse_list(layer_parser *lp, int depth);

static int parse_item(layer_parser *lp, int depth)
{
    skip_ws(lp);
    uint32_t start = lp->n;
    if (*lp->p == '(') {
        lp->p++;
        if (parse_list(lp, depth + 1) < 0) return -1;
        skip_ws(lp);
        if (*lp->p != ')') return dh_err("%s: [model] layers: expected ')' at '%s'", lp->file, lp->p);
        lp->p++;
    } else {
        const char *b = lp->p;
        while (isalnum((unsigned char)*lp->p) || *lp->p == '_' || *lp->p == '-') lp->p++;
        if (lp->p == b) return dh_err("%s: [model] layers: expected a kind name at '%s'", lp->file, b);
        int k = find_kind(lp->ks, b, (size_t)(lp->p - b));
        if (k < 0) return dh_err("%s: [model] layers: unknown kind '%.*s'", lp->file, (int)(lp->p - b), b);
        if (lp->n == MAX_LAYERS) return dh_err("%s: [model] layers: more than %d layers", lp->file, MAX_LAYERS);
        lp->idx[lp->n++] = k;
    }
    skip_ws(lp);
    if (*lp->p == '*') {
        lp->p++;
        char *end;
        long cnt = strtol(lp->p, &end, 10);
        if (end == lp->p || cnt < 1 || cnt > MAX_LAYERS) return dh_err("%s: [model] layers: bad repeat count at '%s'", lp->file, lp->p);
        lp->p = end;
        uint32_t len = lp->n - start;
        if ((uint64_t)lp->n + (uint64_t)len * (cnt - 1) > MAX_LAYERS) return dh_err("%s: [model] layers: more than %d layers", lp->file, MAX_LAYERS);
        for (long r = 1; r < cnt; r++)
            for (uint32_t i = 0; i < len; i++) lp->idx[lp->n++] = lp->idx[start + i];
    }
    return 0;
}

static int parse_list(layer_parser *lp, int depth)
{
    if (depth > 8) return dh_err("%s: [model] layers: nested too deeply", lp->file);
    for (;;) {
        if (parse_item(lp, depth) < 0) return -1;
        skip_ws(lp);
        if (*lp->p != ',') return 0;
        lp->p++;
    }
}

/* The byte sums of the groups and of the window and dense layers, from the
 * layers' rows as in use. */
static void model_sums(model_cfg *m)
{
    for (uint32_t g = 0; g < m->n_groups; g++) m->group[g].attn_bytes_per_row = m->group[g].kv_bytes_per_row = 0;
    m->window_bytes_per_token_row = m->dense_bytes_per_token = 0;
    m->max_window = 0;
    m->dense_layers = 0;
    for (uint32_t l = 0; l < m->n_layers; l++) {
        const model_kind *k = &m->layer[l];
        if (k->window > 0) {
            if (k->kv_own) m->window_bytes_per_token_row += k->row_bytes;
            if (k->window > m->max_window) m->max_window = k->window;
        }
        if (k->select == MODEL_SELECT_DENSE) {
            m->dense_layers++;
            if (k->kv_own) m->dense_bytes_per_token += k->row_bytes / k->compress;
        }
        if (m->layer_group[l] < 0) continue;
        model_group *g = &m->group[m->layer_group[l]];
        g->attn_bytes_per_row += k->row_bytes;
        if (k->kv_own) g->kv_bytes_per_row += k->row_bytes;
    }
}

int model_use_bf16_rows(model_cfg *m, const char *file)
{
    if (m->kv_bf16) return 0;
    for (uint32_t l = 0; l < m->n_layers; l++)
        if (m->layer[l].row_bytes_bf16 <= 0)
            return dh_err("%s: kv_dtype = bf16, but kind '%s' (layer %u) gives no row_bytes_bf16", file, m->layer[l].name, l);
    for (uint32_t l = 0; l < m->n_layers; l++) {
        m->layer[l].row_bytes = m->layer[l].row_bytes_bf16;
        m->layer[l].attn_fp8 = 0;   /* BF16 rows: attention in BF16 */
    }
    m->kv_bf16 = 1;
    model_sums(m);
    return 0;
}

int model_load(cfg *c, model_cfg *m)
{
    memset(m, 0, sizeof *m);
    kind_set *ks = calloc(1, sizeof *ks);
    layer_parser *lp = calloc(1, sizeof *lp);
    if (!ks || !lp) abort();
    int rc = -1;
    for (size_t i = 0; i < cfg_section_count(c); i++) {
        const char *sec = cfg_section_name(c, i);
        if (!strncmp(sec, "kind.", 5) && load_kind(c, sec, ks) < 0) goto out;
    }
    const char *name, *layers;
    if (cfgk_string(c, &model_schema, "model", "name", &name) < 0) goto out;
    snprintf(m->name, sizeof m->name, "%s", name);
    if (cfgk_string(c, &model_schema, "model", "layers", &layers) < 0) goto out;
    lp->s = lp->p = layers;
    lp->ks = ks;
    lp->file = cfg_name(c);
    if (parse_list(lp, 0) < 0) goto out;
    skip_ws(lp);
    if (*lp->p) { dh_err("%s: [model] layers: unexpected '%s'", lp->file, lp->p); goto out; }
    struct { const char *key; double *dst; } d[] = {
        { "hidden", &m->hidden },
        { "active_params", &m->active_params },
        { "experts", &m->experts },
        { "experts_per_token", &m->experts_per_token },
        { "expert_bytes", &m->expert_bytes },
    };
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
        if (cfgk_double(c, &model_schema, "model", d[i].key, d[i].dst) < 0) goto out;
    if (m->experts_per_token > m->experts) { dh_err("%s: [model] experts_per_token exceeds experts", cfg_name(c)); goto out; }
    /* Expert-parallel all-to-all message sizes per routed (token, expert) pair;
     * absent means the instance's fixed moe_comm_s is the whole cost. */
    if (cfgk_double(c, &model_schema, "model", "moe_dispatch_bytes", &m->moe_dispatch_bytes) < 0 ||
        cfgk_double(c, &model_schema, "model", "moe_combine_bytes", &m->moe_combine_bytes) < 0)
        goto out;
    {   /* Weights of the whole model (memplan.h): optional. */
        struct { const char *key; double *dst, lo, hi; } w[] = {
            { "embed_params", &m->embed_params, 0, 1e13 },
            { "lm_head_params", &m->lm_head_params, 0, 1e13 },
            { "quant_bytes_per_param", &m->quant_bytes_per_param, 0, 8 },
            { "unquant_bytes_per_param", &m->unquant_bytes_per_param, 0, 8 },
        };
        for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
            if (cfgk_double(c, &model_schema, "model", w[i].key, w[i].dst) < 0) goto out;
    }
    if (cfg_check_unused_section(c, "model") < 0) goto out;
    /* Build layers and selection groups. */
    m->n_layers = lp->n;
    m->layer = calloc(m->n_layers, sizeof *m->layer);
    m->layer_group = calloc(m->n_layers, sizeof *m->layer_group);
    m->group = calloc(m->n_layers, sizeof *m->group);
    if (!m->layer || !m->layer_group || !m->group) abort();
    int32_t cur = -1;
    m->weights_known = m->quant_bytes_per_param > 0;
    for (uint32_t l = 0; l < m->n_layers; l++) {
        model_kind *k = &m->layer[l];
        *k = ks->kind[lp->idx[l]];
        if (k->moe) m->moe_layers++;
        if (k->attn_params <= 0) m->weights_known = 0;
        if (k->select == MODEL_SELECT_WINDOW || k->select == MODEL_SELECT_DENSE) {
            m->layer_group[l] = -1;
            continue;
        }
        if (k->select == MODEL_SELECT_OWN) {
            cur = (int32_t)m->n_groups++;
            model_group *g = &m->group[cur];
            g->first_layer = l;
            g->k = k->topk;
            g->compress = k->compress;
            g->indexer_bytes_per_row = k->indexer_key_bytes;
        } else if (cur < 0) {
            dh_err("%s: layer %u (kind '%s') reuses a selection, but no earlier layer selects", cfg_name(c), l, k->name);
            goto out;
        }
        model_group *g = &m->group[cur];
        if (k->topk != g->k || k->compress != g->compress) {
            dh_err("%s: layer %u (kind '%s') has k %u / compress %u but its group selects k %u / compress %u",
                   cfg_name(c), l, k->name, k->topk, k->compress, g->k, g->compress);
            goto out;
        }
        if (!k->kv_own && k->select == MODEL_SELECT_OWN && g->n_layers == 0) {
            dh_err("%s: layer %u (kind '%s') reuses KV but opens a group with no KV of its own", cfg_name(c), l, k->name);
            goto out;
        }
        m->layer_group[l] = cur;
        g->n_layers++;
    }
    if (m->n_groups == 0) { dh_err("%s: no layer selects rows (every layer is a window or dense layer)", cfg_name(c)); goto out; }
    model_sums(m);
    rc = 0;
out:
    free(ks);
    free(lp);
    if (rc < 0) model_release(m);
    return rc;
}

void model_release(model_cfg *m)
{
    free(m->layer);
    free(m->layer_group);
    free(m->group);
    memset(m, 0, sizeof *m);
}

int model_shape(const model_cfg *m, trace_shape *sh)
{
    memset(sh, 0, sizeof *sh);
    snprintf(sh->model, sizeof sh->model, "%s", m->name);
    sh->n_layers = m->n_layers;
    sh->n_groups = m->n_groups;
    sh->layer_group = malloc(m->n_layers * sizeof(uint32_t));
    sh->group_k = malloc(m->n_groups * sizeof(uint32_t));
    sh->group_compress = malloc(m->n_groups * sizeof(uint32_t));
    if (!sh->layer_group || !sh->group_k || !sh->group_compress) abort();
    for (uint32_t l = 0; l < m->n_layers; l++)
        sh->layer_group[l] = m->layer_group[l] < 0 ? 0 : (uint32_t)m->layer_group[l];
    for (uint32_t g = 0; g < m->n_groups; g++) {
        sh->group_k[g] = m->group[g].k;
        sh->group_compress[g] = m->group[g].compress;
    }
    return 0;
}

int model_check_shape(const model_cfg *m, const trace_shape *sh, const char *what)
{
    if (sh->n_groups != m->n_groups)
        return dh_err("%s has %u selection groups, model '%s' has %u", what, sh->n_groups, m->name, m->n_groups);
    for (uint32_t g = 0; g < m->n_groups; g++)
        if (sh->group_k[g] != m->group[g].k || sh->group_compress[g] != m->group[g].compress)
            return dh_err("%s: selection group %u has k %u / compress %u, model '%s' expects %u / %u", what, g,
                          sh->group_k[g], sh->group_compress[g], m->name, m->group[g].k, m->group[g].compress);
    return 0;
}
