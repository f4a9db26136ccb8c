/* a2a_plan.c: shapes, routing, block layout, payload and checker of the
 * expert-parallel all-to-all benchmark (design and costs in a2a_plan.h). */
#include "kernels/a2a/a2a_plan.h"
#include "common/dh_err.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- shapes.ini */

/* The keys of one model section, in the order a2a_shape stores them. */
static const struct {
    const char *key;
    size_t off;
    long min, max;
} shape_keys[] = {
    {"hidden", offsetof(a2a_shape, hidden), 16, 1 << 20},
    {"experts", offsetof(a2a_shape, experts), 1, 1 << 16},
    {"topk", offsetof(a2a_shape, topk), 1, A2A_MAX_TOPK},
    {"dispatch_header_bytes", offsetof(a2a_shape, dispatch_header_bytes), 0, 4096},
    {"dispatch_elem_bytes", offsetof(a2a_shape, dispatch_elem_bytes), 1, 8},
    {"dispatch_scale_group", offsetof(a2a_shape, dispatch_scale_group), 1, 1 << 20},
    {"dispatch_scale_bytes", offsetof(a2a_shape, dispatch_scale_bytes), 0, 8},
    {"dispatch_route_bytes", offsetof(a2a_shape, dispatch_route_bytes), 0, 64},
    {"combine_elem_bytes", offsetof(a2a_shape, combine_elem_bytes), 1, 8},
};
#define SHAPE_NKEYS (sizeof shape_keys / sizeof shape_keys[0])

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

/* Check a finished section: every key present and the shape self-consistent. */
static int shape_finish(const char *path, const a2a_shape *m, const int *seen)
{
    for (size_t k = 0; k < SHAPE_NKEYS; k++)
        if (!seen[k])
            return dh_err("'%s': [%s] lacks key '%s'", path, m->name, shape_keys[k].key);
    if (m->topk > m->experts)
        return dh_err("'%s': [%s] topk %ld exceeds experts %ld", path, m->name, m->topk,
                      m->experts);
    if (m->hidden % m->dispatch_scale_group != 0)
        return dh_err("'%s': [%s] hidden %ld is not a multiple of dispatch_scale_group %ld",
                      path, m->name, m->hidden, m->dispatch_scale_group);
    if (a2a_dispatch_msg_bytes(m) < A2A_MIN_MSG || a2a_combine_msg_bytes(m) < A2A_MIN_MSG)
        return dh_err("'%s': [%s] messages must hold at least %d bytes", path, m->name,
                      A2A_MIN_MSG);
    return 0;
}

int a2a_shapes_load(const char *path, a2a_shapes *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->path, sizeof out->path, "%s", path);
    FILE *f = fopen(path, "r");
    if (!f)
        return dh_err("unable to open '%s': %s", path, strerror(errno));
    char line[1024];
    int lineno = 0, rc = 0;
    int seen[SHAPE_NKEYS] = {0};
    a2a_shape *cur = NULL;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        if (!strchr(line, '\n') && !feof(f)) {
            rc = dh_err("'%s' line %d: line too long", path, lineno);
            break;
        }
        /* A ';' or '#' starts a comment anywhere: values here are plain numbers. */
        line[strcspn(line, ";#")] = '\0';
        char *s = trim(line);
        if (!*s)
            continue;
        if (*s == '[') {
            char *e = strchr(s, ']');
            if (!e || e[1] != '\0' || e == s + 1) {
                rc = dh_err("'%s' line %d: malformed section header", path, lineno);
                break;
            }
            *e = '\0';
            if (cur && (rc = shape_finish(path, cur, seen)) < 0)
                break;
            if (out->n == A2A_MAX_MODELS) {
                rc = dh_err("'%s' line %d: more than %d models", path, lineno, A2A_MAX_MODELS);
                break;
            }
            char *name = trim(s + 1);
            if (strlen(name) >= A2A_NAME_MAX || a2a_shapes_find(out, name)) {
                rc = dh_err("'%s' line %d: section name '%s' too long or repeated", path, lineno,
                            name);
                break;
            }
            cur = &out->model[out->n++];
            snprintf(cur->name, sizeof cur->name, "%s", name);
            memset(seen, 0, sizeof seen);
            continue;
        }
        char *eq = strchr(s, '=');
        if (!eq) {
            rc = dh_err("'%s' line %d: expected 'key = value'", path, lineno);
            break;
        }
        *eq = '\0';
        char *key = trim(s), *val = trim(eq + 1);
        if (!cur) {
            rc = dh_err("'%s' line %d: key '%s' outside a section", path, lineno, key);
            break;
        }
        size_t k = 0;
        while (k < SHAPE_NKEYS && strcmp(shape_keys[k].key, key) != 0)
            k++;
        if (k == SHAPE_NKEYS) {
            rc = dh_err("'%s' line %d: unknown key '%s' in [%s]", path, lineno, key, cur->name);
            break;
        }
        if (seen[k]) {
            rc = dh_err("'%s' line %d: key '%s' repeated in [%s]", path, lineno, key, cur->name);
            break;
        }
        char *end;
        errno = 0;
        long v = strtol(val, &end, 10);
        if (errno || end == val || *end) {
            rc = dh_err("'%s' line %d: '%s' = '%s' is not an integer", path, lineno, key, val);
            break;
        }
        if (v < shape_keys[k].min || v > shape_keys[k].max) {
            rc = dh_err("'%s' line %d: '%s' = %ld outside [%ld, %ld]", path, lineno, key, v,
                        shape_keys[k].min, shape_keys[k].max);
            break;
        }
        *(long *)((char *)cur + shape_keys[k].off) = v;
        seen[k] = 1;
    }
    if (rc == 0 && ferror(f))
        rc = dh_err("'%s': read error", path);
    fclose(f);
    if (rc == 0 && cur)
        rc = shape_finish(path, cur, seen);
    if (rc == 0 && out->n == 0)
        rc = dh_err("'%s': no model sections", path);
    return rc;
}

