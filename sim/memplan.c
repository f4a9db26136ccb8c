/* memplan.c: weights per GPU and the framework's reservation; see memplan.h. */
#include "sim/memplan.h"

const char *const memplan_part_name[MP_N_PARTS] = {
    "attention", "attention_absorbed", "indexer", "dense_mlp", "shared_expert", "router", "routed_experts",
    "embedding", "lm_head",
};

double memplan_weights(const model_cfg *m, const memplan_par *p, double part[MP_N_PARTS])
{
    for (int i = 0; i < MP_N_PARTS; i++) part[i] = 0;
    if (!m->weights_known) return 0;
    const double q = m->quant_bytes_per_param, u = m->unquant_bytes_per_param;
    for (uint32_t l = 0; l < m->n_layers; l++) {
        const model_kind *k = &m->layer[l];
        part[MP_ATTN] += k->attn_params * q / p->attn_tp;
        part[MP_ATTN_ABSORB] += k->absorb_params * p->absorb_bytes_per_param / p->attn_tp;
        if (k->select == MODEL_SELECT_OWN) part[MP_INDEXER] += k->indexer_params * q / p->attn_tp;
        part[MP_DENSE_MLP] += k->mlp_params * q / p->dense_mlp_tp;
        part[MP_SHARED_EXPERT] += k->shared_expert_params * q / p->shared_expert_tp;
        part[MP_ROUTER] += k->router_params * u;
        if (k->moe && p->moe_tp > 1) part[MP_ROUTED_EXPERTS] += m->experts * m->expert_bytes / p->moe_tp;
        else if (k->moe) part[MP_ROUTED_EXPERTS] += m->experts / p->moe_ep * m->expert_bytes;
    }
    part[MP_EMBED] = m->embed_params * u / p->attn_tp;
    part[MP_LM_HEAD] = m->lm_head_params * u / p->lm_head_tp;
    double s = 0;
    for (int i = 0; i < MP_N_PARTS; i++) s += part[i];
    return s;
}

void memplan_print(const memplan *mp, const char *model, const char *instance, FILE *f)
{
#define L(name, v) fprintf(f, "  %-40s %10.3f GB %18.0f B\n", name, (v) / 1e9, (v))
    fprintf(f, "memory per GPU: model %s, instance %s\n", model, instance);
    L("HBM", mp->capacity);
    if (mp->computed > 0) {
        for (int i = 0; i < MP_N_PARTS; i++) {
            char b[64];
            snprintf(b, sizeof b, "  weights: %s", memplan_part_name[i]);
            L(b, mp->part[i]);
        }
        L("weights computed from the model", mp->computed);
    } else {
        fprintf(f, "  (the model file gives no weights: no breakdown)\n");
    }
    L(mp->weights_given ? "weights in use (weights_per_gpu_bytes)" : "weights in use", mp->weights);
    if (mp->mem_fraction_static > 0) {
        fprintf(f, "  %-40s %10.3f\n", "mem_fraction_static", mp->mem_fraction_static);
        L("  held before the model load (context)", mp->context);
        L("  static share (x (HBM - context))", mp->mem_fraction_static * (mp->capacity - mp->context));
        L("  outside the static share", mp->outside);
        L("    cuda graphs", mp->cuda_graphs);
        L("    communication buffers", mp->comm_buffers);
        L("    activations and slack (rest)", mp->activations);
    }
    L("framework besides weights and KV", mp->workspace);
    L("KV pool (HBM - weights - framework)", mp->kv_pool);
    if (mp->host_pool > 0) {
        fprintf(f, "  %-40s %10.3f\n", "host_to_device_ratio", mp->host_to_device_ratio);
        L("host KV pool (ratio x KV pool)", mp->host_pool);
    } else {
        fprintf(f, "  %-40s %10s\n", "host KV pool", "unbounded");
    }
#undef L
}
