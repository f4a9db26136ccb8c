/* swrun.c: the sweep's scheduler, workers and per-unit result files; see swrun.h.
 *
 * Cost: planning loads each task's configuration once (three small INI
 * files, O(keys)) and checks it; running costs one sim_run per task, whose
 * selection streams are generated once per group. The queue is a counter
 * under a mutex: a task lasts seconds, so contention is nil. */
#include "sweep/swrun.h"
#include "common/cores.h"
#include "common/dh_err.h"
#include "common/mem.h"
#include "sim/out.h"
#include "sim/prov.h"
#include "sim/sim.h"
#include "sweep/jsn.h"
#include "traces/gen.h"
#include "traces/progress.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    size_t unit;
    int pol;
    size_t group;
    uint64_t stream_key;
    uint64_t family_key; /* stream_key less the requests (stream_key()) */
    uint32_t n_requests; /* of the shape (0 for a trace file) */
    uint64_t result_key; /* what decides the run's results (result_key()) */
    size_t next_copy;    /* the next task that copies this one's run; SIZE_MAX: none */
    int is_copy;         /* 1: not queued, its owner's run is copied into it */
    char digest[17];
    int failed;
    char *error;
    jsn *run;
} task;

typedef struct {
    size_t remaining;
    sel_source *holder;  /* keeps the group's shared streams alive */
    pthread_mutex_t mu;
} group;

typedef struct {
    const swdef *d;
    const swrun_opts *o;
    task *tasks;         /* [n_units_todo * n_pol], unit-major */
    size_t n_tasks;
    size_t *units;       /* the units to run, ascending */
    size_t *unit_left;   /* tasks of each unit not finished */
    size_t *order;       /* tasks in run order: grouped by stream */
    group *groups;
    size_t n_groups;
    size_t n_queued;     /* tasks in order[] (the others copy one of them) */
    size_t next;
    size_t units_done, units_failed;
    int rc;
    char err[1024];
    progress bar;
    size_t bar_total, bar_base;
    pthread_mutex_t mu;
} sweep_run;

void swrun_point_path(const swdef *d, size_t u, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/points/p%06zu-s%s.json", d->output, u / d->n_seeds, d->seeds[u % d->n_seeds]);
}

static void set_err(sweep_run *r, const char *msg)
{
    pthread_mutex_lock(&r->mu);
    if (r->rc == 0) { r->rc = -1; snprintf(r->err, sizeof r->err, "%s", msg); }
    pthread_mutex_unlock(&r->mu);
}

/* The task's configuration: the unit's inputs with the policy's overrides. */
static int load_task(const swdef *d, size_t u, int pi, swdef_task *t, sim_config *sc)
{
    swdef_task_make(d, u, pi, t);
    if (sim_config_load(d->config, t->sim_sets, t->n_sim, sc) < 0) return -1;
    if (sc->spec.mode && d->pol[pi].pol == POL_ORACLE)
        return dh_err("policy oracle does not run with speculative decoding");
    return 0;
}

/* A source for the task: sim_open_source, or, with generator overrides, the
 * same generator with them applied (sim_open_source reads the preset as it
 * is; this is the one place a sweep needs more). */
static int open_source(const sim_config *sc, const swdef_task *t, sel_source **out)
{
    *out = NULL;
    if (t->n_gen == 0) return sim_open_source(sc, out);
    if (*sc->trace_path) return dh_err("generator overrides (gen.*) need a preset; the config reads trace '%s'", sc->trace_path);
    gen_params *p;
    if (gen_params_load(sc->preset, &p) < 0) return -1;
    for (int i = 0; i < t->n_gen; i++)
        if (gen_params_set(p, t->gen_sets[i]) < 0) { gen_params_free(p); return -1; }
    trace_shape sh;
    if (sim_shape(sc, &sh) < 0) { gen_params_free(p); return -1; }
    int rc = gen_source_new_shared(p, &sh, sc->seed, sc->keyframe_interval, out);
    trace_shape_release(&sh);
    gen_params_free(p);
    return rc;
}

