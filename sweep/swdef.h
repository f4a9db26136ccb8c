/* swdef.h: a sweep file -- the points, policies and seeds of a sweep.
 *
 * A sweep file is INI (common/cfg.h):
 *
 *   [sweep]
 *   config   = models/instances/glm53-h200x8.ini   ; the base instance (default: dhsim's)
 *   policies = hisparse,adaptive,adaptive+dflash2  ; as dhsim --policy (default: the config's)
 *   seeds    = 1:3:1                               ; trace.seed values (default: the config's)
 *   steps    = 200                                 ; workload.steps (default: the config's)
 *   output   = out/budget                          ; the output folder (required)
 *   combine  = product                             ; or zip (axes advance together)
 *   [base]                                         ; overrides of the base config, as --set
 *   workload.prompt_len = 100000
 *   [axes]                                         ; one axis per key: a list or lo:hi:step
 *   policy.hisparse_budget_k = 1,2,3,4
 *   workload.concurrency = 64:256:64
 *   gen.selection.step_overlap = 0.6,0.7           ; a generator preset parameter
 *
 * Keys are SECTION.KEY of the instance, model or hardware files, as dhsim's
 * --set; gen.SECTION.KEY is a parameter of the trace generator's preset
 * (traces/gen.h, gen_params_set), which sim_open_source does not take, so the
 * sweep opens such sources itself (swrun.c). A list separates values by
 * commas, or by '|' when a value holds commas itself (workload.step_times).
 *
 * A *point* is one combination of axis values (index p, the first axis
 * outermost); a *unit* is a point at one seed (u = p * n_seeds + seed index),
 * the unit of work, of resumption and of a results file, holding every
 * policy. swdef_load checks the file's own keys; swdef_task gives the
 * assignments of one (unit, policy) for sim_config_load, which checks the rest. */
#ifndef DH_SWDEF_H
#define DH_SWDEF_H

#include "common/cfgkey.h"

#include <stddef.h>
#include <stdint.h>

#include "sim/pol.h"

#define SWDEF_MAX_POL 16

typedef struct {
    char *key;           /* SECTION.KEY or gen.SECTION.KEY */
    char **vals;
    size_t n;
} swdef_axis;

/* One policy column, as dhsim --policy builds it. */
typedef struct {
    char label[40];      /* the row's policy name: hisparse, adaptive+dflash2, hisparse-spec */
    pol_kind pol;
    char sets[4][64];    /* the overrides that make the variant (spec.mode=...) */
    int n_sets;
} swdef_policy;

typedef struct {
    char *key, *val;
} swdef_kv;

typedef struct {
    char file[1024];     /* the sweep file */
    char config[512];
    swdef_kv *base;      /* [base] overrides in file order */
    size_t n_base;
    swdef_axis *axes;
    size_t n_axes;
    int zip;
    swdef_policy pol[SWDEF_MAX_POL];
    int n_pol;
    char **seeds;        /* trace.seed values as written */
    size_t n_seeds;
    char steps[32];      /* workload.steps value */
    char output[1024];
    size_t n_points, n_units;
    char digest[17];     /* FNV-1a of everything that defines the results (not output) */
} swdef;

/* The inputs of one (unit, policy): the assignments to load its config with
 * and the generator overrides, and the table's input columns in order
 * (config, base keys, workload.steps, trace.seed, axes; a key given twice
 * keeps its first place and its last value). */
typedef struct {
    size_t unit, point, seed_index;
    char **sim_sets;     /* for sim_config_load */
    int n_sim;
    char **gen_sets;     /* "SECTION.KEY=VALUE" for gen_params_set */
    int n_gen;
    swdef_kv *inputs;
    size_t n_inputs;
} swdef_task;

/* Load and check a sweep file: every key of [sweep], [base] and [axes] is
 * known and well formed, ranges are valid, policies parse, the base config
 * loads. 0, or -1 with dh_err() naming the file. */
int swdef_load(const char *path, swdef *d);
void swdef_release(swdef *d);
/* The inputs of unit u under policy pi (pi < 0: the policy-free part only). */
void swdef_task_make(const swdef *d, size_t u, int pi, swdef_task *t);
void swdef_task_release(swdef_task *t);
/* FNV-1a, 64 bits, chained from h (start with SWDEF_FNV_INIT). */
#define SWDEF_FNV_INIT 0xcbf29ce484222325ULL
uint64_t swdef_fnv(uint64_t h, const void *data, size_t n);

/* Every key of a sweep file (docs/CONFIG.md). */
extern const cfg_schema swdef_schema;

#endif
