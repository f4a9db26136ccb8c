/* attn33_wgmma.cu: attention versions 33 (kernels/lib/attn30.cuh: version 31 with the split's rows
 * prefetched into L2 ahead of the producer's demand loads), 34 (kernels/lib/attn23.cuh: version
 * 23 with the same prefetch), 35 (version 31 with its FP8 rows read whole by warps,
 * kernels/lib/attn30.cuh a35_producer), 36 (version 23 with its rows read whole by warps,
 * kernels/lib/attn23.cuh a36_producer; 23's shapes, version 31 elsewhere) and version 31's
 * producer alone (diag=producer), version 39's producer alone (diag=producer) and version 40
 * (kernels/lib/attn30.cuh a40_producer: 39 with its FP8 producer's loads rolled one tile ahead;
 * diag=producer too) and 42 (version 38 with the next tile's row ids held as their 32-bit
 * entries, kernels/lib/attn23.cuh; 38's shapes, FP8 rows at an even number of 64-head groups,
 * version 41 elsewhere), and the producers alone (diag=producer) of versions 41 (39 with those
 * ids, kernels/lib/attention.cuh a41_rid) and 43 (41 with 2, 4 or 8 splits merged in the kernel,
 * kernels/lib/attn30.cuh a43_merge), built for sm_90a; kernels/versions/attention.cu dispatches
 * them. Versions 37, 38, 39, 41 and 43 (31 and 23 with lean consumers; 39: 37 with FP8 rows' RoPE
 * part by cp.async) are the library's (kernels/lib/attention.cu); this file keeps their host-side
 * checks (a37_desc_check, a43_share_check, through attn33_check).
 * The prefetch's form and distance (kernels/lib/l2prefetch.cuh) come from A33_PF=FORM:DIST, FORM
 * lines or bulk and DIST the tiles ahead of the demand loads (1, 2 or 4), or none (versions 31 and
 * 23 themselves, through this file's instances); unset: bulk:2. Version 34
 * runs on FP8 rows with an even number of 64-head groups (23's shapes), version 33 elsewhere. */
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/bench.cuh"
#include "kernels/lib/attn30.cuh"
#include "kernels/lib/attn23.cuh"

struct a33_variant {
    const char *name;
    int pf, pd;
};
static const a33_variant a33_variants[] = {
    {"lines:1", A33_PF_LINES, 1}, {"lines:2", A33_PF_LINES, 2}, {"bulk:1", A33_PF_BULK, 1},
    {"bulk:2", A33_PF_BULK, 2},   {"bulk:4", A33_PF_BULK, 4},   {"none", A33_PF_NONE, 1},
};

/* The variant A33_PF names (index into a33_variants; unset: bulk:2), or -1 after an error line. */
static int a33_variant_parse()
{
    const char *e = getenv("A33_PF");
    const char *name = e ? e : "bulk:2";
    for (int i = 0; i < (int)(sizeof a33_variants / sizeof a33_variants[0]); i++)
        if (strcmp(name, a33_variants[i].name) == 0) return i;
    fprintf(stderr, "dhbench: A33_PF=%s: need lines:1, lines:2, bulk:1, bulk:2, bulk:4 or none\n", name);
    return -1;
}

/* Variants whose producer alone (diag=producer) is built: lines:2, bulk:1, none. */
static bool a33_producer_alone_built(int v) { return v == 1 || v == 2 || v == 5; }

/* Versions 35 and 36's latent stores (a35_rows, kernels/lib/attn18.cuh) against a6_swz, the plain
 * form of the stage's layout: each lane's two stores of each row of its warp at the offset a6_swz
 * gives the chunk, each quarter warp's eight stores of a row in eight distinct 16-byte positions
 * of 128 bytes (no bank conflict), and a whole tile's 64 rows x 64 latent chunks written exactly
 * once. Version 35: four warps of 16 rows; 36: eight warps of 8 (two blocks of four, rows
 * 32 r + 8 w). 0, or -1 after an error line. */
static int a35_layout_check(int version)
{
    const int rows = version == 35 ? 16 : 8;
    std::vector<int> hits(64 * 64, 0);
    for (int row0 = 0; row0 < 64; row0 += rows)
        for (int i = 0; i < rows; i++)
            for (int e = 0; e < 2; e++)
                for (int quarter = 0; quarter < 4; quarter++) {
                    unsigned pos = 0;
                    for (int lane = 8 * quarter; lane < 8 * quarter + 8; lane++) {
                        const a35_rows r(0, row0, lane);
                        const int c = 2 * lane + (e ^ (a35_swap(lane) ? 1 : 0));
                        const uint32_t got = r.at(i, e), want = a6_swz(row0 + i, c);
                        if (got != want) {
                            fprintf(stderr, "dhbench: attention v%d: lane %d stores row %d chunk %d at %u, the stage's layout has it at %u\n",
                                    version, lane, row0 + i, c, got, want);
                            return -1;
                        }
                        hits[(row0 + i) * 64 + c]++;
                        pos |= 1u << ((got >> 4) & 7);
                    }
                    if (pos != 0xffu) {
                        fprintf(stderr, "dhbench: attention v%d: row %d, store %d of lanes %d-%d: bank conflict (16-byte positions 0x%02x)\n",
                                version, row0 + i, e, 8 * quarter, 8 * quarter + 7, pos);
                        return -1;
                    }
                }
    for (int j = 0; j < 64 * 64; j++)
        if (hits[j] != 1) {
            fprintf(stderr, "dhbench: attention v%d: row %d chunk %d written %d times in a tile\n", version, j / 64, j % 64, hits[j]);
            return -1;
        }
    return 0;
}