/* What decides a task's selection streams; equal keys share them. *family
 * is the same less the number of requests and their lengths: the streams
 * of a family's smaller shapes are those of its largest one's first
 * requests when their lengths agree (gen_source_new_shared), so a family
 * runs largest first and keeps that one's streams open. */
static int stream_key(const sim_config *sc, const swdef_task *t, uint64_t *key, uint64_t *family, uint32_t *n_requests)
{
    uint64_t h = SWDEF_FNV_INIT;
    h = swdef_fnv(h, sc->preset, strlen(sc->preset) + 1);
    h = swdef_fnv(h, sc->trace_path, strlen(sc->trace_path) + 1);
    for (int i = 0; i < t->n_gen; i++) h = swdef_fnv(h, t->gen_sets[i], strlen(t->gen_sets[i]) + 1);
    h = swdef_fnv(h, &sc->seed, sizeof sc->seed);
    h = swdef_fnv(h, &sc->keyframe_interval, sizeof sc->keyframe_interval);
    *n_requests = 0;
    if (!*sc->trace_path) {
        trace_shape sh;
        if (sim_shape(sc, &sh) < 0) return -1;
        h = swdef_fnv(h, &sh.n_layers, sizeof sh.n_layers);
        h = swdef_fnv(h, &sh.n_groups, sizeof sh.n_groups);
        h = swdef_fnv(h, sh.layer_group, sh.n_layers * sizeof *sh.layer_group);
        h = swdef_fnv(h, sh.group_k, sh.n_groups * sizeof *sh.group_k);
        h = swdef_fnv(h, sh.group_compress, sh.n_groups * sizeof *sh.group_compress);
        *family = h;
        *n_requests = sh.n_requests;
        h = swdef_fnv(h, &sh.n_requests, sizeof sh.n_requests);
        h = swdef_fnv(h, sh.prompt_len, sh.n_requests * sizeof *sh.prompt_len);
        h = swdef_fnv(h, sh.output_len, sh.n_requests * sizeof *sh.output_len);
        trace_shape_release(&sh);
    } else {
        *family = h;
    }
    *key = h;
    return 0;
}

/* The digest of the resolved configuration: every file's entries after the
 * overrides, the generator overrides and the policy (sim/prov.h, the one dhsim records). */
static void config_digest(const sim_config *sc, const swdef_task *t, const char *label, char out[17])
{
    prov_digest(sc, t->gen_sets, t->n_gen, label, out);
}

/* What decides the task's results: the resolved configuration less the
 * [policy] keys the policy does not read (pol_ops.knobs), the generator
 * overrides, the streams and the policy's label (the run's JSON names it).
 * Tasks with equal keys give the same bytes, so only the first of them runs:
 * across the budgets of a sweep, resident and adaptive run once per stream. */
static uint64_t result_key(const sim_config *sc, const swdef_task *t, pol_kind pol, const char *label, uint64_t stream)
{
    uint64_t h = SWDEF_FNV_INIT;
    const cfg *files[3] = { sc->inst, sc->model_cfgf, sc->hw_cfgf };
    for (int i = 0; i < 3; i++) {
        for (size_t e = 0, n = cfg_entry_count(files[i]); e < n; e++) {
            const char *sec, *key, *val;
            cfg_entry_at(files[i], e, &sec, &key, &val);
            if (!strcmp(sec, "policy") && strcmp(key, "name") && !pol_reads_knob(pol, key)) continue;
            h = swdef_fnv(h, sec, strlen(sec) + 1);
            h = swdef_fnv(h, key, strlen(key) + 1);
            h = swdef_fnv(h, val, strlen(val) + 1);
        }
        h = swdef_fnv(h, "\n", 2); /* the file boundary */
    }
    for (int i = 0; i < t->n_gen; i++) h = swdef_fnv(h, t->gen_sets[i], strlen(t->gen_sets[i]) + 1);
    h = swdef_fnv(h, label, strlen(label) + 1);
    return swdef_fnv(h, &stream, sizeof stream);
}