const a2a_shape *a2a_shapes_find(const a2a_shapes *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->model[i].name, name) == 0)
            return &s->model[i];
    return NULL;
}

size_t a2a_dispatch_msg_bytes(const a2a_shape *m)
{
    return (size_t)(m->dispatch_header_bytes + m->hidden * m->dispatch_elem_bytes +
                    m->hidden / m->dispatch_scale_group * m->dispatch_scale_bytes +
                    m->topk * m->dispatch_route_bytes);
}

size_t a2a_combine_msg_bytes(const a2a_shape *m)
{
    return (size_t)(m->hidden * m->combine_elem_bytes);
}

const char *a2a_routing_name(a2a_routing r) { return r == A2A_ROUTE_RANDOM ? "random" : "balanced"; }
const char *a2a_dedup_name(a2a_dedup d) { return d == A2A_DEDUP_RANK ? "rank" : "expert"; }
const char *a2a_phase_name(a2a_phase p) { return p == A2A_DISPATCH ? "dispatch" : "combine"; }

/* ---------------------------------------------------------------- routing */

/* splitmix64's finaliser: a bijective 64-bit mix, good enough to decorrelate
 * counters for routing draws and payload bytes (not for statistics). */
static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

int a2a_route(const a2a_shape *m, int ranks, int tokens, a2a_routing routing, uint64_t seed,
              int32_t *route)
{
    int k = (int)m->topk;
    long E = m->experts;
    if (routing == A2A_ROUTE_BALANCED && E % k != 0)
        return dh_err("model '%s': balanced routing needs experts (%ld) divisible by topk (%d)",
                      m->name, E, k);
    for (int r = 0; r < ranks; r++)
        for (int t = 0; t < tokens; t++) {
            int32_t *e = route + ((size_t)r * tokens + t) * k;
            if (routing == A2A_ROUTE_BALANCED) {
                long g = (long)r * tokens + t;
                for (int j = 0; j < k; j++)
                    e[j] = (int32_t)((g + (long)j * (E / k)) % E);
            } else {
                /* Rejection sampling of k distinct experts: k <= 64 and k << E,
                 * so O(k^2) per token with few rejections. */
                uint64_t ctr = 0;
                for (int j = 0; j < k;) {
                    uint64_t h = mix64(seed ^ mix64(((uint64_t)r << 40) ^ ((uint64_t)t << 8) ^
                                                    mix64(ctr++)));
                    int32_t x = (int32_t)(h % (uint64_t)E);
                    int dup = 0;
                    for (int i = 0; i < j; i++)
                        dup |= e[i] == x;
                    if (!dup)
                        e[j++] = x;
                }
            }
            qsort(e, (size_t)k, sizeof *e, cmp_i32);
        }
    return 0;
}

/* ---------------------------------------------------------------- plans */

