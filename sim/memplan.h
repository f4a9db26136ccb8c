/* memplan.h: a decode GPU's memory as the serving framework reserves it.
 *
 * Weights per GPU from the model's layer kinds (model.h) and the instance's
 * parallelism, as SGLang places them under data-parallel attention
 * (--tp N --dp N --enable-dp-attention, python/sglang/srt/models/deepseek_v2.py,
 * layers/dp_attention.py): attention, indexer and embeddings are split over the
 * attention-TP group (gpus / attention_dp, 1 under full DP attention, so every
 * GPU holds them whole); a dense layer's MLP over dense_mlp_tp GPUs (SGLang's
 * --moe-dense-tp-size; unset = the whole TP group); the shared expert over
 * shared_expert_tp (1 with DeepEP, which keeps it beside the dispatch); the
 * router on every GPU; the LM head over lm_head_tp (the whole TP group unless
 * --enable-dp-lm-head); the routed experts over moe_ep, or, tensor-parallel (moe_tp > 1:
 * SGLang without --moe-a2a-backend and --ep-size, each GPU 1 / moe_tp of every expert's
 * intermediate dimension, FusedMoE's w13 and w2 shards), over moe_tp: the same bytes per GPU
 * as expert parallelism over as many GPUs. Besides the checkpoint's
 * weights, SGLang's DeepSeek-family loader keeps the absorbed MLA up-projections
 * w_kc and w_vc as new BF16 tensors beside the FP8 kv_b_proj (post_load_weights: on
 * CUDA with 128 x 128 blocks kv_b_proj is dequantized with block_quant_dequant to
 * bfloat16 and split, unless SGL_USE_DEEPGEMM_BMM): the kinds' absorb_params at
 * absorb_bytes_per_param (instance key, 0 = none held), split as attention is.
 *
 * Framework memory, as SGLang sizes its KV pool (model_runner_kv_cache_mixin.py
 * _profile_available_bytes, profile_max_num_token): the free memory after the
 * model load less (1 - mem_fraction_static) x the free memory before it,
 *     KV pool = mem_fraction_static x (HBM - context) - weights,
 * where context_bytes is what the process holds before the model load (CUDA
 * context, NCCL communicators, custom all-reduce buffers: HBM less SGLang's
 * pre_model_load_memory). The share outside, (1 - mem_fraction_static) x
 * (HBM - context), holds the CUDA graphs, the communication buffers (DeepEP's,
 * allocated at the first dispatch, after the pool: model_executor/
 * deepep_capacity.py) and the activations, and must hold the first two. An
 * instance without mem_fraction_static gives one workspace_bytes instead.
 *
 * HiSparse's host pool: host_to_device_ratio x the device KV pool (SGLang's
 * --hisparse-config host_to_device_ratio; 0 = unbounded). */
#ifndef DH_MEMPLAN_H
#define DH_MEMPLAN_H

#include <stdio.h>

#include "sim/model.h"

typedef struct {
    double attn_tp, dense_mlp_tp, shared_expert_tp, lm_head_tp, moe_ep;
    double absorb_bytes_per_param; /* the framework's copies of the absorbed MLA up-projections (0: none) */
    double moe_tp;                 /* routed experts tensor-parallel over this many GPUs (0 or 1: over moe_ep) */
} memplan_par;

enum { MP_ATTN = 0, MP_ATTN_ABSORB, MP_INDEXER, MP_DENSE_MLP, MP_SHARED_EXPERT, MP_ROUTER, MP_ROUTED_EXPERTS, MP_EMBED,
       MP_LM_HEAD, MP_N_PARTS };
extern const char *const memplan_part_name[MP_N_PARTS];

typedef struct {
    memplan_par par;             /* the weights' parallelism */
    double part[MP_N_PARTS];     /* weights per GPU by part, bytes (0 where the model gives none) */
    double computed;             /* their sum (0: the model gives no weights) */
    double weights;              /* in use: computed, or the instance's weights_per_gpu_bytes */
    int weights_given;           /* the instance gave weights_per_gpu_bytes */
    double read_per_step;        /* non-expert weights read each step (all but the embedding table) */
    double lm_head;              /* LM head bytes per GPU (read once a step) */
    double capacity;             /* HBM */
    double mem_fraction_static;  /* 0: workspace_bytes given instead */
    double context, cuda_graphs, comm_buffers;
    double activations;          /* the rest of the share outside mem_fraction_static */
    double outside;              /* (1 - mem_fraction_static) x (capacity - context) */
    double workspace;            /* everything besides weights and KV */
    double kv_pool;              /* capacity - weights - workspace */
    double host_to_device_ratio; /* 0: unbounded host pool */
    double host_pool;            /* bytes (0: unbounded) */
} memplan;

/* The weights per GPU of model m under parallelism p, by part. Returns the sum;
 * 0 if the model gives no weights (model_cfg.weights_known). */
double memplan_weights(const model_cfg *m, const memplan_par *p, double part[MP_N_PARTS]);
/* Print the breakdown (one line a figure, GB and bytes). */
void memplan_print(const memplan *mp, const char *model, const char *instance, FILE *f);

#endif