/* ---------------------------------------------------------------- skipping */

/* 1 if unit u's file exists and holds this sweep's complete, successful
 * results; 0 otherwise (missing, partial, another sweep's, or failed). */
static int unit_done(const swdef *d, size_t u)
{
    char path[1200];
    swrun_point_path(d, u, path, sizeof path);
    if (access(path, F_OK) != 0) return 0;
    char *text;
    if (jsn_read_file(path, &text, NULL) < 0) return 0;
    jsn *j;
    int ok = jsn_parse(text, path, &j) == 0;
    free(text);
    if (!ok) return 0;
    double v, unit, units;
    const char *dg = jsn_str(j, "sweep_digest");
    const jsn *res = jsn_get(j, "results");
    ok = jsn_num(j, "dhsweep_point", &v) == 0 && v == 1 && dg && !strcmp(dg, d->digest) &&
         jsn_num(j, "unit", &unit) == 0 && unit == (double)u && jsn_num(j, "units", &units) == 0 &&
         units == (double)d->n_units && res && res->kind == JSN_ARR && res->n == (size_t)d->n_pol;
    for (int p = 0; ok && p < d->n_pol; p++) {
        const jsn *r = res->items[p];
        const char *pol = jsn_str(r, "policy"), *st = jsn_str(r, "status");
        const jsn *run = jsn_get(r, "run");
        ok = pol && !strcmp(pol, d->pol[p].label) && st && !strcmp(st, "ok") && run && run->kind == JSN_OBJ;
    }
    jsn_free(j);
    return ok;
}

/* ---------------------------------------------------------------- planning */

typedef struct {
    sweep_run *r;
    size_t next;
    pthread_mutex_t mu;
} plan_pool;

static void *plan_worker(void *arg)
{
    plan_pool *pp = arg;
    sweep_run *r = pp->r;
    const swdef *d = r->d;
    for (;;) {
        pthread_mutex_lock(&pp->mu);
        size_t i = pp->next++;
        pthread_mutex_unlock(&pp->mu);
        if (i >= r->n_tasks) return NULL;
        task *t = &r->tasks[i];
        swdef_task in;
        sim_config sc;
        memset(&sc, 0, sizeof sc);
        int rc = load_task(d, t->unit, t->pol, &in, &sc);
        if (rc == 0) rc = stream_key(&sc, &in, &t->stream_key, &t->family_key, &t->n_requests);
        if (rc == 0) config_digest(&sc, &in, d->pol[t->pol].label, t->digest);
        if (rc == 0) t->result_key = r->o->no_reuse ? (uint64_t)i : result_key(&sc, &in, d->pol[t->pol].pol, d->pol[t->pol].label, t->stream_key);
        if (rc < 0) {
            char msg[1024];
            snprintf(msg, sizeof msg, "%s: point %zu, seed %s, policy %s: %s", d->file, in.point, d->seeds[in.seed_index],
                     d->pol[t->pol].label, dh_errmsg());
            set_err(r, msg);
        }
        sim_config_release(&sc);
        swdef_task_release(&in);
    }
}

/* ---------------------------------------------------------------- running */

