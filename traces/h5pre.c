/* h5pre.c: the metadata a trace reader hands to HDF5, checked first; see h5pre.h.
 *
 * Why. Fuzzing the trace reader (tests/fuzz/RESULTS.md) found HDF5 1.10.8
 * decoders that trust the file: a global heap object of size 0 loops forever
 * and one larger than its collection copies past it (H5HG); an attribute
 * message whose dataspace and datatype claim more data than the message holds
 * is copied past the object header chunk, or sized at 4 GiB (H5O_attr_decode);
 * a variable-length string whose heap ID names an object its collection does
 * not hold reads an unset slot (H5HG_read, whose index checks are asserts,
 * compiled out). None of these can occur in a file HDF5 wrote, so rejecting
 * them is sound: every test of this module runs the check on the traces,
 * timelines and sweep tables the tools write and on h5py-written files
 * (chunked, compressed, with attributes of every class; tests/cli_harden.sh).
 *
 * What is read, from the mapped file, with every offset bounds-checked:
 *  - the superblock (versions 0-3; files with 8-byte offsets and lengths and
 *    the superblock at byte 0, which is what HDF5 writes by default; anything
 *    else is left to HDF5 whole), and the size of a version 0-1 superblock's
 *    driver information block;
 *  - every object header reachable from the root group through symbol tables
 *    (version-1 B-trees, symbol nodes, local heap names) and compact link
 *    messages, and every version-2 object header ("OHDR") found anywhere in the
 *    file whose checksum holds (so headers in dense groups are covered too; a
 *    header whose checksum fails is rejected by HDF5 itself);
 *  - in each header: the chunk list (continuation messages inside the file, a
 *    chunk never listed twice), every message inside its chunk, and the
 *    messages HDF5 decodes with sizes from the file: attributes (name, datatype,
 *    dataspace and data inside the message; a variable-length value's heap ID
 *    naming an object of its collection no larger than the value), datatypes
 *    and dataspaces (every field inside the message, ranks and nesting
 *    bounded), fill values, compact layouts, filter pipelines, external file
 *    lists, comments, and the fixed-layout messages (link, group and attribute
 *    info, times, reference counts);
 *  - every global heap collection ("GCOL") in the file, walked as HDF5 walks it,
 *    and of HDF5's sizes (at least 4096 bytes, inside the file);
 *  - a dense store's fractal heap and B-tree headers (signature, version,
 *    checksum, inside the file) where a link or attribute info message names
 *    them;
 *  - every chunk of a version-1 chunk B-tree (no checksum): inside the file,
 *    at least a byte, four with a Fletcher-32 filter applied; a single-chunk
 *    index's filtered chunk likewise.
 *
 * Left to HDF5: fractal heaps and version-2 B-trees of dense attribute and
 * link storage (every block of them carries a checksum HDF5 verifies), the
 * newer chunk indexes (checksummed), and raw data. The members of a dense group are still
 * checked: once the headers the links reach are done, HDF5 lists each dense
 * group's links (through the group's header, checked by then) and the headers
 * they name are checked like any other, so a version-1 header (no checksum)
 * reached only through a dense group (an old-format file whose group tracks
 * creation order, or holds an external link) is covered too.
 * tests/fuzz/RESULTS.md has the trade-offs.
 *
 * Cost: O(metadata) plus one memmem pass over the file for "GCOL" and one for
 * "OHDR" (about a second per GB, the page cache's speed). */
#include "traces/h5pre.h"

#include "common/dh_err.h"
#include "common/h5init.h"
#include "common/mem.h"

#include <hdf5.h>

#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define UNDEF_ADDR UINT64_MAX
#define MAX_RANK 32         /* H5S_MAX_RANK */
#define MAX_DTYPE_DEPTH 32  /* nesting of compound/array/vlen/enum types */
#define MAX_CHUNKS 65536    /* object header chunks of one header */

typedef struct {
    const char *path;
    const unsigned char *m; /* the mapped file */
    uint64_t size;
    uint64_t base;          /* base address: every file address is relative to it */
    unsigned group_leaf_k, group_node_k;
    /* Visited structures, keyed by (address << 2 | kind): an open-addressing set. */
    uint64_t *seen;
    size_t nseen, capseen;
    /* Object headers still to check; local: found by the scan, not by a link. */
    struct todo { uint64_t off; int local; } *todo;
    size_t ntodo, captodo;
    /* Headers, reached by links, of groups whose links are stored densely (a
     * link info message naming a fractal heap); ndense_done of them resolved. */
    uint64_t *dense;
    size_t ndense, capdense, ndense_done;
    int local;              /* the header being checked was found by the scan */
    /* The dataset messages of the header being checked, compared at its end. */
    struct {
        int space, type, layout;       /* seen (and not shared) */
        uint64_t nelem, tsize;         /* elements, bytes per element */
        unsigned lclass, lver;         /* layout class (0 compact, 1 contiguous, 2 chunked), version */
        uint64_t lsize, laddr, celem;  /* stored data size, contiguous address, chunk element size */
        uint64_t lbtree;               /* a version-3 chunked layout's chunk B-tree */
        unsigned lndims;               /* its dimensions (the element's included) */
        unsigned fletcher;             /* 1 + the Fletcher-32 filter's place in the pipeline, or 0 */
        unsigned nfilters;             /* filters in the pipeline */
        uint16_t filter_id[32];        /* their identifiers, in the pipeline's order */
        uint64_t cbytes;               /* bytes of one whole chunk (UINT64_MAX: more than 2^64) */
    } ds;
} h5p;

enum { SEEN_OHDR = 1, SEEN_BTREE = 2, SEEN_SNOD = 3 };

static uint16_t le16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t le32(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t le64(const unsigned char *p) { return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32; }
static uint64_t le_n(const unsigned char *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = n; i-- > 0;) v = v << 8 | p[i];
    return v;
}
static uint64_t align8(uint64_t n) { return (n + 7) & ~(uint64_t)7; }

DH_PRINTF(2, 3) static int fail(const h5p *c, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return dh_err("trace '%s': damaged HDF5 %s", c->path, what);
}

/* Whether [off, off + len) lies inside the file. */
static int inside(const h5p *c, uint64_t off, uint64_t len) { return off <= c->size && len <= c->size - off; }

/* A file address (relative to the base) as a byte offset, or UINT64_MAX. */
static uint64_t abs_addr(const h5p *c, uint64_t rel)
{
    if (rel == UNDEF_ADDR || rel > UINT64_MAX - c->base) return UINT64_MAX;
    return rel + c->base;
}

/* Jenkins' lookup3 hashlittle, byte by byte, as HDF5 checksums its metadata
 * (H5_checksum_lookup3 with an initial value of 0). */
#define ROT(x, k) (((x) << (k)) | ((x) >> (32 - (k))))
static uint32_t lookup3(const unsigned char *k, size_t length)
{
    uint32_t a, b, c;
    a = b = c = 0xdeadbeefu + (uint32_t)length;
    while (length > 12) {
        a += k[0] + ((uint32_t)k[1] << 8) + ((uint32_t)k[2] << 16) + ((uint32_t)k[3] << 24);
        b += k[4] + ((uint32_t)k[5] << 8) + ((uint32_t)k[6] << 16) + ((uint32_t)k[7] << 24);
        c += k[8] + ((uint32_t)k[9] << 8) + ((uint32_t)k[10] << 16) + ((uint32_t)k[11] << 24);
        a -= c; a ^= ROT(c, 4); c += b;
        b -= a; b ^= ROT(a, 6); a += c;
        c -= b; c ^= ROT(b, 8); b += a;
        a -= c; a ^= ROT(c, 16); c += b;
        b -= a; b ^= ROT(a, 19); a += c;
        c -= b; c ^= ROT(b, 4); b += a;
        length -= 12;
        k += 12;
    }
    switch (length) {
    case 12: c += (uint32_t)k[11] << 24; /* fall through */
    case 11: c += (uint32_t)k[10] << 16; /* fall through */
    case 10: c += (uint32_t)k[9] << 8;   /* fall through */
    case 9: c += k[8];                   /* fall through */
    case 8: b += (uint32_t)k[7] << 24;   /* fall through */
    case 7: b += (uint32_t)k[6] << 16;   /* fall through */
    case 6: b += (uint32_t)k[5] << 8;    /* fall through */
    case 5: b += k[4];                   /* fall through */
    case 4: a += (uint32_t)k[3] << 24;   /* fall through */
    case 3: a += (uint32_t)k[2] << 16;   /* fall through */
    case 2: a += (uint32_t)k[1] << 8;    /* fall through */
    case 1: a += k[0]; break;
    case 0: return c;
    }
    c ^= b; c -= ROT(b, 14);
    a ^= c; a -= ROT(c, 11);
    b ^= a; b -= ROT(a, 25);
    c ^= b; c -= ROT(b, 16);
    a ^= c; a -= ROT(c, 4);
    b ^= a; b -= ROT(a, 14);
    c ^= b; c -= ROT(b, 24);
    return c;
}

