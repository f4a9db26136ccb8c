/* trace.c: attention-selection traces in HDF5: writer, streaming reader,
 * validator; see trace.h, and traces/README.md for the schema.
 *
 * Layout. Root attributes hold the trace_meta; /layer_group, /group_k,
 * /group_compress and /requests/{prompt_len,output_len} hold the shape. The
 * stream of (request r, group g) is the HDF5 group /req/<r>/g/<g> with two
 * datasets: "index" (one compound entry per position: offset into rows,
 * n_added, n_removed, keyframe) and "rows" (u32: per position either the full
 * sorted selection, on a keyframe, or the added rows then the removed rows).
 * Each run of sorted rows (a full set, an added list, a removed list) is
 * stored delta-coded: its first row as is, then the difference to the
 * previous row. Row gaps are small, so after shuffle + deflate a stored row
 * costs about half the bytes of the plain row (README.md has the figures).
 *
 * Streaming. A reader stream holds one chunk-aligned window of each dataset
 * (TRACE_INDEX_CHUNK entries, TRACE_ROWS_CHUNK rows; a window grows only when
 * one position needs more rows than a chunk), the current selection as a
 * bitmap over the stream's largest context (with a summary level), and three
 * k-sized arrays for the delta it hands out. So its memory is O(chunk +
 * context/8 + k), never O(stream).
 * HDF5's own chunk cache is switched off for these datasets: every read is a
 * whole aligned chunk, which HDF5 decompresses straight into our window.
 *
 * Cost per position: O(rows that change) for a delta (bitmap membership and
 * update); O(context/4096 + k) for a keyframe, whose full set is diffed against
 * the current selection so that a consumer always sees the true delta.
 *
 * HDF5 here is the serial build, not thread-safe: every HDF5 call of this file
 * runs under one mutex, so streams may still be read from several threads. */
#include "common/mem.h"
#include "traces/trace.h"
#include "common/dh_err.h"
#include "common/h5attr.h"
#include "common/h5det.h"
#include "common/h5init.h"
#include "common/ofile.h"
#include "common/version.h"
#include "traces/h5pre.h"

#include <hdf5.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#define TRACE_INDEX_CHUNK 1024u    /* positions per index chunk (17 KiB raw) */
#define TRACE_ROWS_CHUNK 16384u    /* u32 rows per rows chunk (64 KiB raw) */
#define TRACE_DEFLATE_LEVEL 4      /* zlib level: 1..9; 4 is near level 9's size at a third of its time */
#define TRACE_MAX_REQUESTS (1u << 24) /* requests in one trace */
#define TRACE_MAX_LAYERS (1u << 16)   /* layers (and selection groups) of a model */
#define TRACE_ATTR_STR_MAX 65536u  /* longest string attribute read (generator_params is a few KiB) */

typedef struct {
    uint64_t offset;
    uint32_t n_added, n_removed;
    uint8_t keyframe;
} trace_index_entry;

static pthread_mutex_t trace_h5_lock = PTHREAD_MUTEX_INITIALIZER;
#define H5_LOCK() pthread_mutex_lock(&trace_h5_lock)
#define H5_UNLOCK() pthread_mutex_unlock(&trace_h5_lock)

/* ---- HDF5 helpers ---------------------------------------------------- */

/* ---- A deflate filter that counts what it inflates ------------------- */

/* HDF5 1.10 takes whatever a chunk inflates to as the whole chunk: a chunk
 * that inflates to fewer bytes than the dataset's chunks hold (the stored
 * data intact, its checksum good, but the header's chunk size or datatype
 * size damaged) leaves the rest of HDF5's chunk buffer as it was, and a read
 * returns that uninitialised memory as data: different values from run to
 * run, and a size read from it can ask for gigabytes. A valid file's chunks
 * always inflate to exactly their size (HDF5 stores edge chunks whole). So
 * the deflate filter is HDF5's own (H5Z_DEFLATE, exported by the library:
 * writing is unchanged) behind a wrapper that, on reading, fails a chunk
 * whose inflated size is not the one the dataset's pipeline implies
 * (inflate_expect, set by the reader before each read under trace_h5_lock;
 * 0 outside this file's reads, which are then not checked). */
extern const H5Z_class2_t H5Z_DEFLATE[1];
extern herr_t H5Z_register(const H5Z_class2_t *cls);
static size_t inflate_expect;
static _Thread_local char h5_own_reason[200];

static size_t checked_deflate(unsigned flags, size_t cd_nelmts, const unsigned cd_values[], size_t nbytes,
                              size_t *buf_size, void **buf)
{
    size_t n = H5Z_DEFLATE->filter(flags, cd_nelmts, cd_values, nbytes, buf_size, buf);
    if ((flags & H5Z_FLAG_REVERSE) && n && inflate_expect && n != inflate_expect) {
        snprintf(h5_own_reason, sizeof h5_own_reason,
                 "a chunk inflates to %zu bytes where the dataset's chunks hold %zu: a damaged chunk or datatype size",
                 n, inflate_expect);
        return 0;
    }
    return n;
}

static pthread_once_t deflate_once = PTHREAD_ONCE_INIT;

static void register_checked_deflate(void)
{
    H5Z_class2_t c = H5Z_DEFLATE[0];
    c.filter = checked_deflate;
    /* H5Zregister refuses the predefined ids; the library's own
     * registration (H5Z_register, exported by every HDF5 since 1.8) replaces
     * the entry of the same id. If it cannot, reads are simply not checked. */
    if (H5Z_register(&c) < 0) H5Eclear2(H5E_DEFAULT);
}

/* HDF5 prints its error stack by default; we report one line ourselves. */
static void h5_quiet(void)
{
    h5_init();
    pthread_once(&deflate_once, register_checked_deflate);
}

/* The size a chunk of dataset d inflates to, for inflate_expect: its chunk's
 * bytes (chunk dims x the file datatype's size), plus 4 for a Fletcher-32
 * checksum computed before deflate; 0 when nothing is inflated (not chunked,
 * or no deflate). *bad is set when the pipeline holds a filter other than
 * shuffle, deflate and Fletcher-32 (a trace's datasets use those only, and
 * another filter between deflate and the data could change the size). */
static size_t dset_inflate_size(hid_t d, char *bad, size_t bad_len)
{
    size_t out = 0;
    bad[0] = 0;
    hid_t dcpl = H5Dget_create_plist(d), t = H5Dget_type(d);
    if (dcpl >= 0 && t >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED) {
        hsize_t cd[H5S_MAX_RANK];
        int rank = H5Pget_chunk(dcpl, H5S_MAX_RANK, cd), nf = H5Pget_nfilters(dcpl);
        uint64_t bytes = H5Tget_size(t);
        for (int i = 0; i < rank; i++) bytes *= cd[i];
        size_t extra = 0;
        int deflate = 0;
        for (int i = 0; i < nf && !bad[0]; i++) {
            unsigned fl, cdv[8];
            size_t ncd = 8;
            char name[64] = "";
            H5Z_filter_t id = H5Pget_filter2(dcpl, (unsigned)i, &fl, &ncd, cdv, sizeof name, name, NULL);
            if (id == H5Z_FILTER_DEFLATE) deflate = 1;
            else if (id == H5Z_FILTER_FLETCHER32) extra += deflate ? 0 : 4;
            else if (id != H5Z_FILTER_SHUFFLE)
                snprintf(bad, bad_len, "uses filter %d ('%s'); a trace's datasets may use shuffle, deflate and Fletcher-32 only",
                         (int)id, name);
        }
        if (deflate && !bad[0] && rank > 0 && bytes <= SIZE_MAX - extra) out = (size_t)bytes + extra;
    }
    if (t >= 0) H5Tclose(t);
    if (dcpl >= 0) H5Pclose(dcpl);
    return out;
}

static herr_t h5_walk(unsigned n, const H5E_error2_t *e, void *data)
{
    char *buf = data;
    if (buf[0]) return 0;
    if (e->desc && e->desc[0]) {
        snprintf(buf, 200, "%s", e->desc);
    } else {
        /* No description: the minor message ("filter returned failure", ...). */
        char msg[160];
        if (H5Eget_msg(e->min_num, NULL, msg, sizeof msg) > 0) snprintf(buf, 200, "%s", msg);
    }
    return 0;
}

