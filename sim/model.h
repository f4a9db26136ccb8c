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
 *                    always resident (no selection, no host tier).
 *   kv     = own     the layer stores its own KV row per token (or per
 *                    `compress` tokens);
 *            reuse   it reads the KV rows of the group's first layer (no
 *                    storage, no fetch of its own: DeepSeek-V4 cross-layer KV).
 * Keys of a kind: row_bytes, compress, topk, select, kv, window, indexer_key_bytes,
 * indexer_heads, indexer_dim, attn_heads, attn_qk_dim, attn_v_dim, attn_fp8, moe;
 * `base = OTHER` copies every key of an earlier kind that is not given.
 *
 * [model] keys: name, layers, hidden, active_params (per token, for FLOPs),
 * experts, experts_per_token, expert_bytes (one expert of one layer);
 * optional moe_dispatch_bytes, moe_combine_bytes: the expert-parallel
 * all-to-all message of one routed (token, expert) pair in each direction.
 *
 * A selection group g collects the layers sharing one selection; the simulator
 * keeps one hot buffer per (request, g) and scales by the group's layers. */
#ifndef DH_MODEL_H
#define DH_MODEL_H

#include <stdint.h>

#include "common/cfg.h"
#include "common/cfgkey.h"
#include "traces/sel.h"

enum { MODEL_SELECT_OWN = 0, MODEL_SELECT_REUSE, MODEL_SELECT_WINDOW };

typedef struct {
    char name[48];
    double row_bytes;        /* bytes of one KV row of this layer */
    uint32_t compress;       /* tokens per row */
    uint32_t topk;           /* rows selected per query */
    int select;              /* MODEL_SELECT_* */
    int kv_own;              /* 1: stores its own rows */
    uint32_t window;         /* window rows (select = window) */
    double indexer_key_bytes;/* per row, layers with select = own */
    double indexer_heads, indexer_dim;
    double attn_heads, attn_qk_dim, attn_v_dim;
    int attn_fp8;
    int moe;
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
    double window_bytes_per_token_row; /* sum over window layers of row_bytes */
    uint32_t max_window;
} model_cfg;

int model_load(cfg *c, model_cfg *m);
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

