/* test_admit.c: [instance] admission = sglang (sim/admit.h), SGLang's scheduler, against a
 * hand-worked case and a plain reference.
 *
 * The tiny fixture (tests/test_sim_tiny.h) under the resident policy holds 4 x 1000 B of KV
 * rows and a 16 B indexer key per token, so a pool of P tokens is P x 4016 B (the workspace
 * sized to leave exactly that). The reference below is written from SGLang's rules (admit.h's
 * description, schedule_policy.py, schedule_batch.py, scheduler.py) in whole tokens, with
 * none of the simulator's code: a FIFO queue, rounds that admit from its head against
 * free - offset, the chunk budget and the chunked request, batch_is_full (set on NO_TOKEN and
 * at the cap, cleared when the running batch shrinks or a prefill replaces an empty one), the
 * ratio's decay, the decode check, the retraction order and the ratio's re-estimate, re-prefill of prompt and output
 * so far. Both run the same workload; every request's first admission step, finish step and
 * retraction count must agree, and so must the run's retractions.
 *
 * The hand-worked case (P = 1000 tokens, prompts of 10, outputs of 400, 10 in flight, chunk
 * 1000, SGLang's constants): round 0 admits requests 0 and 1 (410 < 1000, 410 < 1000 - 410)
 * and stops at request 2 (410 >= 1000 - 820: NO_TOKEN, the batch full); their prefill becomes
 * the running batch, which clears the flag, and the next round counts each at
 * ceil(400 x 0.7) = 280 and admits request 2 (410 < 980 - 560); request 3 finds 10 tokens
 * (NO_TOKEN: full again, and request 2's prefill merges into a non-empty batch, which keeps
 * the flag); then decoding starts with 3
 * requests, 3 tokens a step. The estimates never let a fourth in (at step s the pool has
 * 970 - 3s free against 3 ceil((400 - s) ratio)), and the pool runs out at decode step 323
 * (970 - 3 x 323 = 1 < 3): all three have decoded 323 tokens over equal prompts, so the latest
 * admitted, request 2, is retracted, and the ratio becomes (2 x 323 + 20 x 2) / (800 + 1).
 * Requests 0 and 1 finish at step 399; request 2 waits behind requests 3 .. 9 and prefills its
 * 10 + 323 tokens again when it is admitted. A planted fault in the reference (the earliest
 * admitted retracted instead) must disagree with the simulator, and so must one without
 * batch_is_full on the drawn workloads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/dh_err.h"
#include "sim/sim.h"
#include "test_sim_src.h"
#include "test_sim_tiny.h"

static char dir[256];
static char inst_path[300];

#define TOKEN_BYTES 4016.0 /* 4 layers x 1000 B rows + one 16 B indexer key */
#define MAXR 64

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/test_admit.XXXXXX");
    if (!mkdtemp(dir)) return -1;
    char buf[4096];
    tiny_write_model(dir, 1000.0, 64);
    /* Compute-bound enough that every step and prefill iteration takes a positive time. */
    tiny_hw_text_at(buf, sizeof buf, 1e13, 1e12, 1e-6, 1e11, "");
    tiny_write(dir, "hw.ini", buf);
    snprintf(buf, sizeof buf,
             TINY_INSTANCE(1)
             "[workload]\nmode = closed\nconcurrency = 10\nprompt_len = 10\noutput_len = 400\nsteps = 100000\n"
             "[prefill]\nmode = chunked\nchunk_tokens = 1000\n"
             "[policy]\nname = resident\n"
             "[trace]\npreset = unused\nseed = 3\n", dir, dir);
    tiny_write(dir, "inst.ini", buf);
    snprintf(inst_path, sizeof inst_path, "%s/inst.ini", dir);
    snprintf(buf, sizeof buf,
             TINY_INSTANCE(1)
             "[workload]\nmode = closed\nconcurrency = 10\nprompt_len = 10\noutput_len = 400\nsteps = 100\n"
             "[policy]\nname = resident\n[trace]\npreset = unused\nseed = 3\n", dir, dir);
    tiny_write(dir, "disagg.ini", buf);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return tiny_rmdir(dir);
}

