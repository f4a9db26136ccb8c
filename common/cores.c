/* cores.c: see cores.h. One counter of lent threads, changed atomically. */
#include "common/cores.h"

#include <pthread.h>
#include <stdlib.h>

static int lent;

void cores_lend(int n)
{
    if (n > 0) __atomic_add_fetch(&lent, n, __ATOMIC_RELAXED);
}

int cores_borrow(int want)
{
    int have = __atomic_load_n(&lent, __ATOMIC_RELAXED);
    while (want > 0 && have > 0) {
        int take = have < want ? have : want;
        if (__atomic_compare_exchange_n(&lent, &have, have - take, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
            return take;
    }
    return 0;
}

void cores_give_back(int n) { cores_lend(n); }

void cores_withdraw(int n)
{
    if (n > 0) __atomic_sub_fetch(&lent, n, __ATOMIC_RELAXED);
}

typedef struct {
    void *(*fn)(void *);
    void *arg;
} pool_call;

static void *pool_worker(void *p)
{
    const pool_call *c = p;
    c->fn(c->arg);
    cores_lend(1); /* this thread has no job left: a running job may use it */
    return NULL;
}

int cores_run_pool(int threads, size_t jobs, void *(*fn)(void *), void *arg)
{
    if (threads < 1) threads = 1;
    int nt = (size_t)threads > jobs ? (int)jobs : threads, started = 0;
    pthread_t *th = nt > 0 ? calloc((size_t)nt, sizeof *th) : NULL;
    if (nt > 0 && !th) abort();
    pool_call c = {fn, arg};
    cores_lend(threads - nt);
    for (int i = 0; i < nt; i++)
        if (pthread_create(&th[started], NULL, pool_worker, &c) == 0) started++;
    cores_lend(nt - started);
    if (started == 0) pool_worker(&c);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    /* Lent: threads - nt, nt - started, and one per worker (the caller's when none started). */
    cores_withdraw(threads - started + (started ? started : 1));
    free(th);
    return started;
}