static int write_unit(sweep_run *r, size_t ui)
{
    const swdef *d = r->d;
    size_t u = r->units[ui];
    task *ts = &r->tasks[ui * d->n_pol];
    char path[1200], tmp[1300];
    swrun_point_path(d, u, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s/points/.tmp-%zu-%ld.json", d->output, u, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return dh_err("unable to write '%s': %s", tmp, strerror(errno));
    swdef_task in;
    swdef_task_make(d, u, -1, &in);
    fprintf(f, "{\"dhsweep_point\": 1, \"sweep_digest\": \"%s\", \"commit\": ", d->digest);
    jsn_write_str(f, r->o->commit);
    fprintf(f, ", \"unit\": %zu, \"units\": %zu, \"point\": %zu, \"seed\": ", u, d->n_units, in.point);
    jsn_write_str(f, d->seeds[in.seed_index]);
    fprintf(f, ",\n \"axes\": [");
    for (size_t i = 0; i < d->n_axes; i++) { if (i) fputs(", ", f); jsn_write_str(f, d->axes[i].key); }
    fprintf(f, "],\n \"inputs\": {");
    for (size_t i = 0; i < in.n_inputs; i++) {
        if (i) fputs(", ", f);
        jsn_write_str(f, in.inputs[i].key);
        fputs(": ", f);
        jsn_write_str(f, in.inputs[i].val);
    }
    fprintf(f, "},\n \"results\": [");
    for (int p = 0; p < d->n_pol; p++) {
        const task *t = &ts[p];
        fprintf(f, "%s\n  {\"policy\": ", p ? "," : "");
        jsn_write_str(f, d->pol[p].label);
        fprintf(f, ", \"status\": \"%s\", \"config_digest\": \"%s\"", t->failed ? "error" : "ok", t->digest);
        if (t->failed) { fputs(", \"error\": ", f); jsn_write_str(f, t->error ? t->error : "unknown error"); }
        else { fputs(", \"run\": ", f); jsn_write(f, t->run); }
        fputs("}", f);
    }
    fprintf(f, "\n]}\n");
    swdef_task_release(&in);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) { remove(tmp); return dh_err("write error on '%s'", tmp); }
    if (rename(tmp, path) < 0) { int e = errno; remove(tmp); return dh_err("unable to rename '%s' to '%s': %s", tmp, path, strerror(e)); }
    return 0;
}

/* The run's JSON of task t from text (out_json's), or its failure. */
static void keep_run(task *t, const char *text)
{
    jsn *j = NULL;
    int rc = jsn_parse(text, "out_json", &j);
    jsn *runs = (jsn *)jsn_get(j, "runs");
    if (rc == 0 && (!runs || runs->kind != JSN_ARR || runs->n != 1)) rc = dh_err("out_json: expected one run");
    if (rc == 0) {
        t->run = runs->items[0];
        runs->n = 0; /* the run object now belongs to t */
    }
    jsn_free(j);
    if (rc < 0) { t->failed = 1; t->error = strdup(dh_errmsg()); }
}

/* One (unit, policy): load, simulate, keep the run's JSON object, and hand
 * the same to the tasks that copy it. A failure is the task's (and its
 * copies'), recorded in t. */
static void run_task(sweep_run *r, task *t)
{
    const swdef *d = r->d;
    swdef_task in;
    sim_config sc;
    memset(&sc, 0, sizeof sc);
    sel_source *src = NULL;
    sim_result res;
    memset(&res, 0, sizeof res);
    int rc = load_task(d, t->unit, t->pol, &in, &sc);
    if (rc == 0) rc = open_source(&sc, &in, &src);
    if (rc == 0) {
        group *g = &r->groups[t->group];
        pthread_mutex_lock(&g->mu);
        /* The group's first task opens a second source that lives until the
         * group's last task ends, so the streams stay shared in between. */
        if (!g->holder && open_source(&sc, &in, &g->holder) < 0) g->holder = NULL;
        pthread_mutex_unlock(&g->mu);
        rc = sim_run(&sc, d->pol[t->pol].pol, src, &res);
    }
    char *buf = NULL;
    if (rc == 0) {
        snprintf(res.policy, sizeof res.policy, "%s", d->pol[t->pol].label);
        size_t len = 0;
        FILE *m = open_memstream(&buf, &len);
        if (!m) abort();
        rc = out_json(m, &res, 1, 0);
        fclose(m);
    }
    for (size_t c = (size_t)(t - r->tasks); c != SIZE_MAX; c = r->tasks[c].next_copy) {
        task *x = &r->tasks[c];
        if (rc == 0) keep_run(x, buf);
        else { x->failed = 1; x->error = strdup(dh_errmsg()); }
    }
    free(buf);
    sim_result_release(&res);
    sel_source_free(src);
    sim_config_release(&sc);
    swdef_task_release(&in);
}

static void unit_task_done(sweep_run *r, size_t ui);

