/* fmoe.h: the routed experts of a tensor-parallel MoE layer timed from a measured table
 * (sim/cost.h moe_tp), in place of their weight bytes at the decode GEMMs' fitted rate.
 *
 * A table (models/hw/fused-moe-NAME.ini) holds, per curve, the time of one layer's routed
 * experts on one GPU as SGLang runs them without expert parallelism (the Triton fused_moe:
 * the alignment of the (token, expert) pairs, GEMM1, SiLU-and-mul, GEMM2, the top-k sum) at a
 * list of M, the tokens entering the MoE on that GPU (under DP attention the batch gathered
 * from every rank), measured by bench/fused_moe/fused_moe_bench.py. The time at M is
 * piecewise linear in M between the points; below the first point and above the last the
 * line of the nearest segment continued (documented extrapolation: the first point must be
 * M = 1, so below it only a fractional token count falls; above the last, every expert is
 * touched and the time grows by the last segment's slope per token); 0 at M <= 0.
 * A run notes every use beyond the points (moe_tp_experts_m in its extrapolated-costs note,
 * sim/step.c note_compute_inputs).
 *
 * The GEMM form's fitted fixed cost of a layer ([hw] layer_fixed_s) counts the routed experts'
 * own launches among the layer's (the calibration starts it as 8 GEMM launches, 2 of them the
 * routed experts', analysis/calibrate.c); the table's times hold those launches too, so the
 * file's [fused_moe] fixed_share (that share) is taken out of the layer's fixed cost where the
 * table is charged, so that no launch is counted twice.
 *
 * The file names the shape it was measured at ([fused_moe] ranks, experts,
 * experts_per_token, hidden, expert_bytes: one GPU's slice of one expert); the loader checks
 * it against the instance's moe_tp and the model (expert_bytes x ranks = the model's
 * expert_bytes), so a table is never applied to another shape. */
#ifndef DH_FMOE_H
#define DH_FMOE_H

#include "common/cfgkey.h"

#define FMOE_MAX_POINTS 64 /* points of one curve */

typedef struct {
    int n_points;                 /* 0: no table (the routed experts at the fitted GEMM rate) */
    double m[FMOE_MAX_POINTS];    /* tokens into the MoE on one GPU, strictly ascending, m[0] = 1 */
    double s[FMOE_MAX_POINTS];    /* one layer's routed experts at each m, seconds */
    double fixed_share;           /* the share of the GEMM form's fixed cost ([hw] layer_fixed_s)
                                   * the table's kernels stand for: taken out of the layer */
} fmoe_curve;

/* Seconds of one layer's routed experts at m tokens (the rule above). */
double fmoe_time_s(const fmoe_curve *c, double m);

/* Whether m lies outside the curve's measured points (the extrapolated part). */
int fmoe_outside(const fmoe_curve *c, double m);

/* The table's schema (models/hw/fused-moe-NAME.ini; docs/CONFIG.md). */
extern const cfg_schema fmoe_schema;

/* The shape a table must have been measured at. */
typedef struct {
    double ranks, experts, experts_per_token, hidden, expert_bytes; /* expert_bytes: the model's whole expert */
} fmoe_shape;

/* Load curve `curve` of the table at path (found as dh_path_find does) into c, every section
 * and key of the file checked whichever curve is asked for, and its [fused_moe] shape checked
 * against want. 0, or -1 with one dh_err() line naming the file. */
int fmoe_load(const char *path, const char *curve, const fmoe_shape *want, fmoe_curve *c);

#endif
