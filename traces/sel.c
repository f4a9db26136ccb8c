/* sel.c: shape helpers shared by every selection producer and consumer; see sel.h. */
#include "traces/sel.h"
#include "common/dh_err.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

uint32_t sel_rows_at(const trace_shape *sh, uint32_t req, uint32_t group, uint32_t pos)
{
    uint64_t ctx = (uint64_t)sh->prompt_len[req] + pos;
    uint32_t c = sh->group_compress[group];
    return (uint32_t)((ctx + c - 1) / c);
}

static uint32_t *dup_u32(const uint32_t *a, size_t n)
{
    uint32_t *d = malloc((n ? n : 1) * sizeof *d);
    if (!d) abort();
    if (n) memcpy(d, a, n * sizeof *d);
    return d;
}

int trace_shape_copy(trace_shape *dst, const trace_shape *src)
{
    *dst = *src;
    dst->layer_group = dup_u32(src->layer_group, src->n_layers);
    dst->group_k = dup_u32(src->group_k, src->n_groups);
    dst->group_compress = dup_u32(src->group_compress, src->n_groups);
    dst->prompt_len = dup_u32(src->prompt_len, src->n_requests);
    dst->output_len = dup_u32(src->output_len, src->n_requests);
    return 0;
}

void trace_shape_release(trace_shape *sh)
{
    free(sh->layer_group);
    free(sh->group_k);
    free(sh->group_compress);
    free(sh->prompt_len);
    free(sh->output_len);
    memset(sh, 0, sizeof *sh);
}

void trace_meta_release(trace_meta *m)
{
    trace_shape_release(&m->shape);
    free(m->generator_params);
    m->generator_params = NULL;
}

int trace_shape_validate(const trace_shape *sh)
{
    if (sh->n_requests == 0) return dh_err("shape: no requests");
    if (sh->n_layers == 0 || sh->n_groups == 0) return dh_err("shape: no layers or no selection groups");
    if (sh->n_groups > sh->n_layers) return dh_err("shape: %u selection groups for %u layers", sh->n_groups, sh->n_layers);
    for (uint32_t l = 0; l < sh->n_layers; l++)
        if (sh->layer_group[l] >= sh->n_groups)
            return dh_err("shape: layer %u uses selection group %u, but there are %u", l, sh->layer_group[l], sh->n_groups);
    for (uint32_t g = 0; g < sh->n_groups; g++) {
        if (sh->group_k[g] == 0) return dh_err("shape: selection group %u has k = 0", g);
        if (sh->group_compress[g] == 0) return dh_err("shape: selection group %u has compress = 0", g);
    }
    for (uint32_t r = 0; r < sh->n_requests; r++) {
        if (sh->prompt_len[r] == 0) return dh_err("shape: request %u has an empty prompt", r);
        if ((uint64_t)sh->prompt_len[r] + sh->output_len[r] > UINT32_MAX)
            return dh_err("shape: request %u is longer than 2^32 tokens", r);
    }
    return 0;
}

int trace_shape_uniform(trace_shape *sh, const char *model, uint32_t n_requests, uint32_t n_layers,
                        uint32_t group_every, uint32_t k, uint32_t prompt_len, uint32_t output_len)
{
    memset(sh, 0, sizeof *sh);
    if (!n_requests || !n_layers || !group_every || !k || !prompt_len)
        return dh_err("shape: requests, layers, group size, k and prompt length must all be positive");
    snprintf(sh->model, sizeof sh->model, "%s", model);
    sh->n_requests = n_requests;
    sh->n_layers = n_layers;
    sh->n_groups = (n_layers + group_every - 1) / group_every;
    sh->layer_group = malloc(n_layers * sizeof(uint32_t));
    sh->group_k = malloc(sh->n_groups * sizeof(uint32_t));
    sh->group_compress = malloc(sh->n_groups * sizeof(uint32_t));
    sh->prompt_len = malloc(n_requests * sizeof(uint32_t));
    sh->output_len = malloc(n_requests * sizeof(uint32_t));
    if (!sh->layer_group || !sh->group_k || !sh->group_compress || !sh->prompt_len || !sh->output_len) abort();
    for (uint32_t l = 0; l < n_layers; l++) sh->layer_group[l] = l / group_every;
    for (uint32_t g = 0; g < sh->n_groups; g++) { sh->group_k[g] = k; sh->group_compress[g] = 1; }
    for (uint32_t r = 0; r < n_requests; r++) { sh->prompt_len[r] = prompt_len; sh->output_len[r] = output_len; }
    return 0;
}