/* Insert key; 1 if it was new, 0 if seen before. */
static int seen_add(h5p *c, uint64_t addr, unsigned kind)
{
    uint64_t key = addr << 2 | kind;
    if (2 * (c->nseen + 1) > c->capseen) {
        size_t ncap = c->capseen ? 2 * c->capseen : 1024;
        uint64_t *ns = dh_calloc(ncap, sizeof *ns);
        for (size_t i = 0; i < c->capseen; i++)
            if (c->seen[i]) {
                size_t j = (size_t)((c->seen[i] * 0x9e3779b97f4a7c15ull) >> 20) & (ncap - 1);
                while (ns[j]) j = (j + 1) & (ncap - 1);
                ns[j] = c->seen[i];
            }
        free(c->seen);
        c->seen = ns;
        c->capseen = ncap;
    }
    size_t j = (size_t)((key * 0x9e3779b97f4a7c15ull) >> 20) & (c->capseen - 1);
    while (c->seen[j]) {
        if (c->seen[j] == key) return 0;
        j = (j + 1) & (c->capseen - 1);
    }
    c->seen[j] = key;
    c->nseen++;
    return 1;
}

static void todo_push(h5p *c, uint64_t off, int local)
{
    if (!seen_add(c, off, SEEN_OHDR)) return;
    if (c->ntodo == c->captodo) {
        c->captodo = c->captodo ? 2 * c->captodo : 256;
        c->todo = dh_realloc(c->todo, c->captodo * sizeof *c->todo);
    }
    c->todo[c->ntodo++] = (struct todo){ off, local };
}

/* ---- global heap collections ---------------------------------------------- */

/* Walk the collection at byte off the way H5HG__cache_heap_deserialize does.
 * 0 if the walk ends inside the collection; with want != 0, also the size of
 * object want in *osize (UINT64_MAX when the collection has no such object;
 * a repeated index names its last object, as in HDF5). -1 with a message for
 * a damaged collection; 1 when off holds no collection HDF5 would read. */
static int gcol_walk(const h5p *c, uint64_t off, unsigned want, uint64_t *osize)
{
    if (osize) *osize = UINT64_MAX;
    if (!inside(c, off, 16) || memcmp(c->m + off, "GCOL", 4) != 0 || c->m[off + 4] != 1) return 1;
    uint64_t csize = le64(c->m + off + 8);
    if (csize < 16 || csize > c->size - off) return 1; /* HDF5 fails the read itself */
    const unsigned char *col = c->m + off, *q = col + 16, *end = col + csize;
    while (q < end && end - q >= 16) {
        unsigned idx = le16(q);
        uint64_t sz = le64(q + 8), room = (uint64_t)(end - q);
        uint64_t need = idx ? 16 + align8(sz) : sz;
        if (sz > room || need == 0 || need > room)
            return fail(c, "global heap at byte %llu (object %u of %llu bytes in a collection of %llu)",
                        (unsigned long long)off, idx, (unsigned long long)sz, (unsigned long long)csize);
        if (want && idx == want && osize) *osize = sz;
        q += need;
    }
    return 0;
}

/* Every collection in the file, found by its signature (a collection is
 * reached from variable-length data anywhere, so it is found by scanning). */
static int check_all_gcols(const h5p *c)
{
    const unsigned char *p = c->m, *end = c->m + c->size;
    while ((p = memmem(p, (size_t)(end - p), "GCOL", 4)) != NULL) {
        uint64_t off = (uint64_t)(p - c->m);
        /* A whole header (signature, version 1, three zero bytes): HDF5 makes
         * every collection at least 4096 bytes (H5HG_MINSIZE) and inside the
         * file; one claiming more makes it allocate that much to read it. */
        if (end - p >= 16 && p[4] == 1 && !p[5] && !p[6] && !p[7]) {
            uint64_t csize = le64(p + 8);
            if (csize < 4096 || csize > c->size - off)
                return fail(c, "global heap at byte %llu (a collection of %llu bytes%s)", (unsigned long long)off,
                            (unsigned long long)csize, csize < 4096 ? ", below HDF5's 4096" : " past the end of the file");
        }
        if (gcol_walk(c, off, 0, NULL) < 0) return -1;
        p += 4;
    }
    return 0;
}

/* ---- datatypes and dataspaces ------------------------------------------- */

typedef struct {
    uint64_t size;     /* bytes of one element on disk, as HDF5 computes it */
    int vlen;          /* the type itself is variable-length (a sequence or string) */
    uint64_t vbase;    /* for vlen: bytes of one base element */
} dtype_info;

/* Parse a datatype message of at most n bytes at p, as H5O_dtype_decode_helper
 * reads it; *used is what it took. where names the enclosing structure. */