/* The innermost message of HDF5's error stack, for "(HDF5: ...)" suffixes.
 * Every HDF5 call clears the stack, so a helper that still has to close
 * handles after a failure snapshots the message first (h5_capture). */
static _Thread_local char h5_snapshot[200];

static void h5_capture(void)
{
    h5_snapshot[0] = 0;
    if (h5_own_reason[0]) {
        snprintf(h5_snapshot, sizeof h5_snapshot, "%s", h5_own_reason);
        h5_own_reason[0] = 0;
        return;
    }
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, h5_walk, h5_snapshot);
}

static const char *h5_reason(void)
{
    static _Thread_local char buf[200];
    buf[0] = 0;
    if (h5_own_reason[0]) {
        snprintf(buf, sizeof buf, "%s", h5_own_reason);
        h5_own_reason[0] = 0;
        h5_snapshot[0] = 0;
        return buf;
    }
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, h5_walk, buf);
    if (!buf[0]) snprintf(buf, sizeof buf, "%s", h5_snapshot[0] ? h5_snapshot : "unknown HDF5 error");
    h5_snapshot[0] = 0;
    return buf;
}

static hid_t index_mem_type(void)
{
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(trace_index_entry));
    if (t < 0) return -1;
    if (H5Tinsert(t, "offset", HOFFSET(trace_index_entry, offset), H5T_NATIVE_UINT64) < 0 ||
        H5Tinsert(t, "n_added", HOFFSET(trace_index_entry, n_added), H5T_NATIVE_UINT32) < 0 ||
        H5Tinsert(t, "n_removed", HOFFSET(trace_index_entry, n_removed), H5T_NATIVE_UINT32) < 0 ||
        H5Tinsert(t, "keyframe", HOFFSET(trace_index_entry, keyframe), H5T_NATIVE_UINT8) < 0) {
        H5Tclose(t);
        return -1;
    }
    return t;
}

/* The on-disk index type: little-endian, packed (17 bytes per position). */
static hid_t index_file_type(void)
{
    hid_t t = H5Tcreate(H5T_COMPOUND, 17);
    if (t < 0) return -1;
    if (H5Tinsert(t, "offset", 0, H5T_STD_U64LE) < 0 || H5Tinsert(t, "n_added", 8, H5T_STD_U32LE) < 0 ||
        H5Tinsert(t, "n_removed", 12, H5T_STD_U32LE) < 0 || H5Tinsert(t, "keyframe", 16, H5T_STD_U8LE) < 0) {
        H5Tclose(t);
        return -1;
    }
    return t;
}

/* ---- the selection state shared by reader and writer --------------------- */

/* The current selection of one stream as a bitmap over its rows: membership
 * and update are O(1) per changed row. A second level (bit w of sum: word w
 * of bits is not zero) makes listing the selection O(nrows_max/4096 + n_sel),
 * not O(nrows_max/64): a keyframe's diff then costs little even when the
 * shape claims a context of billions of rows. */
typedef struct {
    uint64_t *bits, *sum;
    uint32_t nrows_max; /* bits allocated */
    uint32_t n_sel;
} selset;

/* 0, or -1 when the memory is not there (sizes come from a file's shape). */
static int selset_init(selset *s, uint32_t nrows_max)
{
    size_t words = ((size_t)nrows_max + 63) / 64 + 1;
    s->nrows_max = nrows_max;
    s->bits = calloc(words, sizeof *s->bits);
    s->sum = calloc((words + 63) / 64, sizeof *s->sum);
    s->n_sel = 0;
    return s->bits && s->sum ? 0 : -1;
}

static void selset_release(selset *s)
{
    free(s->bits);
    free(s->sum);
    memset(s, 0, sizeof *s);
}
static int selset_has(const selset *s, uint32_t row) { return (s->bits[row >> 6] >> (row & 63)) & 1; }
static void selset_set(selset *s, uint32_t row)
{
    s->bits[row >> 6] |= 1ull << (row & 63);
    s->sum[row >> 12] |= 1ull << ((row >> 6) & 63);
}
static void selset_clear(selset *s, uint32_t row)
{
    if (!(s->bits[row >> 6] &= ~(1ull << (row & 63)))) s->sum[row >> 12] &= ~(1ull << ((row >> 6) & 63));
}

/* body, with row set to each selected row in ascending order. */
#define SELSET_EACH(s, row, body)                                                                   \
    do {                                                                                            \
        size_t sum_words_ = ((size_t)(s)->nrows_max + 63) / 64 / 64 + 1;                            \
        for (size_t j_ = 0; j_ < sum_words_; j_++)                                                  \
            for (uint64_t m_ = (s)->sum[j_]; m_; m_ &= m_ - 1) {                                    \
                size_t w_ = j_ * 64 + (unsigned)__builtin_ctzll(m_);                                \
                for (uint64_t b_ = (s)->bits[w_]; b_; b_ &= b_ - 1) {                               \
                    uint32_t row = (uint32_t)(w_ * 64 + (unsigned)__builtin_ctzll(b_));             \
                    body;                                                                           \
                }                                                                                   \
            }                                                                                       \
    } while (0)

/* Where an error happened, for messages "trace 'x.h5': /req/3/g/7 position 12: ...". */
typedef struct {
    const char *path;
    const char *stream; /* "/req/3/g/7" */
    uint32_t pos;
    const char *role;   /* "" for the reader, "source " for the writer */
} where;

static int where_err(const where *w, const char *fmt, ...) DH_PRINTF(2, 3);
static int where_err(const where *w, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return dh_err("trace '%s': %s%s position %u: %s", w->path, w->role, w->stream, w->pos, msg);
}

/* A run of rows must be strictly increasing (sorted, no duplicates) and
 * inside the context. */
static int check_run(const where *w, const char *what, const uint32_t *rows, uint32_t n, uint32_t nrows)
{
    for (uint32_t i = 0; i < n; i++) {
        if (rows[i] >= nrows)
            return where_err(w, "%s row %u is beyond the context (%u rows)", what, rows[i], nrows);
        if (i && rows[i] == rows[i - 1]) return where_err(w, "%s row %u appears twice", what, rows[i]);
        if (i && rows[i] < rows[i - 1])
            return where_err(w, "%s rows are not sorted (row %u follows row %u)", what, rows[i], rows[i - 1]);
    }
    return 0;
}

static uint32_t expected_sel(uint32_t k, uint32_t nrows) { return k < nrows ? k : nrows; }

/* Apply a delta: validates it against the current selection (removed rows
 * must be selected, added rows must not be) and the size after it. */
static int selset_apply(selset *s, const where *w, const uint32_t *added, uint32_t n_added,
                        const uint32_t *removed, uint32_t n_removed, uint32_t nrows, uint32_t k)
{
    if (check_run(w, "added", added, n_added, nrows) < 0 || check_run(w, "removed", removed, n_removed, nrows) < 0)
        return -1;
    for (uint32_t i = 0; i < n_added; i++)
        if (selset_has(s, added[i])) return where_err(w, "adds row %u which is already selected", added[i]);
    for (uint32_t i = 0; i < n_removed; i++) {
        if (!selset_has(s, removed[i])) return where_err(w, "removes row %u which is not selected", removed[i]);
        selset_clear(s, removed[i]);
    }
    for (uint32_t i = 0; i < n_added; i++) selset_set(s, added[i]);
    s->n_sel = s->n_sel - n_removed + n_added;
    uint32_t want = expected_sel(k, nrows);
    if (s->n_sel != want)
        return where_err(w, "selection has %u rows, expected min(k, context rows) = min(%u, %u) = %u", s->n_sel,
                         k, nrows, want);
    return 0;
}

/* The selection in ascending order. O(nrows_max/4096 + n_sel). */
static uint32_t selset_list(const selset *s, uint32_t *out)
{
    uint32_t n = 0;
    SELSET_EACH(s, row, out[n++] = row);
    return n;
}