/* ---- the plain reference, in tokens ---- */

typedef struct {
    uint32_t prompt, out;
    uint32_t pos, held, left, len; /* decoded; KV tokens held; prefill tokens left of len */
    int state;                     /* 0 waiting (or not arrived), 1 running, 2 done */
    int admit_step, finish_step, retracted;
    uint32_t rank;                 /* admission order among the running */
} ref_req;

typedef struct {
    uint32_t pool, chunk, cap, target, n, steps;
    int planted;                   /* retract the earliest admitted instead */
    int no_full;                   /* planted: no batch_is_full (re-check every round) */
    int full;                      /* SGLang's batch_is_full */
    ref_req q[MAXR];
    uint32_t queue[MAXR * 8], qh, qn;
    uint32_t run[MAXR], nrun;      /* running, admission order */
    uint32_t next, completed, retractions, held;
    double ntr, init, min, decay;
} ref;

static uint32_t umin(uint32_t a, uint32_t b) { return a < b ? a : b; }

static void ref_round(ref *R, int step)
{
    while (R->next < R->n && R->next - R->completed < R->target) R->queue[R->qh + R->qn++] = R->next++;
    uint32_t budget = R->chunk, offset = 0;
    for (uint32_t i = 0; i < R->nrun; i++) {
        ref_req *x = &R->q[R->run[i]];
        if (!x->left) {
            offset += (uint32_t)ceil(umin(x->out - x->pos, 4096) * R->ntr);
        } else {
            uint32_t c = umin(x->left, budget);
            budget -= c;
            offset += c + (c == x->left ? umin(x->out, 4096) : 0);
        }
    }
    const double free = (double)R->pool - R->held;
    if (R->no_full) R->full = 0;
    /* In add_one_req's order: the cap, the memory (NO_TOKEN), the chunk (OTHER); then
     * budget_state, NO_TOKEN first. NO_TOKEN and the cap set batch_is_full, which only a
     * finish or a retraction clears. */
    while (R->qn && !R->full) {
        if (R->cap && R->nrun >= R->cap) {
            R->full = 1;
            break;
        }
        ref_req *x = &R->q[R->queue[R->qh]];
        uint32_t extend = x->prompt + x->pos, total = extend + umin(x->out - x->pos, 4096);
        if (total >= free - offset) {
            R->full = 1;
            break;
        }
        if (!budget) break;
        R->qh++, R->qn--;
        if (x->admit_step < 0) x->admit_step = step;
        x->state = 1;
        x->len = x->left = extend;
        R->run[R->nrun++] = (uint32_t)(x - R->q);
        uint32_t c = umin(extend, budget);
        offset += c == extend ? total : c;
        budget -= c;
        if (free - offset <= 0) {
            R->full = 1;
            break;
        }
        if (!budget) break; /* OTHER: the next head is not looked at */
    }
}

/* One prefill iteration over the pending prompts in admission order; 0 if none. */
static int ref_prefill(ref *R)
{
    uint32_t budget = R->chunk, took = 0;
    int decoding = 0, done = 0;
    for (uint32_t i = 0; i < R->nrun; i++) decoding |= !R->q[R->run[i]].left;
    for (uint32_t i = 0; i < R->nrun && budget; i++) {
        ref_req *x = &R->q[R->run[i]];
        uint32_t c = umin(x->left, budget);
        x->left -= c, x->held += c, R->held += c, budget -= c, took += c;
        done |= c > 0 && !x->left;
    }
    /* Completed prefills into an empty running batch replace it: the flag is lost. */
    if (done && !decoding) R->full = 0;
    return took > 0;
}