static int parse_dtype(const h5p *c, const char *where, const unsigned char *p, uint64_t n, unsigned depth,
                       dtype_info *di, uint64_t *used)
{
    if (depth > MAX_DTYPE_DEPTH) return fail(c, "%s (datatype nested more than %d deep)", where, MAX_DTYPE_DEPTH);
    if (n < 8) return fail(c, "%s (datatype of %llu bytes)", where, (unsigned long long)n);
    unsigned ver = p[0] >> 4, cls = p[0] & 15;
    uint32_t bits = (uint32_t)p[1] | (uint32_t)p[2] << 8 | (uint32_t)p[3] << 16;
    if (ver < 1 || ver > 4) return fail(c, "%s (datatype version %u)", where, ver);
    memset(di, 0, sizeof *di);
    di->size = le32(p + 4);
    uint64_t q = 8, sub;
    dtype_info base;
#define NEED(k)                                                                                                  \
    do {                                                                                                         \
        if ((uint64_t)(k) > n - q)                                                                               \
            return fail(c, "%s (datatype of class %u runs past its %llu bytes)", where, cls, (unsigned long long)n); \
    } while (0)
    switch (cls) {
    case 0: NEED(4); q += 4; break;  /* fixed-point: offset, precision */
    case 1: NEED(12); q += 12; break; /* floating-point */
    case 2: NEED(2); q += 2; break;  /* time */
    case 3: case 7: break;           /* string, reference */
    case 4: NEED(4); q += 4; break;  /* bitfield */
    case 5: NEED(bits & 0xff); q += bits & 0xff; break; /* opaque: the tag */
    case 6: { /* compound */
        unsigned nmemb = bits & 0xffff;
        unsigned off_bytes = di->size < 256 ? 1 : di->size < 65536 ? 2 : di->size < (1u << 24) ? 3 : 4;
        for (unsigned i = 0; i < nmemb; i++) {
            const unsigned char *nul = memchr(p + q, 0, (size_t)(n - q));
            if (!nul) return fail(c, "%s (compound member %u has no terminated name)", where, i);
            uint64_t nlen = (uint64_t)(nul - (p + q)) + 1;
            q += ver < 3 ? align8(nlen) : nlen;
            if (q > n) return fail(c, "%s (datatype of class %u runs past its %llu bytes)", where, cls, (unsigned long long)n);
            uint64_t moff;
            if (ver < 3) {
                NEED(4); moff = le32(p + q); q += 4; /* byte offset */
                if (ver == 1) { NEED(28); q += 28; } /* dimensionality, permutation, dimensions */
            } else {
                NEED(off_bytes); moff = le_n(p + q, off_bytes); q += off_bytes;
            }
            if (parse_dtype(c, where, p + q, n - q, depth + 1, &base, &sub) < 0) return -1;
            q += sub;
            /* HDF5 refuses to create a member outside its compound; one is read
             * past the element buffer. */
            if (moff > di->size || base.size > di->size - moff)
                return fail(c, "%s (compound member %u of %llu bytes at byte %llu of a %llu-byte compound)", where, i,
                            (unsigned long long)base.size, (unsigned long long)moff, (unsigned long long)di->size);
        }
        break;
    }
    case 8: { /* enumeration: base type, names, values */
        unsigned nmemb = bits & 0xffff;
        if (parse_dtype(c, where, p + q, n - q, depth + 1, &base, &sub) < 0) return -1;
        q += sub;
        for (unsigned i = 0; i < nmemb; i++) {
            const unsigned char *nul = memchr(p + q, 0, (size_t)(n - q));
            if (!nul) return fail(c, "%s (enumeration member %u has no terminated name)", where, i);
            uint64_t nlen = (uint64_t)(nul - (p + q)) + 1;
            q += ver < 3 ? align8(nlen) : nlen;
            if (q > n) return fail(c, "%s (datatype of class %u runs past its %llu bytes)", where, cls, (unsigned long long)n);
        }
        if (base.size && nmemb > (n - q) / base.size) NEED(n - q + 1);
        q += (uint64_t)nmemb * base.size;
        break;
    }
    case 9: /* variable-length: the base type; on disk a length, a collection address and an index */
        if (parse_dtype(c, where, p + q, n - q, depth + 1, &base, &sub) < 0) return -1;
        q += sub;
        /* On disk a variable-length value is a length, a collection address and
         * an index. HDF5 sizes an attribute's data with the stored size when it
         * decodes the message and with this one when it reads the value, so a
         * stored size other than this one is copied past its buffer. */
        if (di->size != 4 + 8 + 4)
            return fail(c, "%s (variable-length datatype of %llu bytes, expected 16)", where, (unsigned long long)di->size);
        di->vlen = 1;
        di->vbase = base.size;
        break;
    case 10: { /* array */
        if (ver < 2) return fail(c, "%s (array datatype of version %u)", where, ver);
        NEED(ver == 2 ? 4 : 1); /* rank, and 3 reserved bytes in version 2 */
        unsigned ndims = p[q];
        if (ndims == 0 || ndims > MAX_RANK) return fail(c, "%s (array datatype of rank %u)", where, ndims);
        q += ver == 2 ? 4 : 1;
        NEED(4ull * ndims * (ver == 2 ? 2 : 1));
        uint64_t nel = 1;
        for (unsigned i = 0; i < ndims; i++) {
            uint64_t d = le32(p + q + 4ull * i);
            nel = d && nel > UINT64_MAX / d ? UINT64_MAX : nel * d;
        }
        q += 4ull * ndims * (ver == 2 ? 2 : 1);
        if (parse_dtype(c, where, p + q, n - q, depth + 1, &base, &sub) < 0) return -1;
        q += sub;
        /* HDF5 sizes an array as its elements times its base type. */
        if (nel == UINT64_MAX || (base.size && nel > UINT64_MAX / base.size) || nel * base.size != di->size)
            return fail(c, "%s (array datatype of %llu bytes holds %llu elements of %llu)", where,
                        (unsigned long long)di->size, (unsigned long long)nel, (unsigned long long)base.size);
        break;
    }
    default: return fail(c, "%s (datatype class %u)", where, cls);
    }
#undef NEED
    *used = q;
    return 0;
}

/* Parse a dataspace message of at most n bytes, as H5O_sdspace_decode reads it;
 * *nelem is its number of elements (0 for a null dataspace). */
static int parse_dspace(const h5p *c, const char *where, const unsigned char *p, uint64_t n, uint64_t *nelem)
{
    if (n < 4) return fail(c, "%s (dataspace of %llu bytes)", where, (unsigned long long)n);
    unsigned ver = p[0], rank = p[1], flags = p[2];
    if (ver < 1 || ver > 2) return fail(c, "%s (dataspace version %u)", where, ver);
    if (rank > MAX_RANK) return fail(c, "%s (dataspace of rank %u)", where, rank);
    uint64_t q = ver == 1 ? 8 : 4;
    uint64_t arrays = 1 + ((flags & 1) != 0) + (ver == 1 && (flags & 2) != 0);
    if (q > n || 8ull * rank * arrays > n - q)
        return fail(c, "%s (dataspace of rank %u runs past its %llu bytes)", where, rank, (unsigned long long)n);
    uint64_t e = 1;
    for (unsigned i = 0; i < rank; i++) {
        uint64_t d = le64(p + q + 8ull * i);
        if (d && e > UINT64_MAX / d) return fail(c, "%s (dataspace of more than 2^64 elements)", where);
        e *= d;
    }
    if (ver == 2 && p[3] == 2) e = 0; /* null dataspace */
    *nelem = e;
    return 0;
}

/* ---- messages ---------------------------------------------------------- */

static void name_copy(char *dst, size_t cap, const unsigned char *src, size_t n)
{
    size_t i = 0;
    for (; i < n && i + 1 < cap && src[i]; i++) dst[i] = src[i] >= 32 && src[i] < 127 && src[i] != '\'' ? (char)src[i] : '?';
    dst[i] = 0;
}

/* A variable-length value's heap ID: the collection must hold the object,
 * of exactly the value's length times its base type's size, as HDF5 writes
 * it (H5T__vlen_disk_write). HDF5 copies the object into a buffer of the
 * value's size, so a larger object overflows it, and it allocates and fills
 * that buffer whatever the object holds, so a length of 2^32 with an object
 * of a few bytes costs gigabytes. */
static int check_heap_id(const h5p *c, const char *where, const unsigned char *e, uint64_t vbase)
{
    uint64_t len = le32(e), rel = le64(e + 4);
    unsigned idx = (unsigned)le32(e + 12);
    if (rel == 0) return 0; /* no data: HDF5 reads nothing */
    uint64_t off = abs_addr(c, rel), osize;
    int r = off == UINT64_MAX ? 1 : gcol_walk(c, off, idx, &osize);
    if (r < 0) return -1;
    if (r > 0) return fail(c, "%s (variable-length value points at byte %llu, which holds no global heap collection)",
                           where, (unsigned long long)rel);
    if (idx == 0 || idx > 0xffff || osize == UINT64_MAX)
        return fail(c, "%s (variable-length value names object %u of the global heap at byte %llu, which has no such object)",
                    where, idx, (unsigned long long)off);
    uint64_t want = vbase && len > UINT64_MAX / vbase ? UINT64_MAX : len * vbase;
    if (osize != want)
        return fail(c, "%s (variable-length value of %llu bytes is stored as a heap object of %llu)", where,
                    (unsigned long long)want, (unsigned long long)osize);
    return 0;
}