/* The largest context of a stream, in rows (0 for an empty stream). */
static uint32_t stream_rows_max(const trace_shape *sh, uint32_t r, uint32_t g)
{
    return sh->output_len[r] ? sel_rows_at(sh, r, g, sh->output_len[r] - 1) : 0;
}

/* ---- writer ----------------------------------------------------------- */

typedef struct {
    const char *path;
    hid_t file, dcpl_index, dcpl_rows, gcpl, index_ftype, index_mtype;
} trace_writer;

typedef struct {
    hid_t index_ds, rows_ds;
    trace_index_entry *ix;
    uint32_t ix_n;
    uint64_t ix_written;
    uint32_t *rows;
    uint32_t rows_n;
    uint64_t rows_written;
} stream_writer;

static int w_attr(trace_writer *w, const char *name, hid_t ftype, hid_t mtype, const void *val)
{
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = sp < 0 ? -1 : H5Acreate2(w->file, name, ftype, sp, H5P_DEFAULT, H5P_DEFAULT);
    int rc = (a < 0 || H5Awrite(a, mtype, val) < 0) ? -1 : 0;
    if (rc < 0) h5_capture();
    if (a >= 0) H5Aclose(a);
    if (sp >= 0) H5Sclose(sp);
    if (rc < 0) return dh_err("trace '%s': cannot write attribute '%s' (HDF5: %s)", w->path, name, h5_reason());
    return 0;
}

static int w_attr_str(trace_writer *w, const char *name, const char *val)
{
    /* Variable-length UTF-8 strings: h5py reads them as str, h5dump prints them. */
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0 || H5Tset_size(t, H5T_VARIABLE) < 0 || H5Tset_cset(t, H5T_CSET_UTF8) < 0) {
        if (t >= 0) H5Tclose(t);
        return dh_err("trace '%s': cannot make a string type (HDF5: %s)", w->path, h5_reason());
    }
    const char *v = val ? val : "";
    int rc = w_attr(w, name, t, t, &v);
    H5Tclose(t);
    return rc;
}

