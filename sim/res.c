/* res.c: FIFO servers over simulated time; see res.h. O(1) per job. */
#include "sim/res.h"
#include "common/dh_err.h"

#include <string.h>

void res_init(res_server *r, const char *name)
{
    memset(r, 0, sizeof *r);
    r->name = name;
}

double res_submit(res_server *r, double t, double d, double bytes)
{
    DH_BUG_ON(!(d >= 0));
    double start = t > r->free_at ? t : r->free_at;
    r->free_at = start + d;
    r->busy += d;
    r->bytes += bytes;
    r->jobs++;
    return r->free_at;
}

int res_check(const res_server *r, double now)
{
    /* A relative slack absorbs floating-point summation order only. */
    if (r->busy > now * (1 + 1e-9) + 1e-12)
        return dh_err("invariant: resource '%s' busy %.9g s in %.9g s of simulated time", r->name, r->busy, now);
    return 0;
}