static void *run_worker(void *arg)
{
    sweep_run *r = arg;
    const swdef *d = r->d;
    for (;;) {
        pthread_mutex_lock(&r->mu);
        size_t j = r->next++;
        int stop = r->rc < 0;
        pthread_mutex_unlock(&r->mu);
        if (stop || j >= r->n_queued) return NULL;
        size_t ti = r->order[j];
        task *t = &r->tasks[ti];
        run_task(r, t);
        group *g = &r->groups[t->group];
        pthread_mutex_lock(&g->mu);
        sel_source *drop = --g->remaining == 0 ? g->holder : NULL;
        if (drop) g->holder = NULL;
        pthread_mutex_unlock(&g->mu);
        sel_source_free(drop);
        for (size_t c = ti; c != SIZE_MAX; c = r->tasks[c].next_copy) unit_task_done(r, c / d->n_pol);
    }
}

/* Task of unit ui finished: the unit's last writes its file and lets its runs go. */
static void unit_task_done(sweep_run *r, size_t ui)
{
    const swdef *d = r->d;
    pthread_mutex_lock(&r->mu);
    int last = --r->unit_left[ui] == 0;
    pthread_mutex_unlock(&r->mu);
    if (!last) return;
    int failed = 0;
    for (int p = 0; p < d->n_pol; p++) failed |= r->tasks[ui * d->n_pol + p].failed;
    if (write_unit(r, ui) < 0) set_err(r, dh_errmsg());
    for (int p = 0; p < d->n_pol; p++) {
        task *x = &r->tasks[ui * d->n_pol + p];
        jsn_free(x->run); x->run = NULL;
        free(x->error); x->error = NULL;
    }
    pthread_mutex_lock(&r->mu);
    r->units_done++;
    r->units_failed += failed;
    if (r->o->progress) progress_update(r->bar_base + r->units_done, r->bar_total, &r->bar);
    pthread_mutex_unlock(&r->mu);
}