/* A shape dataset with its "unit" attribute (common/h5attr.h; "" for an index). */
static int w_u32_dataset(trace_writer *w, const char *name, const uint32_t *vals, uint32_t n, const char *unit)
{
    hsize_t dims[1] = { n };
    hid_t sp = H5Screate_simple(1, dims, NULL);
    hid_t dcpl = h5_untimed(H5P_DATASET_CREATE);
    hid_t d = sp < 0 || dcpl < 0 || h5_make_parents(w->file, name, w->gcpl) < 0
                  ? -1 : H5Dcreate2(w->file, name, H5T_STD_U32LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    int rc = d < 0 || (n && H5Dwrite(d, H5T_NATIVE_UINT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, vals) < 0) ||
                     h5_attr_str(d, "unit", unit) < 0
                 ? -1 : 0;
    if (rc < 0) h5_capture();
    if (d >= 0) H5Dclose(d);
    if (dcpl >= 0) H5Pclose(dcpl);
    if (sp >= 0) H5Sclose(sp);
    if (rc < 0) return dh_err("trace '%s': cannot write dataset '%s' (HDF5: %s)", w->path, name, h5_reason());
    return 0;
}

static hid_t w_chunked(trace_writer *w, hid_t loc, const char *name, hid_t ftype, hid_t dcpl)
{
    hsize_t dims[1] = { 0 }, maxdims[1] = { H5S_UNLIMITED };
    hid_t sp = H5Screate_simple(1, dims, maxdims);
    hid_t d = sp < 0 ? -1 : H5Dcreate2(loc, name, ftype, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (sp >= 0) H5Sclose(sp);
    return d;
}

/* Read or write elements lo .. lo+n-1 of a 1-D dataset through a hyperslab:
 * the one place the reader and the writer touch dataset contents. A read checks
 * each chunk it inflates against inflate (dset_inflate_size; 0: unchecked). */
static int h5_slab_io(hid_t d, hid_t mtype, void *buf, uint64_t lo, uint64_t n, int write, size_t inflate)
{
    hsize_t start[1] = { lo }, count[1] = { n };
    hid_t fs = H5Dget_space(d);
    hid_t ms = H5Screate_simple(1, count, NULL);
    inflate_expect = write ? 0 : inflate;
    int rc = fs < 0 || ms < 0 || H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
                     (write ? H5Dwrite(d, mtype, ms, fs, H5P_DEFAULT, buf) : H5Dread(d, mtype, ms, fs, H5P_DEFAULT, buf)) < 0
                 ? -1
                 : 0;
    inflate_expect = 0;
    if (rc < 0) h5_capture();
    if (ms >= 0) H5Sclose(ms);
    if (fs >= 0) H5Sclose(fs);
    return rc;
}

/* Append n elements to a 1-D extendible dataset. */
static int w_append(hid_t d, hid_t mtype, const void *buf, uint64_t at, uint64_t n)
{
    if (!n) return 0;
    hsize_t size[1] = { at + n };
    if (H5Dset_extent(d, size) < 0) return -1;
    return h5_slab_io(d, mtype, (void *)buf, at, n, 1, 0);
}

static int sw_flush_rows(trace_writer *w, stream_writer *sw, const char *stream)
{
    if (w_append(sw->rows_ds, H5T_NATIVE_UINT32, sw->rows, sw->rows_written, sw->rows_n) < 0)
        return dh_err("trace '%s': cannot write %s/rows (HDF5: %s)", w->path, stream, h5_reason());
    sw->rows_written += sw->rows_n;
    sw->rows_n = 0;
    return 0;
}

static int sw_flush_index(trace_writer *w, stream_writer *sw, const char *stream)
{
    if (w_append(sw->index_ds, w->index_mtype, sw->ix, sw->ix_written, sw->ix_n) < 0)
        return dh_err("trace '%s': cannot write %s/index (HDF5: %s)", w->path, stream, h5_reason());
    sw->ix_written += sw->ix_n;
    sw->ix_n = 0;
    return 0;
}

/* Append one sorted run delta-coded: first row as is, then differences. */
static int sw_put_run(trace_writer *w, stream_writer *sw, const char *stream, const uint32_t *rows, uint32_t n)
{
    uint32_t prev = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (sw->rows_n == TRACE_ROWS_CHUNK && sw_flush_rows(w, sw, stream) < 0) return -1;
        sw->rows[sw->rows_n++] = rows[i] - prev;
        prev = rows[i];
    }
    return 0;
}

static int write_stream(trace_writer *w, sel_source *src, uint32_t r, uint32_t g)
{
    const trace_meta *m = sel_meta(src);
    const trace_shape *sh = &m->shape;
    char stream[64];
    snprintf(stream, sizeof stream, "/req/%u/g/%u", r, g);
    where wh = { w->path, stream, 0, "source " };

    stream_writer sw = { .index_ds = -1, .rows_ds = -1 };
    selset set;
    DH_BUG_ON(selset_init(&set, stream_rows_max(sh, r, g)) < 0);
    uint32_t *full = dh_malloc((size_t)sh->group_k[g] * sizeof *full);
    sw.ix = dh_malloc(TRACE_INDEX_CHUNK * sizeof *sw.ix);
    sw.rows = dh_malloc(TRACE_ROWS_CHUNK * sizeof *sw.rows);
    sel_stream *st = NULL;
    int rc = -1;

    hid_t grp = h5_make_parents(w->file, stream, w->gcpl) < 0 ? -1 : H5Gcreate2(w->file, stream, H5P_DEFAULT, w->gcpl, H5P_DEFAULT);
    if (grp < 0) { dh_err("trace '%s': cannot create group %s (HDF5: %s)", w->path, stream, h5_reason()); goto out; }
    sw.index_ds = w_chunked(w, grp, "index", w->index_ftype, w->dcpl_index);
    sw.rows_ds = w_chunked(w, grp, "rows", H5T_STD_U32LE, w->dcpl_rows);
    H5Gclose(grp);
    if (sw.index_ds < 0 || sw.rows_ds < 0) {
        dh_err("trace '%s': cannot create the datasets of %s (HDF5: %s)", w->path, stream, h5_reason());
        goto out;
    }

    /* The source runs outside the HDF5 lock: it may itself be a trace file. */
    H5_UNLOCK();
    int orc = sel_open(src, r, g, &st);
    H5_LOCK();
    if (orc < 0) goto out;
    uint32_t n_pos = sh->output_len[r], k = sh->group_k[g];
    uint64_t offset = 0;
    for (uint32_t p = 0;; p++) {
        sel_delta d;
        H5_UNLOCK();
        int nrc = sel_next(st, &d);
        H5_LOCK();
        if (nrc < 0) goto out;
        wh.pos = p;
        if (nrc == 1) {
            if (p != n_pos) { where_err(&wh, "stream ended early: %u positions, expected output_len %u", p, n_pos); goto out; }
            break;
        }
        if (p >= n_pos) { where_err(&wh, "stream is longer than output_len %u", n_pos); goto out; }
        uint32_t nrows = sel_rows_at(sh, r, g, p);
        if (d.pos != p || d.nrows != nrows) {
            where_err(&wh, "delivered position %u with %u context rows, expected position %u with %u", d.pos,
                      d.nrows, p, nrows);
            goto out;
        }
        if (selset_apply(&set, &wh, d.added, d.n_added, d.removed, d.n_removed, nrows, k) < 0) goto out;
        if (d.n_sel != set.n_sel) { where_err(&wh, "reports %u selected rows, its deltas give %u", d.n_sel, set.n_sel); goto out; }

        int key = p % m->keyframe_interval == 0;
        trace_index_entry e = { offset, 0, 0, (uint8_t)key };
        if (key) {
            /* The full set comes from our own state, so a source whose
             * keyframes fall elsewhere (or that gives none) is still stored
             * correctly; a full set it does give must agree with its deltas. */
            uint32_t n = selset_list(&set, full);
            if (d.keyframe && d.full && memcmp(d.full, full, (size_t)n * sizeof *full) != 0) {
                where_err(&wh, "keyframe's full set disagrees with the selection its deltas give");
                goto out;
            }
            e.n_added = n;
            if (sw_put_run(w, &sw, stream, full, n) < 0) goto out;
        } else {
            e.n_added = d.n_added;
            e.n_removed = d.n_removed;
            if (sw_put_run(w, &sw, stream, d.added, d.n_added) < 0 ||
                sw_put_run(w, &sw, stream, d.removed, d.n_removed) < 0)
                goto out;
        }
        offset += (uint64_t)e.n_added + e.n_removed;
        if (sw.ix_n == TRACE_INDEX_CHUNK && sw_flush_index(w, &sw, stream) < 0) goto out;
        sw.ix[sw.ix_n++] = e;
    }
    if (sw_flush_index(w, &sw, stream) < 0 || sw_flush_rows(w, &sw, stream) < 0) goto out;
    rc = 0;
out:
    if (st) {
        H5_UNLOCK();
        sel_close(st);
        H5_LOCK();
    }
    if (sw.index_ds >= 0) H5Dclose(sw.index_ds);
    if (sw.rows_ds >= 0) H5Dclose(sw.rows_ds);
    free(sw.ix);
    free(sw.rows);
    free(full);
    selset_release(&set);
    return rc;
}

static int write_all(trace_writer *w, sel_source *src, trace_progress_fn progress, void *arg)
{
    const trace_meta *m = sel_meta(src);
    const trace_shape *sh = &m->shape;
    uint32_t version = TRACE_FORMAT_VERSION;
    if (w_attr(w, "format_version", H5T_STD_U32LE, H5T_NATIVE_UINT32, &version) < 0 ||
        w_attr_str(w, "model", sh->model) < 0 ||
        w_attr(w, "n_requests", H5T_STD_U32LE, H5T_NATIVE_UINT32, &sh->n_requests) < 0 ||
        w_attr(w, "n_layers", H5T_STD_U32LE, H5T_NATIVE_UINT32, &sh->n_layers) < 0 ||
        w_attr(w, "n_groups", H5T_STD_U32LE, H5T_NATIVE_UINT32, &sh->n_groups) < 0 ||
        w_attr(w, "keyframe_interval", H5T_STD_U32LE, H5T_NATIVE_UINT32, &m->keyframe_interval) < 0 ||
        w_attr(w, "seed", H5T_STD_U64LE, H5T_NATIVE_UINT64, &m->seed) < 0 ||
        w_attr_str(w, "generator", m->generator) < 0 || w_attr_str(w, "preset", m->preset) < 0 ||
        w_attr_str(w, "generator_params", m->generator_params) < 0 || w_attr_str(w, "row_coding", "delta") < 0 ||
        w_attr_str(w, "commit", dh_commit()) < 0)
        return -1;
    if (w_u32_dataset(w, "layer_group", sh->layer_group, sh->n_layers, "") < 0 ||
        w_u32_dataset(w, "group_k", sh->group_k, sh->n_groups, "rows") < 0 ||
        w_u32_dataset(w, "group_compress", sh->group_compress, sh->n_groups, "tokens/row") < 0 ||
        w_u32_dataset(w, "requests/prompt_len", sh->prompt_len, sh->n_requests, "tokens") < 0 ||
        w_u32_dataset(w, "requests/output_len", sh->output_len, sh->n_requests, "tokens") < 0)
        return -1;
    uint64_t total = (uint64_t)sh->n_requests * sh->n_groups, done = 0;
    for (uint32_t r = 0; r < sh->n_requests; r++)
        for (uint32_t g = 0; g < sh->n_groups; g++) {
            if (write_stream(w, src, r, g) < 0) return -1;
            if (progress) {
                H5_UNLOCK();
                progress(++done, total, arg);
                H5_LOCK();
            }
        }
    return 0;
}

static hid_t make_dcpl(hsize_t chunk)
{
    hid_t p = h5_untimed(H5P_DATASET_CREATE);
    if (p < 0) return -1;
    if (H5Pset_chunk(p, 1, &chunk) < 0 || H5Pset_shuffle(p) < 0 || H5Pset_deflate(p, TRACE_DEFLATE_LEVEL) < 0) {
        H5Pclose(p);
        return -1;
    }
    return p;
}

int trace_write(const char *path, sel_source *src, trace_progress_fn progress, void *arg)
{
    const trace_meta *m = sel_meta(src);
    if (trace_shape_validate(&m->shape) < 0) return dh_err_prefix("trace '%s': ", path);
    if (m->keyframe_interval == 0) return dh_err("trace '%s': keyframe interval must be at least 1", path);

    /* A temporary name in the same directory, so the final rename is atomic
     * (and a signal removes it). */
    char *tmp;
    if (ofile_begin(path, &tmp) < 0) return dh_err_prefix("trace '%s': ", path);

    H5_LOCK();
    h5_quiet();
    trace_writer w = { .path = path, .file = -1, .dcpl_index = -1, .dcpl_rows = -1, .gcpl = -1,
                       .index_ftype = -1, .index_mtype = -1 };
    int rc = -1;
    /* The HDF5 1.10 file format: compact groups and an extensible-array chunk
     * index cut the fixed cost of a stream from about 6 KB to 1.5 KB
     * (README.md); any HDF5 >= 1.10 (h5py, h5dump) reads it. */
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS), fcpl = h5_untimed_fcpl();
    if (fapl >= 0 && fcpl >= 0 && H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_V110) >= 0)
        w.file = H5Fcreate(tmp, H5F_ACC_TRUNC, fcpl, fapl);
    if (fapl >= 0) H5Pclose(fapl);
    if (fcpl >= 0) H5Pclose(fcpl);
    if (w.file < 0) {
        dh_err("trace '%s': cannot create '%s' (HDF5: %s)", path, tmp, h5_reason());
        goto out;
    }
    w.dcpl_index = make_dcpl(TRACE_INDEX_CHUNK);
    w.dcpl_rows = make_dcpl(TRACE_ROWS_CHUNK);
    /* No modification times in object headers: the same trace gives the same bytes. */
    w.gcpl = h5_untimed(H5P_GROUP_CREATE);
    w.index_ftype = index_file_type();
    w.index_mtype = index_mem_type();
    if (w.dcpl_index < 0 || w.dcpl_rows < 0 || w.gcpl < 0 || w.index_ftype < 0 || w.index_mtype < 0) {
        dh_err("trace '%s': cannot set up HDF5 properties (HDF5: %s)", path, h5_reason());
        goto out;
    }
    rc = write_all(&w, src, progress, arg);
