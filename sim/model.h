/* model.h: a model's decode-relevant structure (models/NAME.ini).
 *
 * Layers are not uniform: the config defines layer *kinds* ([kind.NAME]
 * sections) and a layer list in [model] that repeats them, e.g.
 *     layers = dense_own*3, moe_reuse*3, (moe_own, moe_reuse*3)*18
 * A kind says how its layer attends and stores KV:
 *   select = own     the layer runs its own indexer and top-k: it starts a new
 *                    selection group;
 *            reuse   it reuses the selection of the group opened before it
 *                    (GLM-5.x IndexShare);
 *            window  it attends only to a sliding window of recent rows,
 *                    always resident (no selection, no host tier);
 *            dense   it attends to every one of its (compressed) rows, always
 *                    resident (no selection, no host tier: DeepSeek-V4's C128
 *                    layers, which HiSparse does not offload).
 *   kv     = own     the layer stores its own KV row per token (or per
 *                    `compress` tokens);
 *            reuse   it reads the KV rows of the group's first layer (no
 *                    storage, no fetch of its own: DeepSeek-V4 cross-layer KV).
 * Keys of a kind: row_bytes, row_bytes_bf16 (the row in BF16, for an instance's
 * kv_dtype = bf16), compress, topk, select, kv, window (select = window: the
 * window; otherwise optional uncompressed recent rows the layer also attends
 * to, always resident: DeepSeek-V4's 128-token window beside its compressed
 * KV), indexer_key_bytes, indexer_heads, indexer_dim, attn_heads, attn_qk_dim,
 * attn_v_dim, attn_fp8, moe; and its weights in parameters (for the memory
 * plan, memplan.h): attn_params (attention projections, norms, compressors),
 * indexer_params (counted on select = own layers only), mlp_params (a dense
 * layer's MLP), shared_expert_params and router_params (MoE layers), absorb_params
 * (MLA's kv_b_proj as the absorbed w_kc and w_vc, which SGLang keeps again in BF16;
 * counted at the instance's absorb_bytes_per_param);
 * `base = OTHER` copies every key of an earlier kind that is not given.
 *
 * [model] keys: name, layers, hidden, active_params (per token, for FLOPs),
 * experts, experts_per_token, expert_bytes (one expert of one layer);
 * optional moe_dispatch_bytes, moe_combine_bytes: the expert-parallel
 * all-to-all message of one routed (token, expert) pair in each direction;
 * optional weight keys: embed_params, lm_head_params (vocabulary x hidden),
 * quant_bytes_per_param (block-quantised projections, scales included),
 * unquant_bytes_per_param (BF16 tensors: embeddings, LM head, routers).
 *
 * A selection group g collects the layers sharing one selection; the simulator
 * keeps one hot buffer per (request, g) and scales by the group's layers. */
#ifndef DH_MODEL_H
#define DH_MODEL_H

#include <stdint.h>

#include "common/cfg.h"
#include "common/cfgkey.h"
#include "traces/sel.h"

enum { MODEL_SELECT_OWN = 0, MODEL_SELECT_REUSE, MODEL_SELECT_WINDOW, MODEL_SELECT_DENSE };

typedef struct {
    char name[48];
    double row_bytes;        /* bytes of one KV row of this layer (as in use) */
    double row_bytes_bf16;   /* the same row in BF16 (0: not given) */
    uint32_t compress;       /* tokens per row */
    uint32_t topk;           /* rows selected per query */
    int select;              /* MODEL_SELECT_* */
    int kv_own;              /* 1: stores its own rows */
    uint32_t window;         /* window rows (select = window; else extra recent rows, 0: none) */
    double indexer_key_bytes;/* per row, layers with select = own */
    double indexer_heads, indexer_dim;
    double attn_heads, attn_qk_dim, attn_v_dim;
    int attn_fp8;
    int moe;
    double attn_params, indexer_params, mlp_params, shared_expert_params, router_params;
    double absorb_params;    /* heads x (qk_nope + v_head) x kv_lora_rank (MLA), 0: none */
} model_kind;

typedef struct {
    uint32_t first_layer, n_layers;  /* layers first_layer .. (not necessarily contiguous: see layer_group) */
    uint32_t k, compress;
    double kv_bytes_per_row;     /* sum of row_bytes over the group's kv-owning layers */
    double attn_bytes_per_row;   /* sum of row_bytes over all its layers (attention reads) */
    double indexer_bytes_per_row;/* indexer keys per row (the group's own layer) */
} model_group;

typedef struct {
    char name[64];
    uint32_t n_layers;
    model_kind *layer;          /* [n_layers] the kind of each layer (copied) */
    int32_t *layer_group;       /* [n_layers] selection group, -1 for window layers */
    uint32_t n_groups;
    model_group *group;
    double hidden, active_params;
    double experts, experts_per_token, expert_bytes;
    double moe_dispatch_bytes, moe_combine_bytes; /* all-to-all bytes per (token, expert) pair */
    uint32_t moe_layers;
    double window_bytes_per_token_row; /* sum over layers with a window of row_bytes */
    uint32_t max_window;
    double dense_bytes_per_token;      /* sum over dense layers of row_bytes / compress */
    uint32_t dense_layers;
    double embed_params, lm_head_params, quant_bytes_per_param, unquant_bytes_per_param;
    int weights_known;                 /* every kind and [model] gave their weights */
    int kv_bf16;                       /* rows switched to BF16 (model_use_bf16_rows) */
} model_cfg;

int model_load(cfg *c, model_cfg *m);
/* Switch every layer's KV row to its row_bytes_bf16 (an instance's kv_dtype =
 * bf16) and recompute the sums; -1 naming the kind that gives none. */
int model_use_bf16_rows(model_cfg *m, const char *file);
void model_release(model_cfg *m);
/* The trace shape this model implies (layer -> group, k, compress). Window
 * layers are mapped to group 0, which they never read. Requests are left
 * empty (n_requests = 0) for the workload to fill. */
int model_shape(const model_cfg *m, trace_shape *sh);
/* Check that a trace's groups match the model (count, k, compress). */
int model_check_shape(const model_cfg *m, const trace_shape *sh, const char *what);

#endif
/* Every key of a model file (docs/CONFIG.md is printed from it). */
extern const cfg_schema model_schema;

