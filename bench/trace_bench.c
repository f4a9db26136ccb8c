/* trace_bench.c: throughput of the selection generator and of the trace
 * statistics on one core, and the cost of a full-size trace.
 *
 *   make build/bench/trace_bench && build/bench/trace_bench [PRESET] [--file DIR] [--no-full] [--groups N]
 *
 * Prints, for the preset's 100K-context shape (k = 2048):
 *   1. generation: selected rows per second of one stream (every row of
 *      every selection counts; the burn-in is included in the time);
 *   2. stats: selected rows per second of `dhtrace stats` work on a stream
 *      replayed from memory as the N groups (default 4) of one request (so
 *      generation is not counted; every row of every selection counts,
 *      position 0 included; best of 3 runs of stats_run, each allocating
 *      afresh), with LRU curve, overlaps, reuse and union only, then with
 *      FIFO/random/Belady at 2k, then at the default budgets 1k,2k,4k (the
 *      `dhtrace stats` default), then each of FIFO, random and Belady alone
 *      at 1k,2k,4k (what each costs on top of the first line);
 *   3. the wall time to generate every stream of a 16-request, 78-layer,
 *      1,000-token trace on one core, and, with --file DIR, to write it with
 *      trace_write (bytes per stored row on disk). */
#include "common/dh_err.h"
#include "traces/gen.h"
#include "traces/stats.h"
#include "traces/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- a replay source: one recorded stream, served for every (r, g). */
typedef struct {
    uint32_t positions;
    uint32_t *nrows, *nsel, *na, *nr;
    size_t *off;
    uint32_t *rows;
} recording;

typedef struct {
    sel_stream_head head;
    const recording *rec;
    uint32_t t;
} replay_stream;

static int rp_open(sel_source *src, uint32_t r, uint32_t g, sel_stream **out);
static int rp_next(sel_stream *st, sel_delta *d)
{
    replay_stream *s = (replay_stream *)st;
    const recording *R = s->rec;
    if (s->t >= R->positions) return 1;
    uint32_t t = s->t++;
    memset(d, 0, sizeof *d);
    d->pos = t;
    d->nrows = R->nrows[t];
    d->n_sel = R->nsel[t];
    d->n_added = R->na[t];
    d->n_removed = R->nr[t];
    d->added = R->rows + R->off[t];
    d->removed = d->added + R->na[t];
    return 0;
}
static void rp_close(sel_stream *st) { free(st); }
static void rp_free(sel_source *src) { trace_meta_release(&src->meta); free(src); }
static const sel_source_ops rp_ops = {rp_open, rp_next, rp_close, rp_free};
static int rp_open(sel_source *src, uint32_t r, uint32_t g, sel_stream **out)
{
    replay_stream *s = calloc(1, sizeof *s);
    s->head.ops = &rp_ops;
    s->rec = src->impl;
    *out = (sel_stream *)s;
    return 0;
}