out:
    if (w.index_mtype >= 0) H5Tclose(w.index_mtype);
    if (w.index_ftype >= 0) H5Tclose(w.index_ftype);
    if (w.gcpl >= 0) H5Pclose(w.gcpl);
    if (w.dcpl_rows >= 0) H5Pclose(w.dcpl_rows);
    if (w.dcpl_index >= 0) H5Pclose(w.dcpl_index);
    if (w.file >= 0 && H5Fclose(w.file) < 0 && rc == 0)
        rc = dh_err("trace '%s': cannot finish '%s' (HDF5: %s)", path, tmp, h5_reason());
    H5_UNLOCK();
    if (rc < 0) ofile_abort(tmp);
    else if (ofile_commit(tmp, path) < 0) rc = dh_err_prefix("trace '%s': ", path);
    return rc;
}

/* ---- reader ----------------------------------------------------------- */

typedef struct {
    char *path;
    hid_t file;
    hid_t dapl;        /* dataset access: no chunk cache (we read whole chunks) */
    hid_t index_mtype;
    int delta_coded;
} trace_src;

typedef struct {
    sel_stream_head head;
    trace_src *ts;
    const trace_shape *shape;
    uint32_t req, group, n_pos, k, keyframe_interval;
    char stream[64];
    hid_t index_ds, rows_ds;
    uint64_t rows_total;
    /* Window over the index: entries [ix_lo, ix_lo + ix_n). */
    trace_index_entry *ix;
    uint64_t ix_lo, ix_n, ix_chunk;
    size_t ix_inflate, rows_inflate; /* the datasets' chunk sizes once inflated (open_1d) */
    /* Window over the rows: [rb_lo, rb_lo + rb_n), chunk-aligned. */
    uint32_t *rb;
    uint64_t rb_lo, rb_n, rb_cap, rows_chunk;
    selset set;
    uint32_t pos;
    uint64_t next_offset;
    uint32_t *added, *removed, *full;
    int failed;
} trace_stream;

static int read_block(hid_t d, size_t inflate, hid_t mtype, void *buf, uint64_t lo, uint64_t n)
{
    return h5_slab_io(d, mtype, buf, lo, n, 0, inflate);
}

/* Open a 1-D dataset of the expected type class; *len its length, *chunk its chunk size,
 * *inflate the size each of its chunks must inflate to (dset_inflate_size). */
static hid_t open_1d(trace_src *ts, const char *name, H5T_class_t cls, uint64_t *len, uint64_t *chunk, size_t *inflate)
{
    if (H5Lexists(ts->file, name, H5P_DEFAULT) <= 0) {
        dh_err("trace '%s': dataset '%s' is missing", ts->path, name);
        return -1;
    }
    hid_t d = H5Dopen2(ts->file, name, ts->dapl);
    if (d < 0) {
        dh_err("trace '%s': cannot open dataset '%s' (HDF5: %s)", ts->path, name, h5_reason());
        return -1;
    }
    hid_t t = H5Dget_type(d), sp = H5Dget_space(d);
    int rank = sp < 0 ? -1 : H5Sget_simple_extent_ndims(sp);
    hsize_t dims[1] = { 0 };
    if (rank == 1) H5Sget_simple_extent_dims(sp, dims, NULL);
    H5T_class_t c = t < 0 ? H5T_NO_CLASS : H5Tget_class(t);
    if (t >= 0) H5Tclose(t);
    if (sp >= 0) H5Sclose(sp);
    if (rank != 1 || c != cls) {
        H5Dclose(d);
        dh_err("trace '%s': dataset '%s' is not a 1-D %s array", ts->path, name,
               cls == H5T_COMPOUND ? "compound" : "integer");
        return -1;
    }
    char bad[160];
    *inflate = dset_inflate_size(d, bad, sizeof bad);
    if (bad[0]) {
        H5Dclose(d);
        dh_err("trace '%s': dataset '%s' %s", ts->path, name, bad);
        return -1;
    }
    *len = dims[0];
    if (chunk) {
        hid_t dcpl = H5Dget_create_plist(d);
        hsize_t cd[1] = { 0 };
        *chunk = dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED && H5Pget_chunk(dcpl, 1, cd) == 1 && cd[0] ? cd[0]
                                                                                                         : 4096;
        if (dcpl >= 0) H5Pclose(dcpl);
    }
    return d;
}

/* The index's compound type must have exactly the four fields of the
 * format, each an unsigned integer no wider than the field it is read into:
 * HDF5 converts a compound by field name, so a missing field would leave our
 * buffer unwritten and a wider or signed one would be clamped, both silently. */
static int check_index_type(trace_src *ts, hid_t d, const char *stream)
{
    static const struct { const char *name; size_t max; } fields[] = {
        { "offset", 8 }, { "n_added", 4 }, { "n_removed", 4 }, { "keyframe", 1 },
    };
    hid_t t = H5Dget_type(d);
    int n = t < 0 ? -1 : H5Tget_nmembers(t), rc = 0;
    if (n != 4) rc = dh_err("trace '%s': %s/index has %d fields, expected offset, n_added, n_removed, keyframe", ts->path, stream, n);
    for (unsigned i = 0; rc == 0 && i < 4; i++) {
        int m = H5Tget_member_index(t, fields[i].name);
        hid_t mt = m < 0 ? -1 : H5Tget_member_type(t, (unsigned)m);
        size_t size = mt < 0 ? 0 : H5Tget_size(mt);
        if (m < 0) rc = dh_err("trace '%s': %s/index has no field '%s'", ts->path, stream, fields[i].name);
        else if (mt < 0 || H5Tget_class(mt) != H5T_INTEGER || H5Tget_sign(mt) != H5T_SGN_NONE || size == 0 ||
                 size > fields[i].max)
            rc = dh_err("trace '%s': %s/index field '%s' is not an unsigned integer of at most %zu bits", ts->path,
                        stream, fields[i].name, 8 * fields[i].max);
        if (mt >= 0) H5Tclose(mt);
    }
    if (t >= 0) H5Tclose(t);
    return rc;
}

/* Rows [off, off + n) into the window; returns a pointer into it. */
static const uint32_t *stream_rows(trace_stream *s, uint64_t off, uint64_t n)
{
    if (off >= s->rb_lo && off + n <= s->rb_lo + s->rb_n) return s->rb + (off - s->rb_lo);
    uint64_t lo = off / s->rows_chunk * s->rows_chunk;
    uint64_t hi = (off + n + s->rows_chunk - 1) / s->rows_chunk * s->rows_chunk;
    if (hi < lo + s->rows_chunk) hi = lo + s->rows_chunk;
    if (hi > s->rows_total) hi = s->rows_total;
    if (hi - lo > s->rb_cap) {
        free(s->rb);
        s->rb_cap = hi - lo;
        s->rb = dh_malloc(s->rb_cap * sizeof *s->rb);
    }
    s->rb_n = 0;
    H5_LOCK();
    int rc = read_block(s->rows_ds, s->rows_inflate, H5T_NATIVE_UINT32, s->rb, lo, hi - lo);
    H5_UNLOCK();
    if (rc < 0) {
        dh_err("trace '%s': %s position %u: cannot read %s/rows %llu..%llu (HDF5: %s)", s->ts->path, s->stream,
               s->pos, s->stream, (unsigned long long)lo, (unsigned long long)hi, h5_reason());
        return NULL;
    }
    s->rb_lo = lo;
    s->rb_n = hi - lo;
    return s->rb + (off - lo);
}

static const trace_index_entry *stream_index(trace_stream *s, uint32_t p)
{
    if (p >= s->ix_lo && p < s->ix_lo + s->ix_n) return &s->ix[p - s->ix_lo];
    uint64_t lo = p / s->ix_chunk * s->ix_chunk, hi = lo + s->ix_chunk;
    if (hi > s->n_pos) hi = s->n_pos;
    s->ix_n = 0;
    H5_LOCK();
    int rc = read_block(s->index_ds, s->ix_inflate, s->ts->index_mtype, s->ix, lo, hi - lo);
    H5_UNLOCK();
    if (rc < 0) {
        dh_err("trace '%s': %s position %u: cannot read %s/index %llu..%llu (HDF5: %s)", s->ts->path, s->stream,
               p, s->stream, (unsigned long long)lo, (unsigned long long)hi, h5_reason());
        return NULL;
    }
    s->ix_lo = lo;
    s->ix_n = hi - lo;
    return &s->ix[p - lo];
}