/* Version 37's descriptors (kernels/lib/attn18.cuh a37_step): for every 1024-byte aligned operand
 * base of the block's shared memory and every step its tile loop takes (S's 36 along K, P V's 4
 * along the rows), the base's descriptor stepped by the offset / 16 in its low half is the
 * descriptor dh_wgmma_desc builds from the address: the 14-bit address field never carries.
 * The same for the window's top (bases up to 256 KB). 0, or -1 after an error line. */
static int a37_desc_check()
{
    for (uint32_t base = 0; base + A6_TILE_BYTES <= (256u << 10); base += 1024)
        for (int ks = 0; ks < 36 + 4; ks++) {
            const bool pv = ks >= 36;
            const uint32_t lbo = pv ? A6_BLOCK_BYTES : 16;
            const uint32_t off = pv ? (ks - 36) * 2048 : (ks >> 2) * A6_BLOCK_BYTES + (ks & 3) * 32;
            const uint64_t want = dh_wgmma_desc(base + off, lbo, 1024);
            const uint64_t got = a37_step(dh_wgmma_desc(base, lbo, 1024), off >> 4);
            if (got != want) {
                fprintf(stderr, "dhbench: attention v37: descriptor of base %u + %u (lbo %u) is 0x%016llx stepped, 0x%016llx built\n",
                        base, off, lbo, (unsigned long long)got, (unsigned long long)want);
                return -1;
            }
        }
    return 0;
}

/* Version 43's merge: for 2, 4 and 8 splits, the pieces of the consumers' 256 threads (a43_piece:
 * 8 / S per thread of warpgroup 0, 24 / S of warpgroup 1) cover each (head of the block's share, 8
 * outputs) once, and a warp's 32 pieces are of one head (its lanes pass the splits' log-sum-exps by
 * shuffle). */
template <int S>
static int a43_share_check_s()
{
    static_assert(a43_merges(S), "version 43 merges 2, 4 or 8 splits");
    const int pieces = 64 / S * 64;
    std::vector<int> seen(pieces, 0);
    for (int tid = 0; tid < 256; tid++)
        for (int u = 0; u < (tid < 128 ? 8 / S : 24 / S); u++) {
            const int p = a43_piece<S>(tid, u);
            if (p < 0 || p >= pieces || p >> 6 != a43_piece<S>(tid & ~31, u) >> 6) {
                fprintf(stderr, "dhbench: attention v43: %d splits: thread %d's piece %d is outside its share or its warp's head\n",
                        S, tid, u);
                return -1;
            }
            seen[p]++;
        }
    for (int p = 0; p < pieces; p++)
        if (seen[p] != 1) {
            fprintf(stderr, "dhbench: attention v43: %d splits: piece %d held %d times\n", S, p, seen[p]);
            return -1;
        }
    return 0;
}
static int a43_share_check() { return a43_share_check_s<2>() < 0 || a43_share_check_s<4>() < 0 || a43_share_check_s<8>() < 0 ? -1 : 0; }

int attn33_check(int version, int format, int diag)
{
    if (version == 43 && a43_share_check() < 0) return -1;
    if (version >= 37 && version <= 43) return a37_desc_check();   /* no prefetch variant; 39-43: diag=producer too */
    if (version == 35 || version == 36) {   /* no prefetch variant; 35's producer alone runs 31's on BF16 rows */
        if (a35_layout_check(version) < 0) return -1;
        if (version == 36 && diag == A6_DIAG_PRODUCER && format != KREF_ROW_FP8) {
            fprintf(stderr, "dhbench: attention v36 diag=producer: need format=fp8\n");
            return -1;
        }
        return 0;
    }
    const int v = a33_variant_parse();
    if (v < 0) return -1;
    if (diag == A6_DIAG_PRODUCER && (format != KREF_ROW_FP8 || !a33_producer_alone_built(v))) {
        fprintf(stderr, "dhbench: attention v33 diag=producer: need format=fp8 and A33_PF lines:2, bulk:1 or none\n");
        return -1;
    }
    return 0;
}