int swrun_run(const swdef *d, const swrun_opts *o, swrun_stats *st)
{
    memset(st, 0, sizeof *st);
    sweep_run r;
    memset(&r, 0, sizeof r);
    r.d = d;
    r.o = o;
    pthread_mutex_init(&r.mu, NULL);
    size_t parts = o->parts ? o->parts : 1;
    size_t cap = d->n_units / parts + 1;
    r.units = dh_calloc(cap, sizeof *r.units);
    size_t n_units = 0;
    for (size_t u = o->part; u < d->n_units; u += parts) {
        st->units++;
        if (!o->check_only && unit_done(d, u)) { st->skipped++; continue; }
        r.units[n_units++] = u;
    }
    r.n_tasks = n_units * (size_t)d->n_pol;
    r.tasks = dh_calloc(r.n_tasks ? r.n_tasks : 1, sizeof *r.tasks);
    for (size_t i = 0; i < r.n_tasks; i++) {
        r.tasks[i].unit = r.units[i / d->n_pol];
        r.tasks[i].pol = (int)(i % d->n_pol);
    }
    int workers = o->workers > 0 ? o->workers : 1;
    /* Every task's configuration is checked before any runs. */
    plan_pool pp = { &r, 0, PTHREAD_MUTEX_INITIALIZER };
    cores_run_pool(workers, r.n_tasks, plan_worker, &pp);
    pthread_mutex_destroy(&pp.mu);
    int rc = r.rc;
    if (o->agree && !o->agree(rc == 0, o->agree_arg) && rc == 0) {
        rc = -1;
        snprintf(r.err, sizeof r.err, "%s: another rank found a bad configuration", d->file);
    }
    if (rc < 0) { dh_err("%s", r.err); goto done; }
    st->tasks = r.n_tasks;
    if (o->check_only) goto done;

    /* Groups by stream family (stream_key()) in order of first appearance;
     * the queue runs each group's tasks together, the largest shape first,
     * then in unit and policy order. O(tasks x groups) in the worst case, a
     * small cost beside one simulation per task. */
    r.groups = dh_calloc(r.n_tasks ? r.n_tasks : 1, sizeof *r.groups);
    uint64_t *keys = dh_calloc(r.n_tasks ? r.n_tasks : 1, sizeof *keys);
    for (size_t i = 0; i < r.n_tasks; i++) {
        size_t g;
        for (g = r.n_groups; g-- > 0;)
            if (keys[g] == r.tasks[i].family_key) break;
        if (g == (size_t)-1) { g = r.n_groups++; keys[g] = r.tasks[i].family_key; pthread_mutex_init(&r.groups[g].mu, NULL); }
        r.tasks[i].group = g;
        r.groups[g].remaining++;
        r.tasks[i].next_copy = SIZE_MAX;
    }
    free(keys);
    size_t *start = dh_calloc(r.n_groups + 1, sizeof *start);
    for (size_t g = 0; g < r.n_groups; g++) start[g + 1] = start[g] + r.groups[g].remaining;
    size_t *by_group = dh_calloc(r.n_tasks ? r.n_tasks : 1, sizeof *by_group);
    for (size_t i = 0; i < r.n_tasks; i++) by_group[start[r.tasks[i].group]++] = i;
    /* The largest shape of each group first (insertion sort, stable: the
     * rest keeps unit and policy order), so its streams cover the others'. */
    for (size_t g = 0, b = 0; g < r.n_groups; g++) {
        for (size_t j = b + 1; j < start[g]; j++) {
            size_t x = by_group[j], i = j;
            while (i > b && r.tasks[by_group[i - 1]].n_requests < r.tasks[x].n_requests) { by_group[i] = by_group[i - 1]; i--; }
            by_group[i] = x;
        }
        b = start[g];
    }
    /* Within a group, a task whose result key an earlier task has is not
     * queued: that task's run is copied into it (a chain through next_copy,
     * in run order). O(group size^2): hundreds of tasks. */
    r.order = dh_calloc(r.n_tasks ? r.n_tasks : 1, sizeof *r.order);
    for (size_t g = 0, b = 0; g < r.n_groups; g++) {
        size_t e = start[g], *last = dh_calloc(e - b, sizeof *last);
        for (size_t j = b; j < e; j++) {
            task *t = &r.tasks[by_group[j]];
            size_t o = b;
            while (o < j && !(r.tasks[by_group[o]].result_key == t->result_key && !r.tasks[by_group[o]].is_copy)) o++;
            if (o == j) { r.order[r.n_queued++] = by_group[j]; last[j - b] = by_group[j]; continue; }
            t->is_copy = 1;
            r.tasks[last[o - b]].next_copy = by_group[j];
            last[o - b] = by_group[j];
            r.groups[g].remaining--;
        }
        free(last);
        b = e;
    }
    free(start);
    free(by_group);
    r.unit_left = dh_calloc(n_units ? n_units : 1, sizeof *r.unit_left);
    for (size_t i = 0; i < n_units; i++) r.unit_left[i] = (size_t)d->n_pol;

    r.bar_total = st->units;
    r.bar_base = st->skipped;
    if (o->progress) progress_init(&r.bar, "dhsweep: points");
    cores_run_pool(workers, r.n_queued, run_worker, &r);
    if (o->progress) progress_done(&r.bar);
    for (size_t g = 0; g < r.n_groups; g++) { sel_source_free(r.groups[g].holder); pthread_mutex_destroy(&r.groups[g].mu); }
    rc = r.rc;
    if (rc < 0) dh_err("%s", r.err);
    st->ran = r.units_done;
    st->reused = r.n_tasks - r.n_queued;
    st->failed = r.units_failed;
    st->tasks = r.n_tasks;
done:
    for (size_t i = 0; i < r.n_tasks; i++) { jsn_free(r.tasks[i].run); free(r.tasks[i].error); }
    free(r.tasks);
    free(r.units);
    free(r.unit_left);
    free(r.order);
    free(r.groups);
    pthread_mutex_destroy(&r.mu);
    return rc;
}