static int check_attr(const h5p *c, uint64_t hdr, const unsigned char *p, uint64_t n)
{
    char where[128];
    snprintf(where, sizeof where, "object header at byte %llu", (unsigned long long)hdr);
    if (n < 8) return fail(c, "%s (attribute message of %llu bytes)", where, (unsigned long long)n);
    unsigned ver = p[0], flags = ver >= 2 ? p[1] : 0;
    if (ver < 1 || ver > 3) return fail(c, "%s (attribute message version %u)", where, ver);
    uint64_t name_len = le16(p + 2), dt_size = le16(p + 4), ds_size = le16(p + 6);
    uint64_t q = ver == 3 ? 9 : 8;
    if (q > n || name_len == 0 || name_len > n - q)
        return fail(c, "%s (attribute name of %llu bytes in a message of %llu)", where, (unsigned long long)name_len,
                    (unsigned long long)n);
    if (!memchr(p + q, 0, (size_t)name_len)) return fail(c, "%s (attribute name not terminated)", where);
    char name[48];
    name_copy(name, sizeof name, p + q, (size_t)name_len);
    snprintf(where, sizeof where, "object header at byte %llu, attribute '%s'", (unsigned long long)hdr, name);
    q += ver == 1 ? align8(name_len) : name_len;
    if (q > n || dt_size > n - q)
        return fail(c, "%s (datatype of %llu bytes runs past the message of %llu)", where, (unsigned long long)dt_size,
                    (unsigned long long)n);
    dtype_info di = { 0 };
    int known = !(flags & 1); /* a shared datatype lives in another object header */
    uint64_t used;
    if (known && parse_dtype(c, where, p + q, dt_size, 0, &di, &used) < 0) return -1;
    q += ver == 1 ? align8(dt_size) : dt_size;
    if (q > n || ds_size > n - q)
        return fail(c, "%s (dataspace of %llu bytes runs past the message of %llu)", where, (unsigned long long)ds_size,
                    (unsigned long long)n);
    uint64_t nelem = 0;
    if (flags & 2) known = 0; /* a shared dataspace */
    else if (parse_dspace(c, where, p + q, ds_size, &nelem) < 0) return -1;
    q += ver == 1 ? align8(ds_size) : ds_size;
    if (!known) return 0;
    if (q > n) q = n;
    if (di.size && nelem > (n - q) / di.size)
        return fail(c, "%s (%llu elements of %llu bytes in a message with %llu bytes left)", where,
                    (unsigned long long)nelem, (unsigned long long)di.size, (unsigned long long)(n - q));
    if (di.vlen && !c->local)
        for (uint64_t i = 0; i < nelem; i++)
            if (check_heap_id(c, where, p + q + 16 * i, di.vbase) < 0) return -1;
    return 0;
}

static int check_fill(const h5p *c, const char *where, unsigned type, const unsigned char *p, uint64_t n)
{
    uint64_t q;
    if (type == 4) q = 0; /* the old fill value message: size, value */
    else {
        if (n < 1) return fail(c, "%s (empty fill value message)", where);
        unsigned ver = p[0];
        if (ver < 1 || ver > 3) return fail(c, "%s (fill value message version %u)", where, ver);
        if (ver < 3) {
            if (n < 4) return fail(c, "%s (fill value message of %llu bytes)", where, (unsigned long long)n);
            if (!p[3]) return 0; /* no value defined */
            q = 4;
        } else {
            if (n < 2) return fail(c, "%s (fill value message of %llu bytes)", where, (unsigned long long)n);
            if (!(p[1] & 0x20)) return 0;
            q = 2;
        }
    }
    if (n - q < 4) return fail(c, "%s (fill value message of %llu bytes)", where, (unsigned long long)n);
    int64_t sz = (int32_t)le32(p + q);
    if (type == 4) sz = le32(p + q);
    if (sz > 0 && (uint64_t)sz > n - q - 4)
        return fail(c, "%s (fill value of %lld bytes in a message of %llu)", where, (long long)sz, (unsigned long long)n);
    return 0;
}

static int check_layout(h5p *c, const char *where, const unsigned char *p, uint64_t n)
{
    if (n < 2) return fail(c, "%s (layout message of %llu bytes)", where, (unsigned long long)n);
    unsigned ver = p[0];
    if (ver < 1 || ver > 4) return fail(c, "%s (layout message version %u)", where, ver);
    if (ver < 3) {
        if (n < 8) return fail(c, "%s (layout message of %llu bytes)", where, (unsigned long long)n);
        unsigned ndims = p[1], cls = p[2];
        if (ndims > MAX_RANK + 1) return fail(c, "%s (layout of %u dimensions)", where, ndims);
        uint64_t q = 8 + (cls != 0 ? 8 : 0) + 4ull * ndims + (cls == 2 ? 4 : 0);
        if (q > n) return fail(c, "%s (layout of %u dimensions runs past its %llu bytes)", where, ndims, (unsigned long long)n);
        if (cls == 0) {
            if (n - q < 4 || le32(p + q) > n - q - 4)
                return fail(c, "%s (compact data runs past its layout message of %llu bytes)", where, (unsigned long long)n);
            c->ds.layout = 1;
            c->ds.lclass = 0;
            c->ds.lver = ver;
            c->ds.lsize = le32(p + q);
        }
        return 0;
    }
    unsigned cls = p[1];
    c->ds.lver = ver;
    if (cls == 0) {
        if (n < 4 || le16(p + 2) > n - 4)
            return fail(c, "%s (compact data runs past its layout message of %llu bytes)", where, (unsigned long long)n);
        c->ds.layout = 1;
        c->ds.lclass = 0;
        c->ds.lsize = le16(p + 2);
    } else if (cls == 1) {
        if (n < 18) return fail(c, "%s (layout message of %llu bytes)", where, (unsigned long long)n);
        c->ds.layout = 1;
        c->ds.lclass = 1;
        c->ds.laddr = le64(p + 2);
        c->ds.lsize = le64(p + 10);
    } else if (cls == 2) {
        uint64_t q = 2;
        if (ver == 4) q++; /* flags */
        if (q >= n) return fail(c, "%s (layout message of %llu bytes)", where, (unsigned long long)n);
        unsigned ndims = p[q++];
        if (ndims == 0 || ndims > MAX_RANK + 1) return fail(c, "%s (chunked layout of %u dimensions)", where, ndims);
        unsigned w = 4;
        if (ver == 4) {
            if (q >= n) return fail(c, "%s (layout message of %llu bytes)", where, (unsigned long long)n);
            w = p[q++];
            if (w < 1 || w > 8) return fail(c, "%s (chunk dimensions of %u bytes)", where, w);
        } else {
            if (n - q < 8) return fail(c, "%s (layout message of %llu bytes)", where, (unsigned long long)n);
            c->ds.lbtree = le64(p + q);
            c->ds.lndims = ndims;
            q += 8;
        }
        if (q > n || (uint64_t)w * ndims > n - q)
            return fail(c, "%s (chunked layout of %u dimensions runs past its %llu bytes)", where, ndims, (unsigned long long)n);
        /* The last chunk dimension is the size of one element. */
        c->ds.layout = 1;
        c->ds.lclass = 2;
        c->ds.celem = le_n(p + q + (uint64_t)w * (ndims - 1), w);
        c->ds.cbytes = 1;
        for (unsigned d = 0; d < ndims; d++) {
            uint64_t x = le_n(p + q + (uint64_t)w * d, w);
            c->ds.cbytes = x && c->ds.cbytes > UINT64_MAX / x ? UINT64_MAX : c->ds.cbytes * x;
        }
        q += (uint64_t)w * ndims;
        /* A single-chunk index of a filtered dataset: the chunk's stored size
         * (which HDF5 allocates to read it) and filter mask, then its address. */
        if (ver == 4 && q < n && p[q] == 1 && (p[2] & 0x02) && !c->local) {
            if (n - q < 1 + 8 + 4 + 8) return fail(c, "%s (single-chunk index runs past its layout message)", where);
            uint64_t size = le64(p + q + 1), addr = le64(p + q + 13), off = abs_addr(c, addr);
            if (addr != UNDEF_ADDR && (size == 0 || off == UINT64_MAX || !inside(c, off, size)))
                return fail(c, "%s (a chunk of %llu bytes at byte %llu, past the end of the file)", where, (unsigned long long)size,
                            (unsigned long long)addr);
        }
    }
    return 0;
}