/* Decode one stored run into out[0..n): delta-coded runs are prefix sums
 * (wrapping, so a corrupt run shows up as unsorted rows, never as a crash). */
static void decode_run(const trace_stream *s, const uint32_t *in, uint32_t n, uint32_t *out)
{
    if (!s->ts->delta_coded) {
        memcpy(out, in, (size_t)n * sizeof *out);
        return;
    }
    uint32_t v = 0;
    for (uint32_t i = 0; i < n; i++) out[i] = v += in[i];
}

static int trace_stream_next(sel_stream *st, sel_delta *d)
{
    trace_stream *s = (trace_stream *)st;
    if (s->failed) return dh_err("trace '%s': %s: reading on after an error", s->ts->path, s->stream);
    uint32_t p = s->pos;
    where wh = { s->ts->path, s->stream, p, "" };
    if (p == s->n_pos) {
        if (s->next_offset != s->rows_total) {
            s->failed = 1;
            return dh_err("trace '%s': %s/rows has %llu entries, its index accounts for %llu", s->ts->path,
                          s->stream, (unsigned long long)s->rows_total, (unsigned long long)s->next_offset);
        }
        return 1;
    }
    s->failed = 1; /* until this position is complete */
    const trace_index_entry *e = stream_index(s, p);
    if (!e) return -1;
    uint32_t nrows = sel_rows_at(s->shape, s->req, s->group, p), k = s->k, want = expected_sel(k, nrows);
    int key = p % s->keyframe_interval == 0;
    if (e->keyframe != key)
        return where_err(&wh, "keyframe flag is %u, expected %u (a keyframe every %u positions)", e->keyframe, key,
                         s->keyframe_interval);
    if (e->offset != s->next_offset)
        return where_err(&wh, "index offset %llu, expected %llu", (unsigned long long)e->offset,
                         (unsigned long long)s->next_offset);
    uint64_t n_stored = (uint64_t)e->n_added + e->n_removed;
    if (e->offset + n_stored > s->rows_total)
        return where_err(&wh, "needs rows %llu..%llu but %s/rows has only %llu (truncated dataset)",
                         (unsigned long long)e->offset, (unsigned long long)(e->offset + n_stored), s->stream,
                         (unsigned long long)s->rows_total);
    if (key) {
        if (e->n_removed != 0) return where_err(&wh, "keyframe lists %u removed rows, expected 0", e->n_removed);
        if (e->n_added != want)
            return where_err(&wh, "keyframe selection has %u rows, expected min(k, context rows) = min(%u, %u) = %u",
                             e->n_added, k, nrows, want);
    } else {
        if (e->n_added > want) return where_err(&wh, "adds %u rows, more than the selection's %u", e->n_added, want);
        if (e->n_removed > s->set.n_sel)
            return where_err(&wh, "removes %u rows, more than the %u selected", e->n_removed, s->set.n_sel);
    }
    const uint32_t *raw = stream_rows(s, e->offset, n_stored);
    if (!raw) return -1;

    memset(d, 0, sizeof *d);
    d->pos = p;
    d->nrows = nrows;
    if (key) {
        decode_run(s, raw, e->n_added, s->full);
        if (check_run(&wh, "keyframe", s->full, e->n_added, nrows) < 0) return -1;
        /* The true delta against the current selection: walk the selection
         * and the sorted full set together. O(context/4096 + k). */
        uint32_t na = 0, nr = 0, j = 0, n_full = e->n_added;
        SELSET_EACH(&s->set, row, {
            while (j < n_full && s->full[j] < row) s->added[na++] = s->full[j++];
            if (j < n_full && s->full[j] == row) j++;
            else s->removed[nr++] = row;
        });
        while (j < n_full) s->added[na++] = s->full[j++];
        if (selset_apply(&s->set, &wh, s->added, na, s->removed, nr, nrows, k) < 0) return -1;
        d->keyframe = 1;
        d->full = s->full;
        d->n_added = na;
        d->n_removed = nr;
    } else {
        decode_run(s, raw, e->n_added, s->added);
        decode_run(s, raw + e->n_added, e->n_removed, s->removed);
        if (selset_apply(&s->set, &wh, s->added, e->n_added, s->removed, e->n_removed, nrows, k) < 0) return -1;
        d->n_added = e->n_added;
        d->n_removed = e->n_removed;
    }
    d->added = s->added;
    d->removed = s->removed;
    d->n_sel = s->set.n_sel;
    s->next_offset += n_stored;
    s->pos++;
    /* Rows stored after the last position are an error even for a consumer
     * that never asks past it (the simulator reads exactly output_len). */
    if (s->pos == s->n_pos && s->next_offset != s->rows_total)
        return dh_err("trace '%s': %s/rows has %llu entries, its index accounts for %llu", s->ts->path, s->stream,
                      (unsigned long long)s->rows_total, (unsigned long long)s->next_offset);
    s->failed = 0;
    return 0;
}

static void trace_stream_close(sel_stream *st)
{
    trace_stream *s = (trace_stream *)st;
    if (!s) return;
    H5_LOCK();
    if (s->index_ds >= 0) H5Dclose(s->index_ds);
    if (s->rows_ds >= 0) H5Dclose(s->rows_ds);
    H5_UNLOCK();
    free(s->ix);
    free(s->rb);
    free(s->added);
    free(s->removed);
    free(s->full);
    selset_release(&s->set);
    free(s);
}

static int trace_stream_open(sel_source *src, uint32_t req, uint32_t group, sel_stream **out)
{
    trace_src *ts = src->impl;
    const trace_shape *sh = &src->meta.shape;
    if (req >= sh->n_requests || group >= sh->n_groups)
        return dh_err("trace '%s': no stream for request %u, group %u (%u requests, %u groups)", ts->path, req,
                      group, sh->n_requests, sh->n_groups);
    trace_stream *s = dh_calloc(1, sizeof *s);
    s->head.ops = src->ops;
    s->ts = ts;
    s->shape = sh;
    s->req = req;
    s->group = group;
    s->n_pos = sh->output_len[req];
    s->k = sh->group_k[group];
    s->keyframe_interval = src->meta.keyframe_interval;
    s->index_ds = s->rows_ds = -1;
    snprintf(s->stream, sizeof s->stream, "/req/%u/g/%u", req, group);
    char name[96];
    uint64_t n_index = 0;
    H5_LOCK();
    h5_quiet();
    snprintf(name, sizeof name, "%s/index", s->stream);
    s->index_ds = open_1d(ts, name, H5T_COMPOUND, &n_index, &s->ix_chunk, &s->ix_inflate);
    if (s->index_ds >= 0) {
        snprintf(name, sizeof name, "%s/rows", s->stream);
        s->rows_ds = open_1d(ts, name, H5T_INTEGER, &s->rows_total, &s->rows_chunk, &s->rows_inflate);
    }
    int index_ok = s->index_ds < 0 || check_index_type(ts, s->index_ds, s->stream) == 0;
    /* Rows are read as u32: a wider or signed type could lose values silently. */
    int rows_ok = 1;
    if (index_ok && s->rows_ds >= 0) {
        hid_t t = H5Dget_type(s->rows_ds);
        rows_ok = t >= 0 && H5Tget_sign(t) == H5T_SGN_NONE && H5Tget_size(t) <= 4;
        if (t >= 0) H5Tclose(t);
    }
    H5_UNLOCK();
    if (s->index_ds < 0 || s->rows_ds < 0 || !index_ok) goto fail;
    if (!rows_ok) {
        dh_err("trace '%s': dataset '%s/rows' is not an unsigned integer of at most 32 bits", ts->path, s->stream);
        goto fail;
    }
    if (n_index != s->n_pos) {
        dh_err("trace '%s': %s/index has %llu positions, expected output_len %u", ts->path, s->stream,
               (unsigned long long)n_index, s->n_pos);
        goto fail;
    }
    if (s->n_pos == 0 && s->rows_total != 0) {
        dh_err("trace '%s': %s/rows has %llu entries after the stream's last position", ts->path, s->stream,
               (unsigned long long)s->rows_total);
        goto fail;
    }
    /* Chunk sizes come from the file; cap them so a hostile file cannot make
     * us allocate without bound. */
    if (s->ix_chunk > 65536) s->ix_chunk = 65536;
    if (s->rows_chunk > (1u << 20)) s->rows_chunk = 1u << 20;
    /* A selection never exceeds the stream's largest context, whatever k says;
     * sizes come from the file, so a failed allocation is an error, not a crash. */
    uint32_t rows_max = stream_rows_max(sh, req, group);
    size_t sel_max = s->k < rows_max ? s->k : rows_max;
    s->ix = dh_malloc(s->ix_chunk * sizeof *s->ix);
    s->added = malloc((sel_max + 1) * sizeof *s->added);
    s->removed = malloc((sel_max + 1) * sizeof *s->removed);
    s->full = malloc((sel_max + 1) * sizeof *s->full);
    if (selset_init(&s->set, rows_max) < 0 || !s->added || !s->removed || !s->full) {
        dh_err("trace '%s': %s: out of memory for a selection of %zu rows in a context of %u rows", ts->path,
               s->stream, sel_max, rows_max);
        goto fail;
    }
    *out = (sel_stream *)s;
    return 0;
fail:
    trace_stream_close((sel_stream *)s);
    return -1;
}