int main(int argc, char **argv)
{
    const char *preset = "glm51-longbench", *dir = NULL;
    int full = 1;
    uint32_t n_groups = 4;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--file") && i + 1 < argc) dir = argv[++i];
        else if (!strcmp(argv[i], "--no-full")) full = 0;
        else if (!strcmp(argv[i], "--groups") && i + 1 < argc) n_groups = (uint32_t)atoi(argv[++i]);
        else preset = argv[i];
    }
    gen_params *p;
    if (gen_params_load(preset, &p) < 0) dh_die_last("trace_bench");
    trace_shape sh;
    if (gen_params_default_shape(p, &sh) < 0) dh_die_last("trace_bench");
    printf("preset %s: k %u, prompt %u, output %u, %u requests, %u layers in %u groups\n", preset, sh.group_k[0],
           sh.prompt_len[0], sh.output_len[0], sh.n_requests, sh.n_layers, sh.n_groups);

    /* 1. Generation of single streams. */
    sel_source *src;
    if (gen_source_new(p, &sh, 1, 64, &src) < 0) dh_die_last("trace_bench");
    recording rec = {0};
    uint32_t P = sh.output_len[0];
    rec.nrows = calloc(P, 4); rec.nsel = calloc(P, 4); rec.na = calloc(P, 4); rec.nr = calloc(P, 4);
    rec.off = calloc(P + 1, sizeof(size_t));
    size_t cap = 1 << 20, n = 0;
    rec.rows = malloc(cap * 4);
    double t0 = now(), best = 1e9;
    uint64_t sel_rows = 0, changed = 0;
    for (int rep = 0; rep < 3; rep++) {
        sel_stream *st;
        sel_delta d;
        double a = now();
        if (sel_open(src, (uint32_t)rep, 0, &st) < 0) dh_die_last("trace_bench");
        uint64_t rows = 0;
        while (sel_next(st, &d) == 0) {
            rows += d.n_sel;
            if (rep == 0) {
                uint32_t t = d.pos;
                if (n + d.n_added + d.n_removed > cap) { cap *= 2; rec.rows = realloc(rec.rows, cap * 4); }
                rec.off[t] = n;
                memcpy(rec.rows + n, d.added, d.n_added * 4);
                memcpy(rec.rows + n + d.n_added, d.removed, d.n_removed * 4);
                n += d.n_added + d.n_removed;
                rec.nrows[t] = d.nrows; rec.nsel[t] = d.n_sel; rec.na[t] = d.n_added; rec.nr[t] = d.n_removed;
                rec.positions = t + 1;
                if (t) changed += d.n_added + d.n_removed;
            }
        }
        sel_close(st);
        double el = now() - a;
        if (el < best) best = el;
        sel_rows = rows;
    }
    (void)t0;
    printf("generate: %.1f M selected rows/s (one stream, %llu rows, best of 3: %.3f s; %.1f changed rows per position)\n",
           sel_rows / best / 1e6, (unsigned long long)sel_rows, best, (double)changed / (rec.positions - 1));

    /* 2. Stats on the recorded stream, replayed 4 times as 4 groups of one request. */
    sel_source *rp = calloc(1, sizeof *rp);
    rp->ops = &rp_ops;
    rp->impl = &rec;
    trace_shape_uniform(&rp->meta.shape, "replay", 1, n_groups, 1, sh.group_k[0], sh.prompt_len[0], sh.output_len[0]);
    const char *label[6] = {"LRU curve + overlaps + reuse + union", "  + FIFO, random, Belady at 2k",
                            "  + FIFO, random, Belady at 1k,2k,4k", "  + FIFO at 1k,2k,4k", "  + random at 1k,2k,4k",
                            "  + Belady at 1k,2k,4k"};
    for (int mode = 0; mode < 6; mode++) {
        stats_options o;
        stats_options_init(&o);
        if (mode == 0) o.fifo = o.random = o.belady = 0;
        if (mode == 1) stats_parse_budgets(&o, "2k");
        if (mode >= 3) { o.fifo = mode == 3; o.random = mode == 4; o.belady = mode == 5; }
        double el = 1e9;
        uint64_t rows = 0;
        for (int rep = 0; rep < 3; rep++) {
            stats_report *r;
            double a = now();
            if (stats_run(rp, &o, &r) < 0) dh_die_last("trace_bench");
            double e = now() - a;
            if (e < el) el = e;
            rows = r->total.selected + (uint64_t)n_groups * rec.nsel[0];
            stats_report_free(r);
        }
        printf("stats %-38s %.1f M selected rows/s (best of 3: %.3f s)\n", label[mode], rows / el / 1e6, el);
    }
    rp_free(rp);
    free(rec.nrows); free(rec.nsel); free(rec.na); free(rec.nr); free(rec.off); free(rec.rows);

    /* 3. The full 16-request, 78-layer, 1,000-token trace. */
    if (!full) return 0;
    trace_shape big;
    if (gen_params_default_shape(p, &big) < 0) dh_die_last("trace_bench");
    for (uint32_t r = 0; r < big.n_requests; r++) big.output_len[r] = 1000;
    sel_source *bs;
    if (gen_source_new(p, &big, 1, 64, &bs) < 0) dh_die_last("trace_bench");
    double a = now();
    uint64_t rows = 0;
    for (uint32_t r = 0; r < big.n_requests; r++)
        for (uint32_t g = 0; g < big.n_groups; g++) {
            sel_stream *st;
            sel_delta d;
            if (sel_open(bs, r, g, &st) < 0) dh_die_last("trace_bench");
            while (sel_next(st, &d) == 0) rows += d.n_sel;
            sel_close(st);
        }
    double el = now() - a;
    printf("full trace (%u requests x %u layers in %u groups x 1000 positions): generated in %.1f s on one core "
           "(%.1f M rows/s)\n", big.n_requests, big.n_layers, big.n_groups, el, rows / el / 1e6);
    if (dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/trace_bench.h5", dir);
        a = now();
        if (trace_write(path, bs, NULL, NULL) < 0) dh_die_last("trace_bench");
        el = now() - a;
        struct stat stt;
        if (stat(path, &stt) < 0) dh_die("trace_bench", "unable to stat '%s'", path);
        printf("written with trace_write in %.1f s: %.1f MB, %.3f bytes per selected row, %.2f bytes per changed row\n",
               el, stt.st_size / 1e6, (double)stt.st_size / rows,
               (double)stt.st_size / ((double)changed / (rec.positions - 1) * 999 * big.n_requests * big.n_groups +
                                      (double)big.n_requests * big.n_groups * big.group_k[0]));
        remove(path);
    }
    sel_source_free(bs);
    sel_source_free(src);
    trace_shape_release(&sh);
    trace_shape_release(&big);
    gen_params_free(p);
    return 0;
}
