/* tp.c: the all-reduce of tensor-parallel attention; see tp.h. */
#include "sim/tp.h"

double tp_allreduce_s(const tp_cfg *c, double bytes)
{
    if (!(c->ranks > 1)) return 0;
    return c->lat_s + bytes * 2.0 * (c->ranks - 1) / c->ranks / (c->busbw_gbps * 1e9);
}