static void trace_src_free(sel_source *src)
{
    if (!src) return;
    trace_src *ts = src->impl;
    H5_LOCK();
    if (ts->index_mtype >= 0) H5Tclose(ts->index_mtype);
    if (ts->dapl >= 0) H5Pclose(ts->dapl);
    if (ts->file >= 0) H5Fclose(ts->file);
    H5_UNLOCK();
    free(ts->path);
    free(ts);
    trace_meta_release(&src->meta);
    free(src);
}

static const sel_source_ops trace_ops = { trace_stream_open, trace_stream_next, trace_stream_close, trace_src_free };

/* The one way an attribute is read: it must exist, be of the expected type
 * class and hold exactly one value (a scalar, or an array of one), and an
 * integer must be at most 64 bits wide, all checked before anything is read,
 * so that no file can make HDF5 write more than one value into our buffer.
 * Returns the open attribute and its type (both to be closed), or -1. */
static hid_t open_attr(trace_src *ts, const char *name, H5T_class_t cls, hid_t *type)
{
    const char *what = cls == H5T_INTEGER ? "an integer" : "a string";
    *type = -1;
    if (H5Aexists(ts->file, name) <= 0) {
        dh_err("trace '%s': attribute '%s' is missing", ts->path, name);
        return -1;
    }
    hid_t a = H5Aopen(ts->file, name, H5P_DEFAULT);
    if (a < 0) {
        dh_err("trace '%s': cannot open attribute '%s' (HDF5: %s)", ts->path, name, h5_reason());
        return -1;
    }
    hid_t t = H5Aget_type(a), sp = H5Aget_space(a);
    H5S_class_t sc = sp < 0 ? H5S_NO_CLASS : H5Sget_simple_extent_type(sp);
    hssize_t npoints = sp < 0 ? -1 : H5Sget_simple_extent_npoints(sp);
    if (sp >= 0) H5Sclose(sp);
    int bad_class = t < 0 || H5Tget_class(t) != cls;
    size_t size = t < 0 ? 0 : H5Tget_size(t);
    int rc = 0;
    if (bad_class) rc = dh_err("trace '%s': attribute '%s' is not %s", ts->path, name, what);
    else if ((sc != H5S_SCALAR && sc != H5S_SIMPLE) || npoints != 1)
        rc = dh_err("trace '%s': attribute '%s' holds %lld values, expected one", ts->path, name,
                    (long long)(sc == H5S_SCALAR || sc == H5S_SIMPLE ? npoints : 0));
    else if (cls == H5T_INTEGER && (size == 0 || size > 8))
        rc = dh_err("trace '%s': attribute '%s' is an integer of %zu bytes, at most 8 allowed", ts->path, name, size);
    else if (cls == H5T_STRING && H5Tis_variable_str(t) <= 0 && (size == 0 || size > TRACE_ATTR_STR_MAX))
        rc = dh_err("trace '%s': attribute '%s' is a string of %zu bytes, at most %u allowed", ts->path, name, size,
                    TRACE_ATTR_STR_MAX);
    if (rc < 0) {
        if (t >= 0) H5Tclose(t);
        H5Aclose(a);
        return -1;
    }
    *type = t;
    return a;
}

/* Unsigned or signed integers of any width are accepted; a value that does
 * not fit (negative, above max) is an error, never clamped. */
static int read_attr_uint(trace_src *ts, const char *name, uint64_t *out, uint64_t max)
{
    hid_t t, a = open_attr(ts, name, H5T_INTEGER, &t);
    if (a < 0) return -1;
    int ok, negative = 0;
    if (H5Tget_sign(t) == H5T_SGN_2) {
        int64_t v = 0;
        ok = H5Aread(a, H5T_NATIVE_INT64, &v) >= 0;
        negative = v < 0;
        *out = (uint64_t)v;
    } else {
        ok = H5Aread(a, H5T_NATIVE_UINT64, out) >= 0;
    }
    H5Tclose(t);
    H5Aclose(a);
    if (!ok) return dh_err("trace '%s': cannot read attribute '%s' (HDF5: %s)", ts->path, name, h5_reason());
    if (negative) return dh_err("trace '%s': attribute '%s' is negative", ts->path, name);
    if (*out > max) return dh_err("trace '%s': attribute '%s' is %llu, at most %llu allowed", ts->path, name,
                                  (unsigned long long)*out, (unsigned long long)max);
    return 0;
}

/* A string attribute, fixed or variable length; *out malloc'd. */
static int read_attr_str(trace_src *ts, const char *name, char **out)
{
    hid_t t, a = open_attr(ts, name, H5T_STRING, &t);
    if (a < 0) return -1;
    int ok = 0;
    *out = NULL;
    if (H5Tis_variable_str(t) > 0) {
        char *v = NULL;
        hid_t mt = H5Tcopy(H5T_C_S1);
        if (mt >= 0 && H5Tset_size(mt, H5T_VARIABLE) >= 0 && H5Tset_cset(mt, H5Tget_cset(t)) >= 0 &&
            H5Aread(a, mt, &v) >= 0) {
            size_t n = v ? strnlen(v, TRACE_ATTR_STR_MAX + 1) : 0;
            if (n <= TRACE_ATTR_STR_MAX) {
                *out = dh_malloc(n + 1);
                memcpy(*out, v ? v : "", n);
                (*out)[n] = 0;
                ok = 1;
            } else ok = -1;
        }
        if (v) H5free_memory(v);
        if (mt >= 0) H5Tclose(mt);
    } else {
        /* The size was bounded by open_attr; one value of it is read. */
        size_t n = H5Tget_size(t);
        char *v = dh_calloc(n + 1, 1);
        hid_t mt = H5Tcopy(t);
        if (mt >= 0 && H5Aread(a, mt, v) >= 0) {
            *out = v;
            ok = 1;
        } else free(v);
        if (mt >= 0) H5Tclose(mt);
    }
    H5Tclose(t);
    H5Aclose(a);
    if (ok < 0) return dh_err("trace '%s': attribute '%s' is longer than %u characters", ts->path, name, TRACE_ATTR_STR_MAX);
    if (!ok) return dh_err("trace '%s': cannot read attribute '%s' (HDF5: %s)", ts->path, name, h5_reason());
    return 0;
}

static int read_attr_name(trace_src *ts, const char *name, char *dst, size_t cap)
{
    char *v;
    if (read_attr_str(ts, name, &v) < 0) return -1;
    int rc = strlen(v) < cap ? 0 : dh_err("trace '%s': attribute '%s' is longer than %zu characters", ts->path, name, cap - 1);
    if (rc == 0) strcpy(dst, v);
    free(v);
    return rc;
}

