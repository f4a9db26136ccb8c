/* rsim.c: replay configurations in the simulator; see rsim.h. */
#include "analysis/rsim.h"
#include "common/cores.h"
#include "common/dh_err.h"
#include "common/mem.h"
#include "sim/out.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define RSIM_MAX_SETS 96

/* Append the space-separated overrides of list to sets (storage in buf), leaving room for
 * the few rsim_run adds after them. */
static int split_sets(const char *list, char *buf, size_t cap, char **sets, int *n)
{
    if (strlen(list) >= cap) return dh_err("replay overrides '%s' are too long", list);
    snprintf(buf, cap, "%s", list);
    for (char *save, *t = strtok_r(buf, " \t", &save); t; t = strtok_r(NULL, " \t", &save)) {
        if (*n >= RSIM_MAX_SETS - 8) return dh_err("replay configuration: more than %d overrides", RSIM_MAX_SETS);
        sets[(*n)++] = t;
    }
    return 0;
}

/* The file states the budget twice, as the replay's rows and as the simulator's policy
 * settings, and the stream length that bin/dhreplay derives from the draft: they must agree,
 * or the simulator would not run what the replay ran. */
static int rsim_check(const rcfg_config *c, const sim_config *sc, pol_kind kind)
{
    const double k = sc->model.n_groups ? sc->model.group[0].k : 0;
    const double rows = kind == POL_ADAPTIVE ? (1 + sc->adaptive_max_optional_k) * k : sc->hisparse_budget_k * k;
    if (rows != c->budget)
        return dh_err("replay configuration '%s': budget %u rows, but its simulator settings give %g (k = %g)", c->id,
                      c->budget, rows, k);
    const uint32_t want = c->spec && sc->spec.draft ? c->steps * (sc->spec.draft->gamma + 1) + 1 : c->steps;
    if (c->output_len != want)
        return dh_err("replay configuration '%s': output_len %u, but %u steps%s need %u", c->id, c->output_len, c->steps,
                      c->spec ? " of gamma + 1 positions and one more" : "", want);
    return 0;
}

int rsim_run(const rcfg_set *s, const rcfg_config *c, const char *profile, char *const *extra, int n_extra,
             sim_result *res)
{
    memset(res, 0, sizeof *res);
    char shape[6][64], hw[600], mode[48], shared[512], own[512];
    char *sets[RSIM_MAX_SETS];
    int n = 0;
    /* The order of dhsim's command line in the replay's runs; a key given twice takes the last. */
    snprintf(shape[0], sizeof shape[0], "workload.concurrency=%u", c->requests * s->attention_dp);
    snprintf(shape[1], sizeof shape[1], "workload.steps=%u", c->steps);
    snprintf(shape[2], sizeof shape[2], "workload.requests=%u", c->requests);
    snprintf(shape[3], sizeof shape[3], "workload.output_len=%u", c->output_len);
    snprintf(shape[4], sizeof shape[4], "workload.prompt_len=%u", c->prompt_len);
    snprintf(shape[5], sizeof shape[5], "trace.seed=%llu", (unsigned long long)c->seed);
    for (int i = 0; i < 5; i++) sets[n++] = shape[i];
    if (split_sets(s->sim, shared, sizeof shared, sets, &n) < 0) return -1;
    if ((size_t)snprintf(hw, sizeof hw, "instance.hw=%s", profile) >= sizeof hw)
        return dh_err("replay configuration '%s': profile path '%s' is too long", c->id, profile);
    sets[n++] = hw;
    if (split_sets(c->sim, own, sizeof own, sets, &n) < 0) return -1;
    sets[n++] = shape[5];
    if (n + n_extra + 1 > RSIM_MAX_SETS) return dh_err("replay configuration '%s': too many overrides", c->id);
    for (int i = 0; i < n_extra; i++) sets[n++] = extra[i];
    char pol[32];
    snprintf(pol, sizeof pol, "%s", c->policy);
    char *plus = strchr(pol, '+');
    if (plus) {
        *plus++ = 0;
        snprintf(mode, sizeof mode, "spec.mode=%s", plus);
        sets[n++] = mode;
    }
    pol_kind kind;
    if (pol_parse(pol, &kind) < 0) return dh_err_prefix("replay configuration '%s': ", c->id);
    sim_config sc;
    if (sim_config_load(s->instance, sets, n, &sc) < 0) {
        sim_config_release(&sc);
        return dh_err_prefix("replay configuration '%s': ", c->id);
    }
    if (rsim_check(c, &sc, kind) < 0) {
        sim_config_release(&sc);
        return -1;
    }
    sel_source *src;
    if (sim_open_source(&sc, &src) < 0) {
        sim_config_release(&sc);
        return dh_err_prefix("replay configuration '%s': ", c->id);
    }
    int rc = sim_run(&sc, kind, src, res);
    if (rc == 0 && res->spec[0]) snprintf(res->policy, sizeof res->policy, "%s+%s", pol_name_of(kind), res->spec);
    if (rc < 0) dh_err_prefix("replay configuration '%s': ", c->id);
    sel_source_free(src);
    sim_config_release(&sc);
    return rc;
}