/* The stored size of a chunk whose filter mask is mask, when it is fixed: the
 * whole chunk when only the shuffle (same size) and Fletcher-32 (four bytes
 * more) filters were applied to it, or none; 0 when a filter of variable
 * output (deflate, szip, n-bit, scale-offset, a plugin) was. HDF5 copies a
 * whole chunk's bytes out of the buffer the read pipeline returns, which for
 * such a chunk is the stored size. */
static uint64_t chunk_stored_size(const h5p *c, uint32_t mask)
{
    uint64_t extra = 0;
    for (unsigned i = 0; i < c->ds.nfilters; i++) {
        if (mask >> i & 1) continue; /* skipped for this chunk */
        if (c->ds.filter_id[i] == 3) extra += 4;
        else if (c->ds.filter_id[i] != 2) return 0;
    }
    return c->ds.cbytes > UINT64_MAX - extra ? 0 : c->ds.cbytes + extra;
}

/* A version-1 chunk B-tree (node type 1, no checksum), walked as HDF5 reads
 * it: HDF5 1.10.8 allocates each chunk's stored size from its key and reads
 * that many bytes from the chunk's address, and its Fletcher-32 filter takes
 * the last four bytes of the chunk as the checksum whatever the chunk's size.
 * Every chunk must lie inside the file, hold a byte, and with that filter four. */
static int check_chunk_btree(h5p *c, uint64_t hdr, uint64_t rel, int level)
{
    uint64_t off = abs_addr(c, rel);
    if (rel == UNDEF_ADDR) return 0; /* no chunk written */
    if (off == UINT64_MAX || !inside(c, off, 24) || memcmp(c->m + off, "TREE", 4) != 0 || c->m[off + 4] != 1)
        return fail(c, "object header at byte %llu (chunk B-tree at byte %llu is not one)", (unsigned long long)hdr,
                    (unsigned long long)rel);
    if (!seen_add(c, off, SEEN_BTREE)) return 0;
    int lvl = c->m[off + 5];
    if (level >= 0 && lvl != level)
        return fail(c, "chunk B-tree node at byte %llu (level %d under a node of level %d)", (unsigned long long)off, lvl, level + 1);
    unsigned used = le16(c->m + off + 6);
    /* Keys (chunk size, filter mask, an offset per dimension) and children
     * alternate: key0, child0, key1, ..., keyN. */
    uint64_t ksize = 8 + 8ull * c->ds.lndims, stride = ksize + 8;
    if (!inside(c, off + 24, stride * used + ksize))
        return fail(c, "chunk B-tree node at byte %llu (runs past the file)", (unsigned long long)off);
    for (unsigned i = 0; i < used; i++) {
        const unsigned char *key = c->m + off + 24 + stride * i;
        uint64_t child = le64(key + ksize);
        if (lvl > 0) {
            if (check_chunk_btree(c, hdr, child, lvl - 1) < 0) return -1;
            continue;
        }
        /* The filter mask's bit i set: filter i was skipped for this chunk. */
        uint64_t size = le32(key), coff = abs_addr(c, child);
        uint32_t mask = le32(key + 4);
        unsigned f = c->ds.fletcher, least = f && !(mask >> (f - 1) & 1) ? 4 : 1;
        uint64_t whole = chunk_stored_size(c, mask);
        if (whole != 0 && size != whole)
            return fail(c, "chunk B-tree node at byte %llu (a chunk of %llu bytes, its filters make %llu)",
                        (unsigned long long)off, (unsigned long long)size, (unsigned long long)whole);
        if (size < least || coff == UINT64_MAX || !inside(c, coff, size))
            return fail(c, "chunk B-tree node at byte %llu (a chunk of %llu bytes at byte %llu%s)", (unsigned long long)off,
                        (unsigned long long)size, (unsigned long long)child,
                        size < least ? ", too small for its filters" : ", past the end of the file");
    }
    return 0;
}

/* A dataset's messages against each other. HDF5 writes a compact or
 * contiguous dataset's stored size as its elements times the element size,
 * and a chunk's last dimension as the element size; HDF5 1.10.8 reads with
 * the dataspace and datatype but copies from the stored data, so a compact
 * dataset that holds fewer bytes is read from a null buffer, and a datatype
 * of a damaged size makes it allocate that size times the elements. */
static int check_dataset(h5p *c, uint64_t hdr)
{
    if (!c->ds.space || !c->ds.type || !c->ds.layout) return 0;
    uint64_t want = c->ds.tsize && c->ds.nelem > UINT64_MAX / c->ds.tsize ? UINT64_MAX : c->ds.nelem * c->ds.tsize;
    const char *kind = c->ds.lclass == 0 ? "compact" : "contiguous";
    if (c->ds.lclass == 2) {
        if (c->ds.celem != c->ds.tsize)
            return fail(c, "object header at byte %llu (dataset of %llu-byte elements in chunks of %llu-byte elements)",
                        (unsigned long long)hdr, (unsigned long long)c->ds.tsize, (unsigned long long)c->ds.celem);
        if (c->ds.lver == 3 && !c->local) return check_chunk_btree(c, hdr, c->ds.lbtree, -1);
        return 0;
    }
    if (c->ds.lclass == 1 && c->ds.lver < 3) return 0; /* no stored size */
    if (c->ds.lsize != want)
        return fail(c, "object header at byte %llu (dataset of %llu elements of %llu bytes in %s storage of %llu bytes)",
                    (unsigned long long)hdr, (unsigned long long)c->ds.nelem, (unsigned long long)c->ds.tsize, kind,
                    (unsigned long long)c->ds.lsize);
    if (c->ds.lclass == 1 && c->ds.laddr != UNDEF_ADDR && !c->local) {
        uint64_t off = abs_addr(c, c->ds.laddr);
        if (off == UINT64_MAX || !inside(c, off, c->ds.lsize))
            return fail(c, "object header at byte %llu (contiguous data of %llu bytes at byte %llu, past the end of the file)",
                        (unsigned long long)hdr, (unsigned long long)c->ds.lsize, (unsigned long long)c->ds.laddr);
    }
    return 0;
}

static int check_filters(h5p *c, const char *where, const unsigned char *p, uint64_t n)
{
    if (n < 2) return fail(c, "%s (filter pipeline message of %llu bytes)", where, (unsigned long long)n);
    unsigned ver = p[0], nf = p[1];
    if (ver < 1 || ver > 2) return fail(c, "%s (filter pipeline version %u)", where, ver);
    if (nf > 32) return fail(c, "%s (%u filters)", where, nf);
    uint64_t q = ver == 1 ? 8 : 2;
    for (unsigned i = 0; i < nf; i++) {
        if (q > n || n - q < 2) goto past;
        unsigned id = le16(p + q);
        if (id == 3) c->ds.fletcher = i + 1;
        c->ds.nfilters = i + 1;
        c->ds.filter_id[i] = (uint16_t)id;
        int has_name = ver == 1 || id >= 256;
        uint64_t hdr = has_name ? 8 : 6;
        if (n - q < hdr) goto past;
        uint64_t name_len = has_name ? le16(p + q + 2) : 0;
        uint64_t nval = le16(p + q + hdr - 2);
        q += hdr;
        if (name_len) {
            if (name_len > n - q || !memchr(p + q, 0, (size_t)name_len)) goto past;
            q += ver == 1 ? align8(name_len) : name_len;
        }
        uint64_t vbytes = 4 * nval + (ver == 1 && (nval & 1) ? 4 : 0);
        if (q > n || vbytes > n - q) goto past;
        q += vbytes;
    }
    return 0;
past:
    return fail(c, "%s (filter pipeline runs past its %llu bytes)", where, (unsigned long long)n);
}

/* ---- groups ------------------------------------------------------------ */