/* A small u32 dataset of the shape, read whole (its size is checked first).
 * Any integer type is accepted (h5py writes int64 by default); each value
 * must fit in 0 .. 2^32-1. */
static int read_shape_u32(trace_src *ts, const char *name, uint32_t n, uint32_t **out)
{
    uint64_t len;
    size_t inflate;
    hid_t d = open_1d(ts, name, H5T_INTEGER, &len, NULL, &inflate);
    if (d < 0) return -1;
    if (len != n) {
        H5Dclose(d);
        return dh_err("trace '%s': dataset '%s' has %llu entries, expected %u", ts->path, name,
                      (unsigned long long)len, n);
    }
    hid_t t = H5Dget_type(d);
    int is_signed = t >= 0 && H5Tget_sign(t) == H5T_SGN_2;
    size_t width = t >= 0 ? H5Tget_size(t) : 0;
    if (t >= 0) H5Tclose(t);
    /* Wider than 64 bits would be clamped by HDF5's conversion. */
    if (width == 0 || width > 8) {
        H5Dclose(d);
        return dh_err("trace '%s': dataset '%s' is an integer of %zu bytes, at most 8 allowed", ts->path, name, width);
    }
    int64_t *wide = dh_calloc(n, sizeof *wide);
    inflate_expect = inflate;
    int rc = n && H5Dread(d, is_signed ? H5T_NATIVE_INT64 : H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                          wide) < 0 ? -1 : 0;
    inflate_expect = 0;
    if (rc < 0) h5_capture();
    H5Dclose(d);
    if (rc < 0) {
        free(wide);
        return dh_err("trace '%s': cannot read dataset '%s' (HDF5: %s)", ts->path, name, h5_reason());
    }
    *out = dh_calloc(n, sizeof **out);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t v = (uint64_t)wide[i];
        if ((is_signed && wide[i] < 0) || v > UINT32_MAX) {
            free(wide);
            return dh_err("trace '%s': dataset '%s' entry %u is out of range", ts->path, name, i);
        }
        (*out)[i] = (uint32_t)v;
    }
    free(wide);
    return 0;
}

static int read_meta(trace_src *ts, trace_meta *m)
{
    uint64_t v;
    if (read_attr_uint(ts, "format_version", &v, UINT32_MAX) < 0) return -1;
    if (v != TRACE_FORMAT_VERSION)
        return dh_err("trace '%s': format_version %llu is not supported (this build reads version %d)", ts->path,
                      (unsigned long long)v, TRACE_FORMAT_VERSION);
    m->format_version = (uint32_t)v;
    trace_shape *sh = &m->shape;
    if (read_attr_name(ts, "model", sh->model, sizeof sh->model) < 0) return -1;
    /* The counts size the shape arrays, read whole: bounded far above any
     * workload (16M requests, 64K layers) so that a file claiming 2^32 of them
     * over sparse chunked datasets cannot make us allocate gigabytes. */
    if (read_attr_uint(ts, "n_requests", &v, TRACE_MAX_REQUESTS) < 0) return -1;
    sh->n_requests = (uint32_t)v;
    if (read_attr_uint(ts, "n_layers", &v, TRACE_MAX_LAYERS) < 0) return -1;
    sh->n_layers = (uint32_t)v;
    if (read_attr_uint(ts, "n_groups", &v, TRACE_MAX_LAYERS) < 0) return -1;
    sh->n_groups = (uint32_t)v;
    if (read_attr_uint(ts, "keyframe_interval", &v, UINT32_MAX) < 0) return -1;
    if (v == 0) return dh_err("trace '%s': attribute 'keyframe_interval' is 0", ts->path);
    m->keyframe_interval = (uint32_t)v;
    if (read_attr_uint(ts, "seed", &m->seed, UINT64_MAX) < 0) return -1;
    if (read_attr_name(ts, "generator", m->generator, sizeof m->generator) < 0 ||
        read_attr_name(ts, "preset", m->preset, sizeof m->preset) < 0 ||
        read_attr_str(ts, "generator_params", &m->generator_params) < 0)
        return -1;
    /* row_coding is optional: "delta" (what this writer produces) or "plain". */
    ts->delta_coded = 0;
    if (H5Aexists(ts->file, "row_coding") > 0) {
        char coding[16];
        if (read_attr_name(ts, "row_coding", coding, sizeof coding) < 0) return -1;
        if (!strcmp(coding, "delta")) ts->delta_coded = 1;
        else if (strcmp(coding, "plain"))
            return dh_err("trace '%s': attribute 'row_coding' is '%s', expected 'delta' or 'plain'", ts->path, coding);
    }
    /* The shape arrays are sized by the attributes, so a file cannot make us
     * allocate more than it claims; HDF5 checks each dataset's extent. */
    if (read_shape_u32(ts, "layer_group", sh->n_layers, &sh->layer_group) < 0 ||
        read_shape_u32(ts, "group_k", sh->n_groups, &sh->group_k) < 0 ||
        read_shape_u32(ts, "group_compress", sh->n_groups, &sh->group_compress) < 0 ||
        read_shape_u32(ts, "requests/prompt_len", sh->n_requests, &sh->prompt_len) < 0 ||
        read_shape_u32(ts, "requests/output_len", sh->n_requests, &sh->output_len) < 0)
        return -1;
    if (trace_shape_validate(sh) < 0) return dh_err_prefix("trace '%s': ", ts->path);
    return 0;
}

int trace_open(const char *path, sel_source **out)
{
    sel_source *src = dh_calloc(1, sizeof *src);
    trace_src *ts = dh_calloc(1, sizeof *ts);
    src->ops = &trace_ops;
    src->impl = ts;
    ts->path = strdup(path);
    ts->file = ts->dapl = ts->index_mtype = -1;
    DH_BUG_ON(!ts->path);

    H5_LOCK();
    h5_quiet();
    int rc = -1;
    if (access(path, R_OK) != 0) {
        dh_err("trace '%s': cannot read the file", path);
        goto out;
    }
    /* HDF5 1.10.8 trusts sizes and indices of several structures it reads;
     * a damaged one is rejected here, before HDF5 sees it (h5pre.h). */
    if (h5pre_check(path) < 0) goto out;
    htri_t is = H5Fis_hdf5(path);
    if (is <= 0) {
        dh_err("trace '%s': not an HDF5 file", path);
        goto out;
    }
    ts->file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (ts->file < 0) {
        dh_err("trace '%s': cannot open (HDF5: %s)", path, h5_reason());
        goto out;
    }
    ts->dapl = H5Pcreate(H5P_DATASET_ACCESS);
    ts->index_mtype = index_mem_type();
    if (ts->dapl < 0 || H5Pset_chunk_cache(ts->dapl, H5D_CHUNK_CACHE_NSLOTS_DEFAULT, 0, 1.0) < 0 || ts->index_mtype < 0) {
        dh_err("trace '%s': cannot set up HDF5 properties (HDF5: %s)", path, h5_reason());
        goto out;
    }
    rc = read_meta(ts, &src->meta);
out:
    H5_UNLOCK();
    if (rc < 0) {
        trace_src_free(src);
        return -1;
    }
    *out = src;
    return 0;
}

int trace_check(const char *path, trace_progress_fn progress, void *arg)
{
    sel_source *src;
    if (trace_open(path, &src) < 0) return -1;
    const trace_shape *sh = &sel_meta(src)->shape;
    uint64_t total = (uint64_t)sh->n_requests * sh->n_groups, done = 0;
    int rc = 0;
    for (uint32_t r = 0; r < sh->n_requests && rc == 0; r++)
        for (uint32_t g = 0; g < sh->n_groups && rc == 0; g++) {
            sel_stream *st;
            if (sel_open(src, r, g, &st) < 0) { rc = -1; break; }
            sel_delta d;
            int n;
            while ((n = sel_next(st, &d)) == 0) {}
            sel_close(st);
            if (n < 0) rc = -1;
            else if (progress) progress(++done, total, arg);
        }
    sel_source_free(src);
    return rc;
}