static void ref_run(ref *R)
{
    R->ntr = R->init = 0.7;
    R->min = 0.7 * 0.14;
    R->decay = (R->init - R->min) / 600;
    for (uint32_t i = 0; i < R->n; i++) R->q[i].admit_step = R->q[i].finish_step = -1;
    for (uint32_t s = 0; s < R->steps; s++) {
        do ref_round(R, (int)s);
        while (ref_prefill(R));
        if (!R->nrun) {
            R->ntr = R->init;
            break;
        }
        if (R->nrun <= R->pool - R->held) {
            R->ntr = fmax(R->ntr - R->decay, R->min);
        } else {
            /* Victims from the end of (decoded desc, prompt asc, admission order). */
            uint32_t ord[MAXR], n = R->nrun;
            memcpy(ord, R->run, n * sizeof *ord);
            for (uint32_t i = 1; i < n; i++)
                for (uint32_t j = i; j > 0; j--) {
                    ref_req *a = &R->q[ord[j - 1]], *b = &R->q[ord[j]];
                    int swap = R->planted ? 0 : a->pos < b->pos || (a->pos == b->pos && a->prompt > b->prompt);
                    if (!swap) break;
                    uint32_t t = ord[j - 1];
                    ord[j - 1] = ord[j];
                    ord[j] = t;
                }
            if (R->planted) /* the fault: the earliest admitted goes first */
                for (uint32_t i = 0; i < n / 2; i++) {
                    uint32_t t = ord[i];
                    ord[i] = ord[n - 1 - i];
                    ord[n - 1 - i] = t;
                }
            while (n > 1 && n > R->pool - R->held) { /* n requests need n tokens */
                ref_req *x = &R->q[ord[--n]];
                R->held -= x->held;
                x->held = 0, x->state = 0, x->retracted++;
                R->retractions++;
                R->full = 0;
                R->queue[R->qh + R->qn++] = (uint32_t)(x - R->q);
            }
            uint32_t kept = 0;
            double dec = 0, mx = 0;
            for (uint32_t i = 0; i < R->nrun; i++)
                if (R->q[R->run[i]].state == 1) {
                    R->run[kept++] = R->run[i];
                    dec += R->q[R->run[i]].pos, mx += R->q[R->run[i]].out;
                }
            R->nrun = kept;
            R->ntr = fmin(1.0, (dec + 20.0 * kept) / (mx + 1));
        }
        uint32_t kept = 0;
        for (uint32_t i = 0; i < R->nrun; i++) {
            ref_req *x = &R->q[R->run[i]];
            x->pos++;
            if (x->pos >= x->out) {
                x->state = 2, x->finish_step = (int)s;
                R->full = 0;
                R->held -= x->held, x->held = 0;
                R->completed++;
            } else {
                x->held++, R->held++;
                R->run[kept++] = R->run[i];
            }
        }
        R->nrun = kept;
    }
}

/* ---- the simulator on the same workload ---- */

typedef struct {
    int admit_step[MAXR], finish_step[MAXR];
    double retractions;
    uint32_t n;
    uint32_t prompt[MAXR], out[MAXR];
} sim_out;

/* The step whose span holds time t: a round at time t belongs to the first step ending
 * after it. */
static int step_of(const sim_result *r, double t)
{
    for (uint32_t i = 0; i < r->n_tl; i++)
        if (t < r->tl[i].t_end) return (int)i;
    return -1;
}

static int step_ending(const sim_result *r, double t)
{
    for (uint32_t i = 0; i < r->n_tl; i++)
        if (r->tl[i].t_end == t) return (int)i;
    return -2;
}

static void run_sim(char **sets, int n_sets, sim_out *o, double *has_retr)
{
    sim_config sc;
    if (sim_config_load(inst_path, sets, n_sets, &sc) < 0) fail_msg("%s", dh_errmsg());
    trace_shape sh;
    assert_int_equal(sim_shape(&sc, &sh), 0);
    assert_true(sh.n_requests <= MAXR);
    sel_source *src;
    assert_int_equal(memsrc_new(&sh, 8, 1, &src), 0);
    for (uint32_t r = 0; r < sh.n_requests; r++)
        for (uint32_t g = 0; g < sh.n_groups; g++) ts_walk(src, &sh, r, g, 0.1, 7);
    o->n = sh.n_requests;
    memcpy(o->prompt, sh.prompt_len, sh.n_requests * sizeof *o->prompt);
    memcpy(o->out, sh.output_len, sh.n_requests * sizeof *o->out);
    trace_shape_release(&sh);
    pol_kind kind;
    assert_int_equal(pol_parse("resident", &kind), 0);
    sim_result res;
    if (sim_run(&sc, kind, src, &res) < 0) fail_msg("%s", dh_errmsg());
    for (uint32_t i = 0; i < o->n; i++) {
        const reqlat_rec *x = &res.req[i];
        o->admit_step[i] = x->admit >= 0 ? step_of(&res, x->admit) : -1;
        o->finish_step[i] = x->finish >= 0 ? step_ending(&res, x->finish) : -1;
    }
    o->retractions = res.retractions;
    *has_retr = res.has_retractions;
    sim_result_release(&res);
    sel_source_free(src);
    sim_config_release(&sc);
}

