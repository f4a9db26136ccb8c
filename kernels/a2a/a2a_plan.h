/* a2a_plan.h: host side of the expert-parallel all-to-all benchmark (bin/dha2a).
 *
 * Everything here runs without a GPU and is exercised in CI: reading the model
 * shapes (kernels/a2a/shapes.ini, parsed by a small INI reader of its own so
 * that the benchmark builds where libinih is absent), routing tokens to experts,
 * laying out the per-peer send and receive blocks of one all-to-all, filling
 * messages with a payload that names its source rank, token and destination,
 * computing from the routing alone what every rank must receive, and comparing.
 * dha2a.cu moves the bytes with NCCL; a2a_exchange_host() moves them with
 * memcpy, so the layout and the checker can be tested on any machine.
 *
 * Model of one MoE layer on G ranks, T tokens per rank, E experts, top-k:
 * expert e lives on rank e / (E / G) (contiguous blocks, E divisible by G).
 * Dispatch: rank s sends token t to every rank that owns one of its k experts,
 *   once per destination rank (A2A_DEDUP_RANK, as DeepEP's normal-mode kernels
 *   do) or once per (token, expert) (A2A_DEDUP_EXPERT, as DeepEP's low-latency
 *   kernels do).
 * Combine: the reverse: each rank returns every message it received to the rank
 *   it came from, in the order received, with the combine message size.
 * Block layout: on every rank the send buffer is one contiguous block per
 * destination rank in rank order, tokens ascending within a block (and experts
 * ascending within a token for A2A_DEDUP_EXPERT); the receive buffer is one
 * block per source rank in rank order, in the sender's order.
 *
 * Cost: building a plan is O(G * T * k) with O(G * G) counts; filling and
 * checking are O(bytes) with 8-byte pattern words. */
#ifndef DH_A2A_PLAN_H
#define DH_A2A_PLAN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define A2A_NAME_MAX 64
#define A2A_MAX_MODELS 16
#define A2A_MAX_RANKS 64
#define A2A_MAX_TOPK 64

/* One model's MoE shape and its message byte formats (see shapes.ini). */
typedef struct a2a_shape {
    char name[A2A_NAME_MAX];
    long hidden, experts, topk;
    long dispatch_header_bytes; /* per-message header: source token index and reserved words */
    long dispatch_elem_bytes;   /* bytes per hidden element (1 for FP8 E4M3) */
    long dispatch_scale_group;  /* hidden elements sharing one scale */
    long dispatch_scale_bytes;  /* bytes per scale (4 for fp32) */
    long dispatch_route_bytes;  /* routing metadata per top-k slot (expert index + gate weight) */
    long combine_elem_bytes;    /* bytes per hidden element (2 for BF16) */
} a2a_shape;

typedef struct a2a_shapes {
    char path[512];
    int n;
    a2a_shape model[A2A_MAX_MODELS];
} a2a_shapes;

/* Read every section of an INI file as one model; unknown, missing, duplicate
 * or out-of-range keys are errors naming the file and line. */
int a2a_shapes_load(const char *path, a2a_shapes *out);
const a2a_shape *a2a_shapes_find(const a2a_shapes *s, const char *name);

size_t a2a_dispatch_msg_bytes(const a2a_shape *m);
size_t a2a_combine_msg_bytes(const a2a_shape *m);

typedef enum { A2A_ROUTE_RANDOM = 0, A2A_ROUTE_BALANCED = 1 } a2a_routing;
typedef enum { A2A_DEDUP_RANK = 0, A2A_DEDUP_EXPERT = 1 } a2a_dedup;
typedef enum { A2A_DISPATCH = 0, A2A_COMBINE = 1 } a2a_phase;

const char *a2a_routing_name(a2a_routing r);
const char *a2a_dedup_name(a2a_dedup d);
const char *a2a_phase_name(a2a_phase p);

/* One message of a block: the token at its origin rank and the expert it went
 * to (-1 under A2A_DEDUP_RANK, where one message serves all the rank's experts). */
typedef struct a2a_msg {
    int32_t token;
    int32_t expert;
} a2a_msg;

/* The traffic of one all-to-all (dispatch or combine) for all ranks. */
typedef struct a2a_plan {
    int ranks, tokens;
    a2a_phase phase;
    size_t msg_bytes;
    /* count[s * ranks + d]: messages rank s sends to rank d. */
    size_t *count;
    /* send_off[s * ranks + d], recv_off[d * ranks + s]: byte offsets of blocks. */
    size_t *send_off, *recv_off;
    size_t *send_bytes, *recv_bytes; /* per rank totals */
    /* msgs[s * ranks + d]: the messages of block (s -> d) in layout order,
     * naming tokens of the *origin* rank (s for dispatch, d for combine). */
    a2a_msg **msgs;
} a2a_plan;

/* route[(r * tokens + t) * topk + j]: the j-th expert of token t of rank r,
 * distinct within a token and ascending. Random routing draws k distinct
 * experts uniformly from a counter-based hash of (seed, r, t); balanced
 * routing gives token g = r * tokens + t the experts (g + j * E / k) mod E, so
 * every expert and every rank pair carries the same load (E divisible by k). */
int a2a_route(const a2a_shape *m, int ranks, int tokens, a2a_routing routing, uint64_t seed,
              int32_t *route);

/* Build the dispatch plan from a routing, or the combine plan from a dispatch
 * plan (the same messages sent back). a2a_plan_release frees the arrays. */
int a2a_plan_dispatch(const a2a_shape *m, int ranks, int tokens, const int32_t *route,
                      a2a_dedup dedup, a2a_plan *out);
int a2a_plan_combine(const a2a_shape *m, const a2a_plan *dispatch, a2a_plan *out);
void a2a_plan_release(a2a_plan *p);

/* Payload: the first 24 bytes of a message are six little-endian uint32
 * {A2A_MAGIC ^ phase, source rank, token, destination rank, expert (or
 * 0xffffffff), message bytes}; the rest is a hash of those fields and the
 * byte position. Messages must be at least A2A_MIN_MSG bytes. */
#define A2A_MAGIC 0xA2A0D15Cu
#define A2A_MIN_MSG 24
void a2a_fill_msg(uint8_t *dst, size_t msg_bytes, a2a_phase phase, int src, int token, int dest,
                  int expert);
/* Fill rank r's whole send buffer (plan->send_bytes[r] bytes). */
void a2a_fill_send(const a2a_plan *p, int rank, uint8_t *buf);

/* Compare rank r's received buffer with what it must receive, computed from
 * the receiver's side (for each source in rank order, the messages that source
 * addressed to r, each regenerated from its fields); on a mismatch
 * return -1 with a message naming the rank, source block, message, field and
 * byte. */
int a2a_check_recv(const a2a_plan *p, int rank, const uint8_t *recv);

/* Emulate the exchange on the host: copy each (s -> d) block from send[s] to
 * recv[d]. Used where no GPU is present, to test layout and checker. */
void a2a_exchange_host(const a2a_plan *p, uint8_t *const *send, uint8_t *const *recv);

/* Mean over ranks of the bytes a rank sends (its own block included). */
double a2a_plan_mean_send_bytes(const a2a_plan *p);

#ifdef __cplusplus
}
#endif
#endif