static int plan_alloc(a2a_plan *p, int ranks)
{
    size_t rr = (size_t)ranks * ranks;
    p->count = calloc(rr, sizeof *p->count);
    p->send_off = calloc(rr, sizeof *p->send_off);
    p->recv_off = calloc(rr, sizeof *p->recv_off);
    p->send_bytes = calloc((size_t)ranks, sizeof *p->send_bytes);
    p->recv_bytes = calloc((size_t)ranks, sizeof *p->recv_bytes);
    p->msgs = calloc(rr, sizeof *p->msgs);
    if (!p->count || !p->send_off || !p->recv_off || !p->send_bytes || !p->recv_bytes || !p->msgs) {
        a2a_plan_release(p);
        return dh_err("out of memory for an all-to-all plan of %d ranks", ranks);
    }
    return 0;
}

/* Offsets from counts: send blocks in destination order, receive blocks in
 * source order. */
static void plan_offsets(a2a_plan *p)
{
    int G = p->ranks;
    for (int s = 0; s < G; s++) {
        size_t off = 0;
        for (int d = 0; d < G; d++) {
            p->send_off[s * G + d] = off;
            off += p->count[s * G + d] * p->msg_bytes;
        }
        p->send_bytes[s] = off;
    }
    for (int d = 0; d < G; d++) {
        size_t off = 0;
        for (int s = 0; s < G; s++) {
            p->recv_off[d * G + s] = off;
            off += p->count[s * G + d] * p->msg_bytes;
        }
        p->recv_bytes[d] = off;
    }
}

int a2a_plan_dispatch(const a2a_shape *m, int ranks, int tokens, const int32_t *route,
                      a2a_dedup dedup, a2a_plan *out)
{
    memset(out, 0, sizeof *out);
    if (ranks < 1 || ranks > A2A_MAX_RANKS)
        return dh_err("ranks %d outside [1, %d]", ranks, A2A_MAX_RANKS);
    if (m->experts % ranks != 0)
        return dh_err("model '%s': %ld experts do not split evenly over %d ranks", m->name,
                      m->experts, ranks);
    if (plan_alloc(out, ranks) < 0)
        return -1;
    out->ranks = ranks;
    out->tokens = tokens;
    out->phase = A2A_DISPATCH;
    out->msg_bytes = a2a_dispatch_msg_bytes(m);
    int G = ranks, k = (int)m->topk;
    long per_rank = m->experts / G;
    /* Two passes over the routing, O(G * T * k) each: count, then list. */
    for (int pass = 0; pass < 2; pass++) {
        for (int s = 0; s < G; s++) {
            size_t fill[A2A_MAX_RANKS] = {0};
            for (int t = 0; t < tokens; t++) {
                const int32_t *e = route + ((size_t)s * tokens + t) * k;
                int last_rank = -1;
                /* Experts are ascending, so the ranks they live on are too:
                 * dedup per rank is "skip a repeat of the previous rank". */
                for (int j = 0; j < k; j++) {
                    int d = (int)(e[j] / per_rank);
                    if (dedup == A2A_DEDUP_RANK && d == last_rank)
                        continue;
                    last_rank = d;
                    if (pass == 0) {
                        out->count[s * G + d]++;
                    } else {
                        a2a_msg *mm = &out->msgs[s * G + d][fill[d]++];
                        mm->token = t;
                        mm->expert = dedup == A2A_DEDUP_RANK ? -1 : e[j];
                    }
                }
            }
        }
        if (pass == 0)
            for (int b = 0; b < G * G; b++) {
                out->msgs[b] = malloc((out->count[b] ? out->count[b] : 1) * sizeof(a2a_msg));
                if (!out->msgs[b]) {
                    a2a_plan_release(out);
                    return dh_err("out of memory for an all-to-all plan");
                }
            }
    }
    plan_offsets(out);
    return 0;
}

int a2a_plan_combine(const a2a_shape *m, const a2a_plan *dispatch, a2a_plan *out)
{
    memset(out, 0, sizeof *out);
    int G = dispatch->ranks;
    if (plan_alloc(out, G) < 0)
        return -1;
    out->ranks = G;
    out->tokens = dispatch->tokens;
    out->phase = A2A_COMBINE;
    out->msg_bytes = a2a_combine_msg_bytes(m);
    /* Block (d -> s) of the combine returns block (s -> d) of the dispatch. */
    for (int s = 0; s < G; s++)
        for (int d = 0; d < G; d++) {
            size_t n = dispatch->count[s * G + d];
            out->count[d * G + s] = n;
            out->msgs[d * G + s] = malloc((n ? n : 1) * sizeof(a2a_msg));
            if (!out->msgs[d * G + s]) {
                a2a_plan_release(out);
                return dh_err("out of memory for an all-to-all plan");
            }
            memcpy(out->msgs[d * G + s], dispatch->msgs[s * G + d], n * sizeof(a2a_msg));
        }
    plan_offsets(out);
    return 0;
}