/* planted: 0 none, 1 the earliest admitted retracted, 2 no batch_is_full (every round looks
 * at the queue's head again). */
static void ref_from(ref *R, const sim_out *o, uint32_t pool, uint32_t chunk, uint32_t cap, uint32_t target,
                     uint32_t steps, int planted)
{
    memset(R, 0, sizeof *R);
    R->pool = pool, R->chunk = chunk, R->cap = cap, R->target = target, R->n = o->n, R->steps = steps;
    R->planted = planted == 1;
    R->no_full = planted == 2;
    for (uint32_t i = 0; i < o->n; i++) R->q[i] = (ref_req){ .prompt = o->prompt[i], .out = o->out[i] };
    ref_run(R);
}

/* Whether the simulator and the reference agree on every request and on the retractions. */
static int agree(const sim_out *o, const ref *R)
{
    if (o->retractions != R->retractions) return 0;
    for (uint32_t i = 0; i < o->n; i++)
        if (o->admit_step[i] != R->q[i].admit_step || o->finish_step[i] != R->q[i].finish_step) return 0;
    return 1;
}

static void pool_set(char *buf, size_t cap, uint32_t tokens)
{
    snprintf(buf, cap, "instance.workspace_bytes=%.17g", 1e12 - 1e6 - tokens * TOKEN_BYTES);
}

static void test_hand_worked(void **state)
{
    (void)state;
    char pool[96];
    pool_set(pool, sizeof pool, 1000);
    char *sets[] = { pool, "instance.admission=sglang", "workload.requests=12" };
    sim_out o;
    double has;
    run_sim(sets, 3, &o, &has);
    assert_true(has == 1);
    ref R;
    ref_from(&R, &o, 1000, 1000, 0, 10, 100000, 0);
    /* The hand-worked facts (above), in the reference and in the simulator. */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(R.q[i].admit_step, 0);
        assert_int_equal(o.admit_step[i], 0);
    }
    assert_int_equal(R.q[0].retracted, 0);
    assert_int_equal(R.q[1].retracted, 0);
    assert_true(R.q[2].retracted >= 1);
    assert_int_equal(R.q[0].finish_step, 399);
    assert_int_equal(o.finish_step[0], 399);
    assert_int_equal(o.finish_step[1], 399);
    /* Request 2 was retracted at step 323: it had 77 tokens to go, and finishes after
     * requests 3 .. 9, admitted before it when 0 and 1 left. */
    assert_true(o.finish_step[2] > o.finish_step[3]);
    assert_true(o.admit_step[3] == 400 && o.admit_step[2] == 0);
    assert_true(agree(&o, &R));
    /* The first retraction comes at step 323: a run of 323 steps has none, of 324 one. */
    char s323[] = "workload.steps=323", s324[] = "workload.steps=324";
    char *a[] = { pool, "instance.admission=sglang", "workload.requests=12", s323 };
    run_sim(a, 4, &o, &has);
    assert_true(o.retractions == 0);
    a[3] = s324;
    run_sim(a, 4, &o, &has);
    assert_true(o.retractions == 1);
    /* The planted fault (request 0 retracted) disagrees. */
    run_sim(sets, 3, &o, &has);
    ref P;
    ref_from(&P, &o, 1000, 1000, 0, 10, 100000, 1);
    assert_true(P.q[0].retracted >= 1);
    assert_false(agree(&o, &P));
}