/* A local heap: its data segment, for the names of a symbol table. */
static int local_heap(const h5p *c, const char *where, uint64_t rel, uint64_t *data, uint64_t *dsize)
{
    uint64_t off = abs_addr(c, rel);
    if (off == UINT64_MAX || !inside(c, off, 32) || memcmp(c->m + off, "HEAP", 4) != 0)
        return fail(c, "%s (symbol table names a local heap at byte %llu that is not one)", where, (unsigned long long)rel);
    *dsize = le64(c->m + off + 8);
    *data = abs_addr(c, le64(c->m + off + 24));
    if (*data == UINT64_MAX || !inside(c, *data, *dsize))
        return fail(c, "local heap at byte %llu (data of %llu bytes outside the file)", (unsigned long long)off,
                    (unsigned long long)*dsize);
    return 0;
}

static int check_snod(h5p *c, uint64_t rel, uint64_t hdata, uint64_t hsize)
{
    uint64_t off = abs_addr(c, rel);
    if (off == UINT64_MAX || !inside(c, off, 8) || memcmp(c->m + off, "SNOD", 4) != 0)
        return fail(c, "symbol table B-tree (child at byte %llu is not a symbol node)", (unsigned long long)rel);
    if (!seen_add(c, off, SEEN_SNOD)) return 0;
    unsigned nsym = le16(c->m + off + 6);
    if (nsym > 2 * c->group_leaf_k)
        return fail(c, "symbol node at byte %llu (%u entries, at most %u)", (unsigned long long)off, nsym, 2 * c->group_leaf_k);
    if (!inside(c, off + 8, 40ull * nsym)) return fail(c, "symbol node at byte %llu (runs past the file)", (unsigned long long)off);
    for (unsigned i = 0; i < nsym; i++) {
        const unsigned char *e = c->m + off + 8 + 40ull * i;
        uint64_t name = le64(e), oh = abs_addr(c, le64(e + 8));
        if (name >= hsize || !memchr(c->m + hdata + name, 0, (size_t)(hsize - name)))
            return fail(c, "symbol node at byte %llu (entry %u names no string of its local heap)", (unsigned long long)off, i);
        if (oh == UINT64_MAX || !inside(c, oh, 16))
            return fail(c, "symbol node at byte %llu (entry %u points outside the file)", (unsigned long long)off, i);
        if (!c->local) todo_push(c, oh, 0);
    }
    return 0;
}

static int check_group_btree(h5p *c, uint64_t rel, int level, uint64_t hdata, uint64_t hsize)
{
    uint64_t off = abs_addr(c, rel);
    if (off == UINT64_MAX || !inside(c, off, 24) || memcmp(c->m + off, "TREE", 4) != 0 || c->m[off + 4] != 0)
        return fail(c, "symbol table (B-tree at byte %llu is not a group B-tree)", (unsigned long long)rel);
    if (!seen_add(c, off, SEEN_BTREE)) return 0;
    int lvl = c->m[off + 5];
    if (level >= 0 && lvl != level)
        return fail(c, "group B-tree node at byte %llu (level %d under a node of level %d)", (unsigned long long)off, lvl, level + 1);
    unsigned used = le16(c->m + off + 6);
    if (used > 2 * c->group_node_k)
        return fail(c, "group B-tree node at byte %llu (%u children, at most %u)", (unsigned long long)off, used, 2 * c->group_node_k);
    /* Keys (heap offsets) and children alternate: key0, child0, key1, ..., keyN. */
    if (!inside(c, off + 24, 16ull * used + 8)) return fail(c, "group B-tree node at byte %llu (runs past the file)", (unsigned long long)off);
    for (unsigned i = 0; i < used; i++) {
        uint64_t child = le64(c->m + off + 24 + 16ull * i + 8);
        int r = lvl > 0 ? check_group_btree(c, child, lvl - 1, hdata, hsize) : check_snod(c, child, hdata, hsize);
        if (r < 0) return -1;
    }
    return 0;
}

static int check_link(h5p *c, const char *where, const unsigned char *p, uint64_t n)
{
    if (n < 2 || p[0] != 1) return fail(c, "%s (link message version %u)", where, n ? p[0] : 0);
    unsigned flags = p[1], type = 0;
    uint64_t q = 2;
    if (flags & 0x08) { if (q >= n) goto past; type = p[q++]; }
    if (flags & 0x04) q += 8;
    if (flags & 0x10) q++;
    unsigned w = 1u << (flags & 3);
    if (q > n || w > n - q) goto past;
    uint64_t nlen = le_n(p + q, w);
    q += w;
    if (nlen > n - q) goto past;
    q += nlen;
    if (type == 0) {
        if (n - q < 8) goto past;
        uint64_t oh = abs_addr(c, le64(p + q));
        if (oh == UINT64_MAX || !inside(c, oh, 16)) return fail(c, "%s (hard link to an address outside the file)", where);
        if (!c->local) todo_push(c, oh, 0);
    } else {
        if (n - q < 2 || le16(p + q) > n - q - 2) goto past;
    }
    return 0;
past:
    return fail(c, "%s (link message runs past its %llu bytes)", where, (unsigned long long)n);
}

/* ---- dense groups ---------------------------------------------------------- */

/* HDF5 reads a dense store's fractal heap header and version-2 B-tree headers
 * at the addresses the link or attribute info message gives, and in 1.10.8
 * copies from past the file's end when one is not there. Each must be inside
 * the file with its signature, version 0 and its checksum: HDF5 writes no other
 * (8-byte addresses and lengths, as everything this module reads). */
static int check_dense_store(const h5p *c, const char *where, uint64_t heap, uint64_t name_bt, uint64_t order_bt)
{
    if (heap == UNDEF_ADDR) return 0; /* links or attributes stored compactly */
    uint64_t h = abs_addr(c, heap);
    const unsigned char *m = c->m;
    /* The heap header: 142 bytes, an I/O filter pipeline of the length at byte 7
     * with 12 bytes of its own when there is one, then the checksum. */
    uint64_t hlen = 0;
    if (h != UINT64_MAX && inside(c, h, 146) && memcmp(m + h, "FRHP", 4) == 0 && m[h + 4] == 0) {
        uint64_t flen = le16(m + h + 7);
        hlen = 142 + (flen ? 12 + flen : 0);
        if (!inside(c, h, hlen + 4) || lookup3(m + h, (size_t)hlen) != le32(m + h + hlen)) hlen = 0;
    }
    if (hlen == 0) return fail(c, "%s (dense storage's fractal heap at byte %llu is not one)", where, (unsigned long long)heap);
    uint64_t bt[2] = { name_bt, order_bt };
    for (int i = 0; i < 2; i++) {
        if (i == 1 && bt[i] == UNDEF_ADDR) break;
        uint64_t b = abs_addr(c, bt[i]);
        if (b == UINT64_MAX || !inside(c, b, 38) || memcmp(m + b, "BTHD", 4) != 0 || m[b + 4] != 0 ||
            lookup3(m + b, 34) != le32(m + b + 34))
            return fail(c, "%s (dense storage's %s index at byte %llu is not a B-tree header)", where,
                        i ? "creation-order" : "name", (unsigned long long)bt[i]);
    }
    return 0;
}

static void dense_add(h5p *c, uint64_t hdr)
{
    if (c->ndense == c->capdense) {
        c->capdense = c->capdense ? 2 * c->capdense : 16;
        c->dense = dh_realloc(c->dense, c->capdense * sizeof *c->dense);
    }
    c->dense[c->ndense++] = hdr;
}

typedef struct { h5p *c; uint64_t group; int rc; } dense_walk;

#if H5_VERSION_GE(1, 12, 0)
static herr_t dense_link(hid_t gid, const char *name, const H5L_info2_t *info, void *arg)
#else
static herr_t dense_link(hid_t gid, const char *name, const H5L_info_t *info, void *arg)
#endif
{
    (void)name;
    dense_walk *w = arg;
    if (info->type != H5L_TYPE_HARD) return 0;
#if H5_VERSION_GE(1, 12, 0)
    haddr_t a = HADDR_UNDEF;
    if (H5VLnative_token_to_addr(gid, info->u.token, &a) < 0) return 0;
#else
    (void)gid;
    haddr_t a = info->u.address;
#endif
    uint64_t oh = abs_addr(w->c, (uint64_t)a);
    if (oh == UINT64_MAX || !inside(w->c, oh, 16)) {
        w->rc = fail(w->c, "group at byte %llu (a densely stored hard link to an address outside the file)",
                     (unsigned long long)w->group);
        return -1;
    }
    todo_push(w->c, oh, 0);
    return 0;
}

