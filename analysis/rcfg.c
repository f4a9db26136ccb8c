/* rcfg.c: the replay configurations' reader; see rcfg.h. */
#include "analysis/rcfg.h"
#include "common/cfg.h"
#include "common/cfgkey.h"
#include "common/dh_err.h"
#include "common/mem.h"
#include "common/path.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the schema (docs/CONFIG.md is printed from it: bin/dhconfig schema) ---- */

static const cfg_key rcfg_keys[] = {
    CK_ROW("replay", "instance", CK_STR, "", 0, 0, NULL, "The simulator's instance file for every configuration.", 0),
    CK_ROW("replay", "attention_dp", CK_INT, "", 1, 1024, NULL, "The instance's attention data parallelism: the "
           "simulator's concurrency is requests x attention_dp.", 0),
    CK_ROW("replay", "sim", CK_STR, "", 0, 0, NULL, "dhsim --set overrides shared by every configuration, "
           "space-separated.", 0),
    CK_STR_ROW("ID", "policy", NULL, "hisparse|adaptive|hisparse+dflash2|adaptive+dflash2", "The policy: plain decode "
               "steps, or verification steps with the model's DFlash2 draft.", 0),
    CK_ROW("ID", "budget", CK_INT, "rows", 1, 1L << 24, NULL, "Hot-buffer budget per (request, selection group).", 0),
    CK_ROW("ID", "heldout", CK_INT, "", 0, 1, NULL, "1: kept out of every fit of the calibration (the validation's "
           "targets apply to it).", 0),
    CK_ROW("ID", "seed", CK_INT, "", 0, 4611686018427387904.0, NULL, "The trace generator's seed.", 0),
    CK_ROW("ID", "requests", CK_INT, "requests", 1, 1024, NULL, "Requests on the GPU.", 0),
    CK_ROW("ID", "prompt_len", CK_INT, "tokens", 1, 1L << 23, NULL, "Prompt tokens of every request.", 0),
    CK_ROW("ID", "steps", CK_INT, "steps", 1, 1L << 20, NULL, "Decode steps.", 0),
    CK_ROW("ID", "output_len", CK_INT, "positions", 1, 1L << 24, NULL, "Positions of every request's stream in the "
           "simulator, at least steps (steps for plain steps; steps x (gamma + 1) + 1 for verification).", 0),
    CK_ROW("ID", "sim", CK_STR, "", 0, 0, NULL, "The simulator's policy settings that give the same budget (dhsim "
           "--set).", 0),
};
const cfg_schema rcfg_schema = CFG_SCHEMA("kernels/replay/configs.ini", "GPU replay configurations",
    "The configurations bin/dhreplay runs on the GPU and bin/dhcal runs in the simulator (analysis/rcfg.h); a section "
    "[ID] per configuration.", rcfg_keys);

static int get_u32(cfg *c, const char *sec, const char *key, uint32_t *out)
{
    long x;
    if (cfgk_int(c, &rcfg_schema, sec, key, &x) < 0) return -1;
    *out = (uint32_t)x;
    return 0;
}

static int get_str(cfg *c, const char *sec, const char *key, char *out, size_t cap)
{
    const char *v;
    if (cfgk_string(c, &rcfg_schema, sec, key, &v) < 0) return -1;
    if (strlen(v) >= cap) return dh_err("%s: [%s] %s is longer than %zu characters", cfg_name(c), sec, key, cap - 1);
    snprintf(out, cap, "%s", v);
    return 0;
}

static int load_config(cfg *c, const char *sec, rcfg_config *r)
{
    memset(r, 0, sizeof *r);
    if (strlen(sec) >= sizeof r->id) return dh_err("%s: configuration name '%s' is too long", cfg_name(c), sec);
    snprintf(r->id, sizeof r->id, "%s", sec);
    long held, seed;
    if (get_str(c, sec, "policy", r->policy, sizeof r->policy) < 0 ||
        get_u32(c, sec, "budget", &r->budget) < 0 ||
        cfgk_int(c, &rcfg_schema, sec, "heldout", &held) < 0 ||
        cfgk_int(c, &rcfg_schema, sec, "seed", &seed) < 0 ||
        get_u32(c, sec, "requests", &r->requests) < 0 ||
        get_u32(c, sec, "prompt_len", &r->prompt_len) < 0 ||
        get_u32(c, sec, "steps", &r->steps) < 0 ||
        get_u32(c, sec, "output_len", &r->output_len) < 0 ||
        get_str(c, sec, "sim", r->sim, sizeof r->sim) < 0)
        return -1;
    r->heldout = (int)held;
    r->seed = (uint64_t)seed;
    /* The replay runs these four; anything else has no GPU counterpart. */
    if (!strcmp(r->policy, "hisparse+dflash2") || !strcmp(r->policy, "adaptive+dflash2")) r->spec = 1;
    else if (strcmp(r->policy, "hisparse") && strcmp(r->policy, "adaptive"))
        return dh_err("%s: [%s] policy '%s' is not hisparse, adaptive, hisparse+dflash2 or adaptive+dflash2", cfg_name(c),
                      sec, r->policy);
    if (r->output_len < r->steps)
        return dh_err("%s: [%s] output_len %u is shorter than steps %u", cfg_name(c), sec, r->output_len, r->steps);
    return 0;
}

int rcfg_load(const char *path, rcfg_set *s)
{
    memset(s, 0, sizeof *s);
    if (dh_path_find(path ? path : RCFG_DEFAULT_PATH, s->path, sizeof s->path) < 0) return -1;
    cfg *c;
    if (cfg_load(s->path, &c) < 0) return -1;
    int rc = 0;
    if (!cfg_has_section(c, "replay")) rc = dh_err("%s: no [replay] section", s->path);
    if (rc == 0 && (get_str(c, "replay", "instance", s->instance, sizeof s->instance) < 0 ||
                    get_u32(c, "replay", "attention_dp", &s->attention_dp) < 0 ||
                    get_str(c, "replay", "sim", s->sim, sizeof s->sim) < 0))
        rc = -1;
    size_t ns = cfg_section_count(c);
    s->c = dh_calloc(ns ? ns : 1, sizeof *s->c);
    for (size_t i = 0; rc == 0 && i < ns; i++) {
        const char *sec = cfg_section_name(c, i);
        if (!strcmp(sec, "replay")) continue;
        for (size_t j = 0; j < s->n; j++)
            if (!strcmp(s->c[j].id, sec)) rc = dh_err("%s: configuration '%s' defined twice", s->path, sec);
        if (rc == 0) rc = load_config(c, sec, &s->c[s->n]);
        if (rc == 0) s->n++;
    }
    if (rc == 0 && s->n == 0) rc = dh_err("%s: no configuration", s->path);
    if (rc == 0) rc = cfg_check_unused(c);
    cfg_free(c);
    if (rc) rcfg_release(s);
    return rc;
}

void rcfg_release(rcfg_set *s)
{
    free(s->c);
    s->c = NULL;
    s->n = 0;
}

const rcfg_config *rcfg_find(const rcfg_set *s, const char *id)
{
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->c[i].id, id)) return &s->c[i];
    dh_err("%s: no replay configuration '%s'", s->path, id);
    return NULL;
}
