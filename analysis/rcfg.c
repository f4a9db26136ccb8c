/* rcfg.c: the replay configurations' reader; see rcfg.h. */
#include "analysis/rcfg.h"
#include "common/cfg.h"
#include "common/dh_err.h"
#include "common/mem.h"
#include "common/path.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int get_u32(cfg *c, const char *sec, const char *key, long min, long max, uint32_t *out)
{
    long x;
    if (cfg_get_int(c, sec, key, &x, CFG_REQUIRED, min, max) < 0) return -1;
    *out = (uint32_t)x;
    return 0;
}

static int get_str(cfg *c, const char *sec, const char *key, char *out, size_t cap)
{
    const char *v;
    if (cfg_get_string(c, sec, key, &v, CFG_REQUIRED) < 0) return -1;
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
        get_u32(c, sec, "budget", 1, 1L << 24, &r->budget) < 0 ||
        cfg_get_int(c, sec, "heldout", &held, CFG_REQUIRED, 0, 1) < 0 ||
        cfg_get_int(c, sec, "seed", &seed, CFG_REQUIRED, 0, 1L << 62) < 0 ||
        get_u32(c, sec, "requests", 1, 1024, &r->requests) < 0 ||
        get_u32(c, sec, "prompt_len", 1, 1L << 23, &r->prompt_len) < 0 ||
        get_u32(c, sec, "steps", 1, 1L << 20, &r->steps) < 0 ||
        get_u32(c, sec, "output_len", 1, 1L << 24, &r->output_len) < 0 ||
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
                    get_u32(c, "replay", "attention_dp", 1, 1024, &s->attention_dp) < 0 ||
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