/* The variant of this process (checked before the device by attn33_check). */
static int a33_variant_index()
{
    static int v = -1;
    if (v >= 0) return v;
    v = a33_variant_parse();
    if (v < 0) exit(1);
    fprintf(stderr, "dhbench: attention v33/v34: prefetch %s\n", a33_variants[v].name);
    return v;
}

template <int PF, int PD>
static void a33_main(const attn_args &a, float *out, cudaStream_t st, bool paired)
{
    if (paired) a23_launch<A6_DIAG_NONE, 23, PF, PD>(a, out, st);
    else a30_launch<true, A6_DIAG_NONE, PF, PD>(a, out, st);
}

/* diag=producer (FP8 rows, 64 heads): the producer alone, its consumers handing each stage back
 * unread (outputs not checked), with the prefetch of lines:2, bulk:1 or none (version 31's
 * producer, the baseline); no combine. */
static void a33_producer_alone(const attn_args &a, float *out, cudaStream_t st, int v)
{
    if (v == 1) a30_launch<true, A6_DIAG_PRODUCER, A33_PF_LINES, 2>(a, out, st);
    else if (v == 2) a30_launch<true, A6_DIAG_PRODUCER, A33_PF_BULK, 1>(a, out, st);
    else a30_launch<true, A6_DIAG_PRODUCER, A33_PF_NONE, 1>(a, out, st);
}

/* Version PV of attn30_kernel (31's block) or VER of attn23_kernel (23's), the producer alone if asked. */
template <int PV>
static void a30_pv(const attn_args &a, float *out, cudaStream_t st, bool producer)
{
    if (producer) a30_launch<true, A6_DIAG_PRODUCER, A33_PF_NONE, 1, PV>(a, out, st);
    else a30_launch<true, A6_DIAG_NONE, A33_PF_NONE, 1, PV>(a, out, st);
}
template <int VER>
static void a23_ver(const attn_args &a, float *out, cudaStream_t st, bool producer)
{
    if (producer) a23_launch<A6_DIAG_PRODUCER, VER>(a, out, st);
    else a23_launch<A6_DIAG_NONE, VER>(a, out, st);
}

void attn33_bench_launch(attn_args a, attn_scratch &sc, float *out, int sms, cudaStream_t st, int version)
{
    const bool paired = (version == 34 || version == 36 || version == 42) && a.format == KREF_ROW_FP8 && (a.heads / AT_H) % 2 == 0;
    if (paired) sms = std::min(sms, dhk__attn23_resident_blocks(23));
    dhk__attention_splits(a, sc, sms);
    const bool producer = a.diag == A6_DIAG_PRODUCER;
    if (version == 31 || (version == 36 && !paired)) {   /* 31: its producer alone (diag=producer); 36 off 23's shapes: 31 */
        a30_pv<30>(a, out, st, producer);
    } else if (version == 35) {   /* version 31 with version 35's producer (FP8 rows; BF16 rows: 31's) */
        a30_pv<35>(a, out, st, producer);
    } else if (version == 39) {   /* its producer alone (the kernel itself: the library's, dhk__attn30_launch) */
        a30_pv<39>(a, out, st, true);
    } else if (version == 40) {   /* version 39 with its FP8 producer's loads rolled one tile ahead (BF16 rows: 39) */
        a30_pv<40>(a, out, st, producer);
    } else if (version == 42 && paired) {   /* version 38 with its row ids held as 32-bit entries */
        a23_ver<42>(a, out, st, producer);
    } else if (version == 41 || version == 42) {   /* 39 with the next tile's row ids held as 32-bit entries (both formats; 42 off
                                                      38's shapes; 41 itself here only as its producer alone: the library's) */
        a30_pv<41>(a, out, st, producer);
    } else if (version == 43) {   /* its producer alone (the kernel itself, 41 with 2, 4 or 8 splits merged in it: the library's) */
        a30_pv<43>(a, out, st, true);
    } else if (version == 36) {   /* version 23 with version 36's producer */
        a23_ver<36>(a, out, st, producer);
    } else if (producer) {
        a33_producer_alone(a, out, st, a33_variant_index());
    } else {
        switch (a33_variant_index()) {
        case 0: a33_main<A33_PF_LINES, 1>(a, out, st, paired); break;
        case 1: a33_main<A33_PF_LINES, 2>(a, out, st, paired); break;
        case 2: a33_main<A33_PF_BULK, 1>(a, out, st, paired); break;
        case 3: a33_main<A33_PF_BULK, 2>(a, out, st, paired); break;
        case 4: a33_main<A33_PF_BULK, 4>(a, out, st, paired); break;
        default: a33_main<A33_PF_NONE, 1>(a, out, st, paired); break;
        }
    }
    if (producer || a.splits <= 1) return;   /* the producer alone writes nothing to combine */
    if (paired) dhk_attention_combine(sc.part_o, sc.part_lse, a.nq, a.splits, a.heads, out, st);
    else dhk__attn30_combine(sc.part_o, sc.part_lse, a.nq, a.splits, a.heads, out, st, 31);
}