void a2a_plan_release(a2a_plan *p)
{
    if (p->msgs)
        for (int b = 0; b < p->ranks * p->ranks; b++)
            free(p->msgs[b]);
    free(p->msgs);
    free(p->count);
    free(p->send_off);
    free(p->recv_off);
    free(p->send_bytes);
    free(p->recv_bytes);
    memset(p, 0, sizeof *p);
}

double a2a_plan_mean_send_bytes(const a2a_plan *p)
{
    double sum = 0;
    for (int r = 0; r < p->ranks; r++)
        sum += (double)p->send_bytes[r];
    return sum / p->ranks;
}

/* ---------------------------------------------------------------- payload */

static void put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

void a2a_fill_msg(uint8_t *dst, size_t msg_bytes, a2a_phase phase, int src, int token, int dest,
                  int expert)
{
    uint32_t hdr[6] = {A2A_MAGIC ^ (uint32_t)phase, (uint32_t)src, (uint32_t)token,
                       (uint32_t)dest, (uint32_t)expert, (uint32_t)msg_bytes};
    for (int i = 0; i < 6; i++)
        put_u32(dst + 4 * i, hdr[i]);
    /* The body is one 64-bit hash per 8 bytes, keyed by all header fields, so
     * a message delivered to the wrong place or shifted by any whole number of
     * bytes differs from its expectation. */
    uint64_t key = mix64(((uint64_t)phase << 62) ^ ((uint64_t)(uint32_t)src << 48) ^
                         ((uint64_t)(uint32_t)dest << 32) ^ (uint32_t)token) ^
                   mix64((uint64_t)(uint32_t)expert + 0x51ed2701u);
    for (size_t off = A2A_MIN_MSG; off < msg_bytes; off += 8) {
        uint64_t w = mix64(key + off);
        size_t n = msg_bytes - off < 8 ? msg_bytes - off : 8;
        for (size_t b = 0; b < n; b++)
            dst[off + b] = (uint8_t)(w >> (8 * b));
    }
}

void a2a_fill_send(const a2a_plan *p, int rank, uint8_t *buf)
{
    int G = p->ranks;
    for (int d = 0; d < G; d++) {
        const a2a_msg *mm = p->msgs[rank * G + d];
        for (size_t i = 0; i < p->count[rank * G + d]; i++)
            a2a_fill_msg(buf + p->send_off[rank * G + d] + i * p->msg_bytes, p->msg_bytes,
                         p->phase, rank, mm[i].token, d, mm[i].expert);
    }
}

int a2a_check_recv(const a2a_plan *p, int rank, const uint8_t *recv)
{
    static const char *field[6] = {"magic^phase", "source rank", "token", "destination rank",
                                   "expert", "message bytes"};
    int G = p->ranks;
    uint8_t *want = malloc(p->msg_bytes);
    if (!want)
        return dh_err("out of memory checking rank %d", rank);
    for (int s = 0; s < G; s++) {
        const a2a_msg *mm = p->msgs[s * G + rank];
        const uint8_t *base = recv + p->recv_off[rank * G + s];
        for (size_t i = 0; i < p->count[s * G + rank]; i++) {
            a2a_fill_msg(want, p->msg_bytes, p->phase, s, mm[i].token, rank, mm[i].expert);
            const uint8_t *got = base + i * p->msg_bytes;
            if (memcmp(got, want, p->msg_bytes) == 0)
                continue;
            size_t b = 0;
            while (got[b] == want[b])
                b++;
            char what[96];
            if (b < A2A_MIN_MSG) {
                uint32_t g = 0;
                for (int q = 0; q < 4; q++)
                    g |= (uint32_t)got[(b & ~3u) + q] << (8 * q);
                snprintf(what, sizeof what, "header field '%s' reads %u", field[b / 4], g);
            } else {
                snprintf(what, sizeof what, "payload byte %zu reads 0x%02x, expected 0x%02x", b,
                         got[b], want[b]);
            }
            free(want);
            return dh_err("%s check failed on rank %d: message %zu from rank %d (token %d, "
                          "expert %d): %s",
                          a2a_phase_name(p->phase), rank, i, s, mm[i].token, mm[i].expert, what);
        }
    }
    free(want);
    return 0;
}

void a2a_exchange_host(const a2a_plan *p, uint8_t *const *send, uint8_t *const *recv)
{
    int G = p->ranks;
    for (int s = 0; s < G; s++)
        for (int d = 0; d < G; d++)
            memcpy(recv[d] + p->recv_off[d * G + s], send[s] + p->send_off[s * G + d],
                   p->count[s * G + d] * p->msg_bytes);
}