/* The members of the dense groups found since the last call, queued as if a
 * link message had named them. A dense group's links live in a fractal heap
 * indexed by a version-2 B-tree, every block of which carries a checksum that
 * HDF5 verifies; HDF5 walks them here, through the group's object header,
 * which has been checked already. The members' own headers are then checked
 * like any other: a version-1 header (no checksum) reached only through a dense
 * group (an old-format file whose group tracks creation order, or holds an
 * external link) is covered this way. When HDF5 cannot read the group, the
 * reader reports it the same way later: nothing is queued. */
static int dense_members(h5p *c, hid_t *fid)
{
    if (*fid < 0) {
        h5_init();
        *fid = H5Fopen(c->path, H5F_ACC_RDONLY, H5P_DEFAULT);
        if (*fid < 0) {
            c->ndense_done = c->ndense;
            return 0;
        }
    }
    for (; c->ndense_done < c->ndense; c->ndense_done++) {
        uint64_t g = c->dense[c->ndense_done];
        hid_t gid = H5Oopen_by_addr(*fid, (haddr_t)(g - c->base));
        if (gid < 0) continue;
        dense_walk w = { c, g, 0 };
        hsize_t idx = 0;
        if (H5Iget_type(gid) == H5I_GROUP)
#if H5_VERSION_GE(1, 12, 0)
            H5Literate2(gid, H5_INDEX_NAME, H5_ITER_NATIVE, &idx, dense_link, &w);
#else
            H5Literate(gid, H5_INDEX_NAME, H5_ITER_NATIVE, &idx, dense_link, &w);
#endif
        H5Oclose(gid);
        if (w.rc < 0) return -1;
    }
    return 0;
}

/* ---- object headers ------------------------------------------------------ */

typedef struct { uint64_t off, len; } chunk;

static int check_message(h5p *c, uint64_t hdr, unsigned type, unsigned mflags, const unsigned char *p, uint64_t n,
                         chunk **chunks, size_t *nchunks, size_t *capchunks)
{
    char where[64];
    snprintf(where, sizeof where, "object header at byte %llu", (unsigned long long)hdr);
    int shared = (mflags & 0x02) != 0; /* the message is a reference to a shared one */
    uint64_t nelem, used;
    dtype_info di;
    switch (type) {
    case 0x01:
        if (shared) return 0;
        if (parse_dspace(c, where, p, n, &nelem) < 0) return -1;
        c->ds.space = 1;
        c->ds.nelem = nelem;
        return 0;
    case 0x03:
        if (shared) return 0;
        if (parse_dtype(c, where, p, n, 0, &di, &used) < 0) return -1;
        c->ds.type = 1;
        c->ds.tsize = di.size;
        return 0;
    case 0x04: case 0x05: return shared ? 0 : check_fill(c, where, type, p, n);
    case 0x06: return check_link(c, where, p, n);
    case 0x08: return check_layout(c, where, p, n);
    case 0x0b: return shared ? 0 : check_filters(c, where, p, n);
    case 0x0c: return shared ? 0 : check_attr(c, hdr, p, n);
    case 0x10: {
        if (n < 16) return fail(c, "%s (continuation message of %llu bytes)", where, (unsigned long long)n);
        if (c->local) return 0;
        uint64_t off = abs_addr(c, le64(p)), len = le64(p + 8);
        if (off == UINT64_MAX || !inside(c, off, len) || len == 0)
            return fail(c, "%s (continuation of %llu bytes at byte %llu, outside the file)", where, (unsigned long long)len,
                        (unsigned long long)le64(p));
        for (size_t i = 0; i < *nchunks; i++)
            if (off < (*chunks)[i].off + (*chunks)[i].len && (*chunks)[i].off < off + len)
                return fail(c, "%s (continuation at byte %llu overlaps another chunk of the header)", where, (unsigned long long)off);
        if (*nchunks >= MAX_CHUNKS) return fail(c, "%s (more than %d chunks)", where, MAX_CHUNKS);
        if (*nchunks == *capchunks) {
            *capchunks *= 2;
            *chunks = dh_realloc(*chunks, *capchunks * sizeof **chunks);
        }
        (*chunks)[(*nchunks)++] = (chunk){ off, len };
        return 0;
    }
    case 0x11: {
        if (n < 16) return fail(c, "%s (symbol table message of %llu bytes)", where, (unsigned long long)n);
        if (c->local) return 0;
        uint64_t hdata = 0, hsize = 0;
        if (local_heap(c, where, le64(p + 8), &hdata, &hsize) < 0) return -1;
        return check_group_btree(c, le64(p), -1, hdata, hsize);
    }
    /* Fixed-layout messages HDF5 decodes without knowing their size: each must
     * hold the fields its version and flags announce. */
    case 0x02: case 0x0a: case 0x15: case 0x12: case 0x0e: case 0x16: case 0x13: {
        uint64_t need;
        unsigned f = n > 1 ? p[1] : 0;
        switch (type) {
        case 0x02: need = 2 + (f & 1 ? 8 : 0) + 16 + (f & 2 ? 8 : 0); break; /* link info */
        case 0x0a: need = 2 + (f & 1 ? 4 : 0) + (f & 2 ? 4 : 0); break;      /* group info */
        case 0x15: need = 2 + (f & 1 ? 2 : 0) + 16 + (f & 2 ? 8 : 0); break; /* attribute info */
        case 0x12: need = 8; break;  /* modification time */
        case 0x0e: need = 16; break; /* the old modification time, as text */
        case 0x16: need = 5; break;  /* reference count */
        default: need = 7; break;    /* B-tree 'K' values */
        }
        if (n < need)
            return fail(c, "%s (message of type %u has %llu bytes, its fields take %llu)", where, type, (unsigned long long)n,
                        (unsigned long long)need);
        if ((type == 0x02 || type == 0x15) && !c->local) {
            /* Link or attribute info: a dense store's heap and indexes. */
            const unsigned char *a = p + 2 + (f & 1 ? (type == 0x02 ? 8 : 2) : 0);
            if (check_dense_store(c, where, le64(a), le64(a + 8), f & 2 ? le64(a + 16) : UNDEF_ADDR) < 0) return -1;
            if (type == 0x02 && le64(a) != UNDEF_ADDR) dense_add(c, hdr);
        }
        return 0;
    }
    case 0x0d: /* comment: HDF5 copies it up to its terminator */
        if (!memchr(p, 0, (size_t)n)) return fail(c, "%s (comment not terminated inside its message)", where);
        return 0;
    case 0x07: /* external file list: HDF5 reads the used slots */
        if (n < 16 || le16(p + 6) > le16(p + 4) || 24ull * le16(p + 6) > n - 16)
            return fail(c, "%s (external file list runs past its %llu bytes)", where, (unsigned long long)n);
        return 0;
    default: return 0;
    }
}