typedef struct {
    const rcfg_set *s;
    const rcfg_config *const *c;
    size_t n, next;
    const char *profile;
    char *const *sets;
    int n_sets;
    sim_result *res;
    int *rc;
    char (*err)[512];
    pthread_mutex_t mu;
} rsim_pool;

static void *rsim_worker(void *arg)
{
    rsim_pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        size_t i = p->next++;
        pthread_mutex_unlock(&p->mu);
        if (i >= p->n) return NULL;
        p->rc[i] = rsim_run(p->s, p->c[i], p->profile, p->sets, p->n_sets, &p->res[i]);
        if (p->rc[i] < 0) snprintf(p->err[i], sizeof p->err[i], "%s", dh_errmsg());
    }
}

int rsim_run_many(const rcfg_set *s, const rcfg_config *const *c, size_t n, const char *profile, char *const *sets,
                  int n_sets, int threads, sim_result *res)
{
    rsim_pool p = {.s = s, .c = c, .n = n, .profile = profile, .sets = sets, .n_sets = n_sets, .res = res};
    p.rc = dh_calloc(n ? n : 1, sizeof *p.rc);
    p.err = dh_calloc(n ? n : 1, sizeof *p.err);
    pthread_mutex_init(&p.mu, NULL);
    cores_run_pool(threads < 1 ? 1 : threads > 16 ? 16 : threads, n, rsim_worker, &p);
    pthread_mutex_destroy(&p.mu);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        if (p.rc[i] < 0) rc = dh_err("%s", p.err[i]);
    if (rc)
        for (size_t i = 0; i < n; i++)
            if (p.rc[i] == 0) sim_result_release(&res[i]);
    free(p.rc);
    free(p.err);
    return rc;
}

/* mkdir -p: every missing directory of path. */
static int make_dirs(const char *dir)
{
    char p[1024];
    if ((size_t)snprintf(p, sizeof p, "%s", dir) >= sizeof p) return dh_err("path '%s' is too long", dir);
    for (char *s = p + 1;; s++) {
        int end = !*s;
        if (*s == '/' || end) {
            *s = 0;
            if (mkdir(p, 0777) < 0 && errno != EEXIST) return dh_err("cannot create '%s': %s", p, strerror(errno));
            if (end) return 0;
            *s = '/';
        }
    }
}

int rsim_write_timeline(const char *dir, const char *id, const sim_result *res)
{
    if (make_dirs(dir) < 0) return -1;
    char path[1024];
    if ((size_t)snprintf(path, sizeof path, "%s/%s.tsv", dir, id) >= sizeof path) return dh_err("path '%s/%s.tsv' is too long", dir, id);
    return out_tsv(path, res, 1);
}