/* Drawn lengths, prompts longer than the chunk (the chunked request carried over rounds),
 * a running cap: the simulator against the reference on three seeds; the reference without
 * batch_is_full (SGLang's flag that stops admission from a NO_TOKEN until the running batch
 * shrinks) disagrees on at least one. */
static void test_reference_drawn(void **state)
{
    (void)state;
    char pool[96];
    pool_set(pool, sizeof pool, 3000);
    static char seed[3][32];
    int no_full_disagrees = 0;
    for (int k = 0; k < 3; k++) {
        snprintf(seed[k], sizeof seed[k], "trace.seed=%d", 11 + k);
        char *sets[] = { pool, "instance.admission=sglang", "workload.requests=40", "workload.concurrency=12",
                         "workload.prompt_len=50", "workload.prompt_len_max=700", "workload.output_len=20",
                         "workload.output_len_max=900", "prefill.chunk_tokens=256", "prefill.max_running=8",
                         seed[k] };
        sim_out o;
        double has;
        run_sim(sets, 11, &o, &has);
        ref R;
        ref_from(&R, &o, 3000, 256, 8, 12, 100000, 0);
        assert_true(R.retractions > 0); /* the case exercises retraction */
        for (uint32_t i = 0; i < o.n; i++) assert_true(R.q[i].finish_step >= 0);
        if (!agree(&o, &R)) {
            for (uint32_t i = 0; i < o.n; i++)
                fprintf(stderr, "request %u: sim admit %d finish %d, reference admit %d finish %d (retracted %d)\n", i,
                        o.admit_step[i], o.finish_step[i], R.q[i].admit_step, R.q[i].finish_step, R.q[i].retracted);
            fail_msg("seed %d: %g retractions simulated, %u in the reference", 11 + k, o.retractions, R.retractions);
        }
        /* The planted fault: rounds that look at the queue's head while the batch is full. */
        ref P;
        ref_from(&P, &o, 3000, 256, 8, 12, 100000, 2);
        no_full_disagrees += !agree(&o, &P);
    }
    assert_true(no_full_disagrees > 0);
}

/* The default admission reserves whole lengths: no retraction, none reported; the sglang
 * constants are refused there, and sglang without colocated prefill is refused. */
static void test_reserve_full_and_errors(void **state)
{
    (void)state;
    char pool[96];
    pool_set(pool, sizeof pool, 1000);
    char *sets[] = { pool, "workload.requests=12" };
    sim_out o;
    double has;
    run_sim(sets, 2, &o, &has);
    assert_true(has == 0 && o.retractions == 0);
    /* Two requests of 410 tokens fit a pool of 1000 at once. */
    assert_int_equal(o.admit_step[0], 0);
    assert_int_equal(o.admit_step[1], 0);
    assert_true(o.admit_step[2] > 0);
    sim_config sc;
    char *bad1[] = { "instance.retract_decode_steps=10" };
    assert_int_equal(sim_config_load(inst_path, bad1, 1, &sc), -1);
    assert_non_null(strstr(dh_errmsg(), "retract_decode_steps is given but admission = reserve_full"));
    sim_config_release(&sc);
    char *bad2[] = { "instance.admission=sglang" };
    char disagg[320];
    snprintf(disagg, sizeof disagg, "%s/disagg.ini", dir);
    assert_int_equal(sim_config_load(disagg, bad2, 1, &sc), -1);
    assert_non_null(strstr(dh_errmsg(), "needs [prefill] mode = chunked"));
    sim_config_release(&sc);
    char *bad3[] = { "instance.admission=fifo" };
    assert_int_equal(sim_config_load(inst_path, bad3, 1, &sc), -1);
    assert_non_null(strstr(dh_errmsg(), "admission = 'fifo' (expected reserve_full or sglang)"));
    sim_config_release(&sc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_worked),
        cmocka_unit_test(test_reference_drawn),
        cmocka_unit_test(test_reserve_full_and_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