static int check_ohdr(h5p *c, uint64_t off)
{
    const unsigned char *m = c->m;
    int v2 = inside(c, off, 4) && memcmp(m + off, "OHDR", 4) == 0;
    size_t nchunks = 0, capchunks = 8;
    chunk *chunks = dh_malloc(capchunks * sizeof *chunks);
    int rc = 0;
    memset(&c->ds, 0, sizeof c->ds);
    unsigned hflags = 0;
    if (!v2) {
        if (!inside(c, off, 16) || m[off] != 1) {
            rc = fail(c, "object header at byte %llu (version %u)", (unsigned long long)off, inside(c, off, 1) ? m[off] : 0);
            goto out;
        }
        chunks[nchunks++] = (chunk){ off + 16, le32(m + off + 8) };
    } else {
        if (!inside(c, off, 7) || m[off + 4] != 2) {
            rc = fail(c, "object header at byte %llu (version %u)", (unsigned long long)off, inside(c, off, 5) ? m[off + 4] : 0);
            goto out;
        }
        hflags = m[off + 5];
        uint64_t q = off + 6 + (hflags & 0x20 ? 16 : 0) + (hflags & 0x10 ? 4 : 0);
        unsigned w = 1u << (hflags & 3);
        if (!inside(c, q, w)) {
            rc = fail(c, "object header at byte %llu (runs past the file)", (unsigned long long)off);
            goto out;
        }
        chunks[nchunks++] = (chunk){ q + w, le_n(m + q, w) };
    }
    for (size_t ci = 0; ci < nchunks && rc == 0; ci++) {
        uint64_t start = chunks[ci].off, len = chunks[ci].len, end;
        if (ci == 0) {
            end = start + len;
            if (len > c->size || !inside(c, start, len + (v2 ? 4 : 0))) {
                rc = fail(c, "object header at byte %llu (a chunk of %llu bytes runs past the file)", (unsigned long long)off,
                          (unsigned long long)len);
                break;
            }
        } else if (v2) {
            if (len < 8 || memcmp(m + start, "OCHK", 4) != 0) {
                rc = fail(c, "object header at byte %llu (continuation at byte %llu is not a chunk)", (unsigned long long)off,
                          (unsigned long long)start);
                break;
            }
            end = start + len - 4;
            start += 4;
        } else end = start + len;
        /* Messages: v1 8-byte prefix (type u16, size u16, flags, 3 reserved);
         * v2 type u8, size u16, flags, and a creation order u16 when tracked. */
        uint64_t pre = v2 ? 4 + (hflags & 0x04 ? 2 : 0) : 8;
        uint64_t q = start;
        while (rc == 0 && end - q >= pre && q < end) {
            unsigned type = v2 ? m[q] : le16(m + q);
            uint64_t msize = v2 ? le16(m + q + 1) : le16(m + q + 2);
            unsigned mflags = v2 ? m[q + 3] : m[q + 4];
            q += pre;
            if (msize > end - q) {
                rc = fail(c, "object header at byte %llu (message of type %u and %llu bytes runs past its chunk)",
                          (unsigned long long)off, type, (unsigned long long)msize);
                break;
            }
            rc = check_message(c, off, type, mflags, m + q, msize, &chunks, &nchunks, &capchunks);
            q += msize;
        }
    }
    if (rc == 0) rc = check_dataset(c, off);
out:
    free(chunks);
    return rc;
}

/* Every version-2 object header whose checksum holds, wherever it is. */
static void find_v2_headers(h5p *c)
{
    const unsigned char *p = c->m, *end = c->m + c->size;
    while ((p = memmem(p, (size_t)(end - p), "OHDR", 4)) != NULL) {
        uint64_t off = (uint64_t)(p - c->m);
        p += 4;
        if (!inside(c, off, 7) || c->m[off + 4] != 2) continue;
        unsigned fl = c->m[off + 5], w = 1u << (fl & 3);
        uint64_t q = off + 6 + (fl & 0x20 ? 16 : 0) + (fl & 0x10 ? 4 : 0);
        if (!inside(c, q, w)) continue;
        uint64_t len = le_n(c->m + q, w), hlen = q + w - off;
        if (len > c->size || !inside(c, off, hlen + len + 4)) continue;
        if (lookup3(c->m + off, (size_t)(hlen + len)) != le32(c->m + off + hlen + len)) continue;
        todo_push(c, off, 1);
    }
}

int h5pre_check(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) return dh_err("trace '%s': cannot read the file", path);
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < 64) {
        close(fd);
        return 0; /* too small to hold what is checked here; HDF5 reports what it is */
    }
    h5p c = { .path = path, .size = (uint64_t)st.st_size };
    void *map = mmap(NULL, (size_t)c.size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return 0;
    c.m = map;
    static const unsigned char sig[8] = { 0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n' };
    const unsigned char *m = c.m;
    int rc = 0;
    unsigned sb = m[8];
    if (memcmp(m, sig, 8) != 0 || sb > 3) goto done;
    uint64_t root = UINT64_MAX, eof = UINT64_MAX, base_field = 0;
    if (sb <= 1) {
        /* Offsets and lengths 8 bytes wide (the default), group K values, then
         * base, free-space, end-of-file and driver addresses and the root entry. */
        if (m[13] != 8 || m[14] != 8) goto done;
        c.group_leaf_k = le16(m + 16);
        c.group_node_k = le16(m + 18);
        uint64_t a = sb == 0 ? 24 : 28;
        if (!inside(&c, a, 32 + 40)) goto done;
        base_field = le64(m + a);
        if (c.group_leaf_k == 0 || c.group_node_k == 0) {
            rc = fail(&c, "superblock (group B-tree rank of 0)");
            goto done;
        }
        root = abs_addr(&c, le64(m + a + 32 + 8));
        eof = le64(m + a + 16);
        /* The driver information block: HDF5 allocates the size it gives. */
        uint64_t drv = le64(m + a + 24);
        if (drv != UNDEF_ADDR) {
            uint64_t d = abs_addr(&c, drv);
            if (d == UINT64_MAX || !inside(&c, d, 16) || le32(m + d + 4) > c.size - d - 16) {
                rc = fail(&c, "superblock (driver information block at byte %llu runs past the end of the file)",
                          (unsigned long long)drv);
                goto done;
            }
        }
    } else {
        if (m[9] != 8 || m[10] != 8) goto done;
        /* These superblocks do not hold the group ranks (a superblock extension
         * may): only the 16-bit field's bound is checked. */
        c.group_leaf_k = c.group_node_k = 0xffff;
        base_field = le64(m + 12);
        root = abs_addr(&c, le64(m + 36));
        eof = le64(m + 28);
        uint64_t ext = abs_addr(&c, le64(m + 20));
        if (ext != UINT64_MAX && inside(&c, ext, 16)) todo_push(&c, ext, 0);
    }
    /* HDF5 takes the superblock's own address (0 here) as the base address
     * whatever the field says, and moves the end-of-file address by the
     * difference (H5F__super_read); c.base stays 0. A file shorter than that
     * is truncated: HDF5 reports it itself and reads nothing more. */
    if (eof - base_field > c.size) goto done;
    /* Global heaps first: an object header check reads them. */
    if ((rc = check_all_gcols(&c)) < 0) goto done;
    if (root == UINT64_MAX || !inside(&c, root, 16)) goto done; /* HDF5 reports it */
    todo_push(&c, root, 0);
    /* Each header is checked once (the seen set), so the walk ends even on a
     * file whose links form a cycle; O(headers + messages). The headers the
     * links reach come first, checked whole; then the version-2 headers found
     * by the scan that no link reached (members of dense groups, or stale
     * ones in freed space), checked each on its own: a stale header's
     * continuations, links and heap IDs may point into space reused since, so
     * those are not followed from a header found that way. */
    size_t i = 0;
    hid_t fid = H5I_INVALID_HID;
    for (;;) {
        for (; i < c.ntodo && rc == 0; i++) rc = check_ohdr(&c, c.todo[i].off);
        if (rc != 0 || c.ndense_done == c.ndense) break;
        rc = dense_members(&c, &fid);
    }
    if (fid >= 0) H5Fclose(fid);
    if (rc == 0) find_v2_headers(&c);
    for (; i < c.ntodo && rc == 0; i++) {
        c.local = c.todo[i].local;
        rc = check_ohdr(&c, c.todo[i].off);
    }
done:
    free(c.dense);
    free(c.seen);
    free(c.todo);
    munmap(map, (size_t)c.size);
    return rc;
}
