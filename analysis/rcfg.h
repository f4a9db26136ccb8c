/* rcfg.h: the GPU replay's configurations (kernels/replay/configs.ini), the one
 * definition that bin/dhreplay, bin/dhcal and the tests share.
 *
 * The file holds a [replay] section (the simulator's instance, attention_dp and
 * the overrides every configuration shares) and one section per configuration:
 * policy, budget, heldout, seed, requests, prompt_len, steps, output_len and
 * sim (the simulator's policy overrides). The file's header documents each key.
 * Plain C on common/ alone, so that the replay (nvcc) links it as the tools do;
 * the header is usable from C++. Loading is O(configurations). */
#ifndef DH_RCFG_H
#define DH_RCFG_H

#include "common/cfgkey.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The file the tools read unless told otherwise (found by dh_path_find). */
#define RCFG_DEFAULT_PATH "kernels/replay/configs.ini"

typedef struct {
    char id[64];
    char policy[32];          /* hisparse, adaptive, hisparse+dflash2, adaptive+dflash2 */
    int spec;                 /* 1: verification steps (policy POLICY+dflash2) */
    uint32_t budget;          /* hot-buffer rows per (request, group) */
    int heldout;
    uint64_t seed;
    uint32_t requests, prompt_len, steps, output_len;
    char sim[512];            /* the simulator's overrides, space-separated SECTION.KEY=VALUE */
} rcfg_config;

typedef struct {
    rcfg_config *c;
    size_t n;
    char path[512];
    char instance[512];       /* [replay] instance */
    uint32_t attention_dp;    /* [replay] attention_dp */
    char sim[512];            /* [replay] sim: overrides every configuration shares */
} rcfg_set;

/* Load path (NULL: RCFG_DEFAULT_PATH). Every key is required and unknown keys are
 * errors. 0, or -1 with dh_err() set. */
int rcfg_load(const char *path, rcfg_set *s);
void rcfg_release(rcfg_set *s);
/* The configuration named id, or NULL with dh_err() set. */
const rcfg_config *rcfg_find(const rcfg_set *s, const char *id);

#ifdef __cplusplus
}
#endif
/* Every key of the replay configurations file (docs/CONFIG.md). */
extern const cfg_schema rcfg_schema;

#endif
