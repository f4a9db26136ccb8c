/* test_trace.c: the HDF5 trace format (traces/trace.c) and the in-memory
 * source (traces/memsrc.c).
 *
 * - Round trip: hand-built selections (memsrc) written with trace_write and
 *   streamed back with trace_open give the same deltas, and the selection
 *   rebuilt from the deltas equals the stored full set at every position
 *   (keyframe + delta decoding against the reference).
 * - Same input, same bytes; a bad source leaves no file behind.
 * - Every bad-file case, each built with the plain HDF5 API (not with our
 *   writer) so the reader is tested against the documented schema: one clear
 *   error naming the file, dataset and position, never a crash.
 * - Streaming memory: heap in use while a long stream is read stays far below
 *   the stream's size, and the measurement flags a reader that loads it whole.
 * - When the generator exists: a file written from gen_source_new() equals
 *   the in-memory generator stream row for row. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <hdf5.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <pthread.h>
#include <unistd.h>

#include "common/dh_err.h"
#include "traces/gen.h"
#include "traces/memsrc.h"
#include "traces/trace.h"

static char tmpdir[] = "/tmp/test_trace.XXXXXX";

static const char *tpath(const char *name)
{
    static char buf[4][256];
    static int i;
    i = (i + 1) % 4;
    snprintf(buf[i], sizeof buf[i], "%s/%s", tmpdir, name);
    return buf[i];
}

#include "test_rand.h" /* rnd(), cmp_u32(): test content independent of the code under test */

/* Evolve a selection: drop `churn` random rows, then fill up to min(k, nrows)
 * with random unselected rows. sel is sorted on return. */
static uint32_t evolve(uint32_t *sel, uint32_t n, uint32_t k, uint32_t nrows, uint32_t churn, unsigned char *in)
{
    for (uint32_t c = 0; c < churn && n; c++) {
        uint32_t i = rnd(n);
        in[sel[i]] = 0;
        sel[i] = sel[--n];
    }
    uint32_t want = k < nrows ? k : nrows;
    while (n < want) {
        uint32_t row = rnd(nrows);
        if (in[row]) continue;
        in[row] = 1;
        sel[n++] = row;
    }
    qsort(sel, n, sizeof *sel, cmp_u32);
    return n;
}

/* Fill every stream of a memsrc with evolving selections; returns the source. */
static sel_source *make_memsrc(const trace_shape *sh, uint32_t kfi, uint32_t churn)
{
    sel_source *src;
    assert_int_equal(memsrc_new(sh, kfi, 42, &src), 0);
    for (uint32_t r = 0; r < sh->n_requests; r++)
        for (uint32_t g = 0; g < sh->n_groups; g++) {
            uint32_t k = sh->group_k[g], maxrows = sel_rows_at(sh, r, g, sh->output_len[r] ? sh->output_len[r] - 1 : 0);
            uint32_t *sel = calloc(k, sizeof *sel), n = 0;
            unsigned char *in = calloc(maxrows + 1, 1);
            for (uint32_t p = 0; p < sh->output_len[r]; p++) {
                n = evolve(sel, n, k, sel_rows_at(sh, r, g, p), churn, in);
                memsrc_put(src, r, g, p, sel, n);
            }
            free(sel);
            free(in);
        }
    return src;
}

/* A non-uniform shape: two requests, three layers in two groups, one group
 * compressed, a prompt shorter than k so the selection grows at first. */
static void small_shape(trace_shape *sh)
{
    assert_int_equal(trace_shape_uniform(sh, "test-model", 2, 3, 2, 8, 5, 23), 0);
    sh->group_k[1] = 6;
    sh->group_compress[1] = 2;
    sh->prompt_len[1] = 40;
    sh->output_len[1] = 17;
}

static void expect_same_delta(const sel_delta *a, const sel_delta *b)
{
    assert_int_equal(a->pos, b->pos);
    assert_int_equal(a->nrows, b->nrows);
    assert_int_equal(a->n_sel, b->n_sel);
    assert_int_equal(a->keyframe, b->keyframe);
    assert_int_equal(a->n_added, b->n_added);
    assert_int_equal(a->n_removed, b->n_removed);
    if (a->n_added) assert_memory_equal(a->added, b->added, a->n_added * sizeof(uint32_t));
    if (a->n_removed) assert_memory_equal(a->removed, b->removed, a->n_removed * sizeof(uint32_t));
    if (a->keyframe && a->n_sel) assert_memory_equal(a->full, b->full, a->n_sel * sizeof(uint32_t));
}

/* Stream two sources side by side and require identical deltas, and the
 * selection rebuilt from b's deltas to equal a's full set at a's keyframes. */
static void expect_same_source(sel_source *a, sel_source *b)
{
    const trace_shape *sh = &sel_meta(a)->shape;
    for (uint32_t r = 0; r < sh->n_requests; r++)
        for (uint32_t g = 0; g < sh->n_groups; g++) {
            sel_stream *sa, *sb;
            assert_int_equal(sel_open(a, r, g, &sa), 0);
            assert_int_equal(sel_open(b, r, g, &sb), 0);
            uint32_t maxrows = sel_rows_at(sh, r, g, sh->output_len[r]) + 1;
            unsigned char *in = calloc(maxrows, 1);
            uint32_t n_in = 0;
            for (;;) {
                sel_delta da, db;
                int ra = sel_next(sa, &da), rb = sel_next(sb, &db);
                if (ra < 0 || rb < 0) fprintf(stderr, "%s\n", dh_errmsg());
                assert_int_equal(ra, rb);
                if (ra == 1) break;
                assert_int_equal(ra, 0);
                expect_same_delta(&da, &db);
                for (uint32_t i = 0; i < db.n_removed; i++) { assert_true(in[db.removed[i]]); in[db.removed[i]] = 0; n_in--; }
                for (uint32_t i = 0; i < db.n_added; i++) { assert_false(in[db.added[i]]); in[db.added[i]] = 1; n_in++; }
                assert_int_equal(n_in, db.n_sel);
                if (da.keyframe)
                    for (uint32_t i = 0; i < da.n_sel; i++) assert_true(in[da.full[i]]);
            }
            free(in);
            sel_close(sa);
            sel_close(sb);
        }
}

static void progress_count(uint64_t done, uint64_t total, void *arg)
{
    uint64_t *last = arg;
    assert_true(done == last[0] + 1 && done <= total);
    last[0] = done;
    last[1] = total;
}

static void test_round_trip(void **state)
{
    trace_shape sh;
    small_shape(&sh);
    sel_source *mem = make_memsrc(&sh, 5, 3);
    mem->meta.generator_params = strdup("[a]\nx = 1\n");
    strcpy(mem->meta.preset, "handmade");
    uint64_t prog[2] = { 0, 0 };
    const char *path = tpath("rt.h5");
    assert_int_equal(trace_write(path, mem, progress_count, prog), 0);
    assert_int_equal(prog[0], 4);
    assert_int_equal(prog[1], 4);

    sel_source *file;
    assert_int_equal(trace_open(path, &file), 0);
    const trace_meta *m = sel_meta(file);
    assert_int_equal(m->format_version, TRACE_FORMAT_VERSION);
    assert_string_equal(m->shape.model, "test-model");
    assert_int_equal(m->shape.n_requests, 2);
    assert_int_equal(m->shape.n_layers, 3);
    assert_int_equal(m->shape.n_groups, 2);
    assert_memory_equal(m->shape.layer_group, sh.layer_group, 3 * sizeof(uint32_t));
    assert_memory_equal(m->shape.group_k, sh.group_k, 2 * sizeof(uint32_t));
    assert_memory_equal(m->shape.group_compress, sh.group_compress, 2 * sizeof(uint32_t));
    assert_memory_equal(m->shape.prompt_len, sh.prompt_len, 2 * sizeof(uint32_t));
    assert_memory_equal(m->shape.output_len, sh.output_len, 2 * sizeof(uint32_t));
    assert_int_equal(m->keyframe_interval, 5);
    assert_int_equal(m->seed, 42);
    assert_string_equal(m->generator, "memsrc");
    assert_string_equal(m->preset, "handmade");
    assert_string_equal(m->generator_params, "[a]\nx = 1\n");
    expect_same_source(mem, file);
    assert_int_equal(trace_check(path, NULL, NULL), 0);
    sel_source_free(file);
    sel_source_free(mem);
    trace_shape_release(&sh);
}

/* The reader must work out the true delta on a keyframe: a selection that
 * changes completely at a keyframe must come out as all-removed, all-added. */
static void test_keyframe_true_delta(void **state)
{
    trace_shape sh;
    assert_int_equal(trace_shape_uniform(&sh, "m", 1, 1, 1, 3, 10, 4), 0);
    sel_source *mem;
    assert_int_equal(memsrc_new(&sh, 2, 1, &mem), 0);
    uint32_t s0[] = { 0, 1, 2 }, s1[] = { 1, 2, 9 }, s2[] = { 3, 4, 5 }, s3[] = { 3, 4, 12 };
    memsrc_put(mem, 0, 0, 0, s0, 3);
    memsrc_put(mem, 0, 0, 1, s1, 3);
    memsrc_put(mem, 0, 0, 2, s2, 3);
    memsrc_put(mem, 0, 0, 3, s3, 3);
    const char *path = tpath("kf.h5");
    assert_int_equal(trace_write(path, mem, NULL, NULL), 0);
    sel_source *file;
    assert_int_equal(trace_open(path, &file), 0);
    sel_stream *st;
    sel_delta d;
    assert_int_equal(sel_open(file, 0, 0, &st), 0);
    assert_int_equal(sel_next(st, &d), 0);
    assert_int_equal(sel_next(st, &d), 0);
    assert_int_equal(sel_next(st, &d), 0);
    assert_int_equal(d.pos, 2);
    assert_true(d.keyframe);
    assert_int_equal(d.n_added, 3);
    assert_int_equal(d.n_removed, 3);
    assert_memory_equal(d.added, s2, sizeof s2);
    assert_memory_equal(d.removed, s1, sizeof s1);
    assert_memory_equal(d.full, s2, sizeof s2);
    assert_int_equal(sel_next(st, &d), 0);
    assert_false(d.keyframe);
    assert_null(d.full);
    assert_int_equal(d.n_added, 1);
    assert_int_equal(d.added[0], 12);
    assert_int_equal(d.removed[0], 5);
    assert_int_equal(sel_next(st, &d), 1);
    sel_close(st);
    sel_source_free(file);
    sel_source_free(mem);
    trace_shape_release(&sh);
}

static long file_size(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

static int same_bytes(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int same = fa && fb;
    while (same) {
        int x = fgetc(fa), y = fgetc(fb);
        if (x != y) same = 0;
        if (x == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

static void test_same_bytes(void **state)
{
    trace_shape sh;
    small_shape(&sh);
    rnd_state = 7;
    sel_source *a = make_memsrc(&sh, 4, 2);
    rnd_state = 7;
    sel_source *b = make_memsrc(&sh, 4, 2);
    assert_int_equal(trace_write(tpath("same1.h5"), a, NULL, NULL), 0);
    assert_int_equal(trace_write(tpath("same2.h5"), b, NULL, NULL), 0);
    assert_true(same_bytes(tpath("same1.h5"), tpath("same2.h5")));
    /* The comparison can fail: a different seed attribute changes the bytes. */
    b->meta.seed = 43;
    assert_int_equal(trace_write(tpath("same3.h5"), b, NULL, NULL), 0);
    assert_false(same_bytes(tpath("same1.h5"), tpath("same3.h5")));
    sel_source_free(a);
    sel_source_free(b);
    trace_shape_release(&sh);
}

static int dir_has_prefix(const char *prefix)
{
    DIR *d = opendir(tmpdir);
    struct dirent *e;
    int found = 0;
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, prefix, strlen(prefix))) found = 1;
    closedir(d);
    return found;
}

/* A source that breaks the contract is refused and leaves no file, not even
 * a temporary one. */
static void test_bad_source_no_output(void **state)
{
    trace_shape sh;
    assert_int_equal(trace_shape_uniform(&sh, "m", 1, 1, 1, 3, 10, 4), 0);
    sel_source *mem;
    assert_int_equal(memsrc_new(&sh, 2, 1, &mem), 0);
    uint32_t s0[] = { 0, 1, 2 }, s1[] = { 1, 2 };
    memsrc_put(mem, 0, 0, 0, s0, 3);
    memsrc_put(mem, 0, 0, 1, s1, 2); /* planted: a selection of 2 rows with k = 3 */
    memsrc_put(mem, 0, 0, 2, s0, 3);
    memsrc_put(mem, 0, 0, 3, s0, 3);
    const char *path = tpath("badsrc.h5");
    assert_int_equal(trace_write(path, mem, NULL, NULL), -1);
    assert_non_null(strstr(dh_errmsg(), "position 1: selection has 2 rows"));
    assert_non_null(strstr(dh_errmsg(), "badsrc.h5"));
    assert_int_equal(access(path, F_OK), -1);
    assert_false(dir_has_prefix("badsrc.h5"));
    sel_source_free(mem);
    trace_shape_release(&sh);
}

/* ---- bad files, built with the plain HDF5 API ---------------------------- */

/* One request, one layer/group, k = 4, prompt 6, 4 positions, keyframe
 * interval 3. The valid content:
 *   pos 0 keyframe {0,1,2,3}; pos 1 +{4} -{0}; pos 2 +{6} -{1}; pos 3 keyframe {2,3,4,6}. */
typedef struct {
    uint32_t version;
    int delta_coded;
    const char *skip_attr;    /* attribute left out */
    const char *skip_dataset; /* dataset left out */
    uint32_t n_pos;           /* index entries written */
    uint32_t output_len;
    struct { uint8_t key; uint32_t na, nr; uint32_t rows[8]; } pos[6];
    int64_t offset_fix[6];    /* added to the computed offset of each position */
    int rows_trim;            /* rows left out at the end (negative: extra rows) */
    int shape_i64;            /* shape datasets as signed 64-bit, as h5py writes numpy ints */
    int64_t prompt;           /* 0: the valid 6 */
    int rows_i64;             /* the rows dataset as signed 64-bit */
} raw_spec;

static raw_spec valid_spec(void)
{
    raw_spec s = { .version = TRACE_FORMAT_VERSION, .n_pos = 4, .output_len = 4,
                   .pos = { { 1, 4, 0, { 0, 1, 2, 3 } }, { 0, 1, 1, { 4, 0 } }, { 0, 1, 1, { 6, 1 } },
                            { 1, 4, 0, { 2, 3, 4, 6 } } } };
    return s;
}

static void raw_attr_u(hid_t f, const char *name, hid_t type, uint64_t v, const raw_spec *s)
{
    if (s->skip_attr && !strcmp(s->skip_attr, name)) return;
    hid_t sp = H5Screate(H5S_SCALAR), a = H5Acreate2(f, name, type, sp, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(a >= 0);
    assert_true(H5Awrite(a, H5T_NATIVE_UINT64, &v) >= 0);
    H5Aclose(a);
    H5Sclose(sp);
}

static void raw_attr_s(hid_t f, const char *name, const char *v, const raw_spec *s)
{
    if (s->skip_attr && !strcmp(s->skip_attr, name)) return;
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, strlen(v) + 1); /* fixed-length, as some writers make them */
    hid_t sp = H5Screate(H5S_SCALAR), a = H5Acreate2(f, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(a >= 0);
    assert_true(H5Awrite(a, t, v) >= 0);
    H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(t);
}

static void raw_dataset(hid_t f, const char *name, hid_t ftype, hid_t mtype, const void *v, hsize_t n, const raw_spec *s)
{
    if (s->skip_dataset && !strcmp(s->skip_dataset, name)) return;
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t sp = H5Screate_simple(1, &n, NULL);
    hid_t d = H5Dcreate2(f, name, ftype, sp, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(d >= 0);
    if (n) assert_true(H5Dwrite(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
    H5Dclose(d);
    H5Sclose(sp);
    H5Pclose(lcpl);
}

static void raw_write(const char *path, const raw_spec *s)
{
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(f >= 0);
    raw_attr_u(f, "format_version", H5T_STD_U32LE, s->version, s);
    raw_attr_s(f, "model", "raw", s);
    raw_attr_u(f, "n_requests", H5T_STD_U32LE, 1, s);
    raw_attr_u(f, "n_layers", H5T_STD_U32LE, 1, s);
    raw_attr_u(f, "n_groups", H5T_STD_U32LE, 1, s);
    raw_attr_u(f, "keyframe_interval", H5T_STD_U32LE, 3, s);
    raw_attr_u(f, "seed", H5T_STD_U64LE, 5, s);
    raw_attr_s(f, "generator", "hand", s);
    raw_attr_s(f, "preset", "", s);
    raw_attr_s(f, "generator_params", "", s);
    raw_attr_s(f, "row_coding", s->delta_coded ? "delta" : "plain", s);
    int64_t zero = 0, k = 4, one = 1, prompt = s->prompt ? s->prompt : 6, out = s->output_len;
    hid_t st = s->shape_i64 ? H5T_STD_I64LE : H5T_STD_U32LE;
    raw_dataset(f, "layer_group", st, H5T_NATIVE_INT64, &zero, 1, s);
    raw_dataset(f, "group_k", st, H5T_NATIVE_INT64, &k, 1, s);
    raw_dataset(f, "group_compress", st, H5T_NATIVE_INT64, &one, 1, s);
    raw_dataset(f, "requests/prompt_len", st, H5T_NATIVE_INT64, &prompt, 1, s);
    raw_dataset(f, "requests/output_len", st, H5T_NATIVE_INT64, &out, 1, s);

    /* The index as the README documents it: a compound of offset (u64),
     * n_added (u32), n_removed (u32), keyframe (u8). */
    struct ent { uint64_t offset; uint32_t n_added, n_removed; uint8_t keyframe; } ix[6];
    memset(ix, 0, sizeof ix); /* the padding too: this memory type is also the file type */
    hid_t mt = H5Tcreate(H5T_COMPOUND, sizeof(struct ent));
    H5Tinsert(mt, "offset", offsetof(struct ent, offset), H5T_NATIVE_UINT64);
    H5Tinsert(mt, "n_added", offsetof(struct ent, n_added), H5T_NATIVE_UINT32);
    H5Tinsert(mt, "n_removed", offsetof(struct ent, n_removed), H5T_NATIVE_UINT32);
    H5Tinsert(mt, "keyframe", offsetof(struct ent, keyframe), H5T_NATIVE_UINT8);
    uint32_t rows[64];
    uint64_t n_rows = 0;
    for (uint32_t p = 0; p < s->n_pos; p++) {
        ix[p].offset = n_rows + s->offset_fix[p];
        ix[p].n_added = s->pos[p].na;
        ix[p].n_removed = s->pos[p].nr;
        ix[p].keyframe = s->pos[p].key;
        /* Runs: the added (or full) rows, then the removed rows. */
        uint32_t runs[2] = { s->pos[p].na, s->pos[p].nr }, i = 0;
        for (int run = 0; run < 2; run++) {
            uint32_t prev = 0;
            for (uint32_t j = 0; j < runs[run]; j++, i++) {
                uint32_t v = s->pos[p].rows[i];
                rows[n_rows++] = s->delta_coded ? v - prev : v;
                prev = v;
            }
        }
    }
    raw_dataset(f, "req/0/g/0/index", mt, mt, ix, s->n_pos, s);
    if (s->rows_trim < 0) rows[n_rows] = 1;
    raw_dataset(f, "req/0/g/0/rows", s->rows_i64 ? H5T_STD_I64LE : H5T_STD_U32LE, H5T_NATIVE_UINT32, rows,
                n_rows - s->rows_trim, s);
    H5Tclose(mt);
    assert_true(H5Fclose(f) >= 0);
}

/* Write the spec, check it, expect failure with every fragment in the message. */
static void expect_bad(const raw_spec *s, const char *name, const char *frag1, const char *frag2)
{
    const char *path = tpath(name);
    raw_write(path, s);
    int rc = trace_check(path, NULL, NULL);
    if (rc != -1 || !strstr(dh_errmsg(), frag1) || (frag2 && !strstr(dh_errmsg(), frag2)) ||
        !strstr(dh_errmsg(), path) || strchr(dh_errmsg(), '\n'))
        fail_msg("%s: rc %d, message \"%s\", expected \"%s\" and \"%s\"", name, rc, dh_errmsg(), frag1,
                 frag2 ? frag2 : "");
}

static void test_raw_valid(void **state)
{
    /* The hand-built file is valid in both codings, so each bad case below
     * fails for its planted fault only. */
    raw_spec s = valid_spec();
    raw_write(tpath("raw_plain.h5"), &s);
    if (trace_check(tpath("raw_plain.h5"), NULL, NULL) < 0) fail_msg("%s", dh_errmsg());
    s.delta_coded = 1;
    raw_write(tpath("raw_delta.h5"), &s);
    if (trace_check(tpath("raw_delta.h5"), NULL, NULL) < 0) fail_msg("%s", dh_errmsg());
    s.shape_i64 = 1; /* h5py's default integers for the shape are fine */
    raw_write(tpath("raw_i64.h5"), &s);
    if (trace_check(tpath("raw_i64.h5"), NULL, NULL) < 0) fail_msg("%s", dh_errmsg());
    /* And it decodes to the documented selections. */
    sel_source *src;
    sel_stream *st;
    sel_delta d;
    assert_int_equal(trace_open(tpath("raw_delta.h5"), &src), 0);
    assert_int_equal(sel_open(src, 0, 0, &st), 0);
    for (int p = 0; p < 4; p++) assert_int_equal(sel_next(st, &d), 0);
    uint32_t last[] = { 2, 3, 4, 6 };
    assert_memory_equal(d.full, last, sizeof last);
    assert_int_equal(d.n_added + d.n_removed, 0);
    sel_close(st);
    sel_source_free(src);
}

static void test_raw_bad(void **state)
{
    for (int coding = 0; coding < 2; coding++) {
        raw_spec s;
#define CASE(name, edit, f1, f2) do { s = valid_spec(); s.delta_coded = coding; edit; expect_bad(&s, name, f1, f2); } while (0)
        CASE("wrong_version.h5", s.version = 2, "format_version 2 is not supported", NULL);
        CASE("no_version.h5", s.skip_attr = "format_version", "attribute 'format_version' is missing", NULL);
        CASE("no_seed.h5", s.skip_attr = "seed", "attribute 'seed' is missing", NULL);
        CASE("no_group_k.h5", s.skip_dataset = "group_k", "dataset 'group_k' is missing", NULL);
        CASE("no_rows.h5", s.skip_dataset = "req/0/g/0/rows", "dataset '/req/0/g/0/rows' is missing", NULL);
        CASE("no_index.h5", s.skip_dataset = "req/0/g/0/index", "dataset '/req/0/g/0/index' is missing", NULL);
        CASE("unsorted.h5", (s.pos[0].rows[1] = 2, s.pos[0].rows[2] = 1),
             "/req/0/g/0 position 0: keyframe rows are not sorted (row 1 follows row 2)", NULL);
        CASE("duplicate.h5", s.pos[0].rows[2] = 1, "/req/0/g/0 position 0: keyframe row 1 appears twice", NULL);
        CASE("removes_unselected.h5", s.pos[1].rows[1] = 5, "/req/0/g/0 position 1: removes row 5 which is not selected", NULL);
        CASE("adds_selected.h5", s.pos[1].rows[0] = 1, "/req/0/g/0 position 1: adds row 1 which is already selected", NULL);
        CASE("beyond_context.h5", s.pos[1].rows[0] = 7, "/req/0/g/0 position 1: added row 7 is beyond the context (7 rows)", NULL);
        CASE("keyframe_beyond.h5", s.pos[3].rows[3] = 9, "/req/0/g/0 position 3: keyframe row 9 is beyond the context (9 rows)", NULL);
        CASE("keyframe_size.h5", s.pos[0].na = 3, "/req/0/g/0 position 0: keyframe selection has 3 rows, expected", "= 4");
        CASE("delta_size.h5", (s.pos[1].na = 2, s.pos[1].rows[1] = 5, s.pos[1].rows[2] = 0),
             "/req/0/g/0 position 1: selection has 5 rows", "= 4");
        CASE("keyframe_flag.h5", s.pos[1].key = 1, "/req/0/g/0 position 1: keyframe flag is 1, expected 0", NULL);
        CASE("offset.h5", s.offset_fix[2] = 1, "/req/0/g/0 position 2: index offset 7, expected 6", NULL);
        CASE("truncated_rows.h5", s.rows_trim = 2, "/req/0/g/0 position 3: needs rows 8..12", "truncated dataset");
        CASE("extra_rows.h5", s.rows_trim = -1, "/req/0/g/0/rows has 13 entries, its index accounts for 12", NULL);
        CASE("negative_prompt.h5", (s.shape_i64 = 1, s.prompt = -6), "dataset 'requests/prompt_len' entry 0 is out of range", NULL);
        CASE("rows_i64.h5", s.rows_i64 = 1, "dataset '/req/0/g/0/rows' is not an unsigned integer of at most 32 bits", NULL);
        CASE("short_index.h5", s.n_pos = 3, "/req/0/g/0/index has 3 positions, expected output_len 4", NULL);
#undef CASE
    }
}

/* File-level damage: a truncated copy of a good trace and a garbage file. */
static void test_damaged_files(void **state)
{
    trace_shape sh;
    small_shape(&sh);
    sel_source *mem = make_memsrc(&sh, 5, 3);
    const char *good = tpath("good.h5"), *cut = tpath("cut.h5"), *junk = tpath("junk.h5");
    assert_int_equal(trace_write(good, mem, NULL, NULL), 0);
    long n = file_size(good);
    assert_true(n > 1000);
    FILE *in = fopen(good, "rb"), *out = fopen(cut, "wb");
    for (long i = 0; i < n / 2; i++) fputc(fgetc(in), out);
    fclose(in);
    fclose(out);
    assert_int_equal(trace_check(cut, NULL, NULL), -1);
    assert_non_null(strstr(dh_errmsg(), "cut.h5"));
    assert_null(strchr(dh_errmsg(), '\n'));
    out = fopen(junk, "wb");
    for (int i = 0; i < 5000; i++) fputc(rnd(256), out);
    fclose(out);
    assert_int_equal(trace_check(junk, NULL, NULL), -1);
    assert_non_null(strstr(dh_errmsg(), "trace '"));
    assert_non_null(strstr(dh_errmsg(), "junk.h5': not an HDF5 file"));
    assert_int_equal(trace_check(tpath("absent.h5"), NULL, NULL), -1);
    assert_non_null(strstr(dh_errmsg(), "absent.h5': cannot read the file"));
    sel_source_free(mem);
    trace_shape_release(&sh);
}

/* ---- streaming memory -------------------------------------------------- */

static size_t heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd; /* small blocks + mmap'd large blocks */
}

/* Read the stream, return the peak heap growth over the level before open.
 * plant_whole_read reads the whole rows dataset first, as a reader that does
 * not stream would: the measurement must catch it. */
static size_t stream_peak(const char *path, int plant_whole_read, uint64_t *rows_read)
{
    size_t base = heap_in_use(), peak = 0;
    sel_source *src;
    sel_stream *st;
    sel_delta d;
    assert_int_equal(trace_open(path, &src), 0);
    uint32_t *whole = NULL;
    if (plant_whole_read) {
        hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT), ds = H5Dopen2(f, "/req/0/g/0/rows", H5P_DEFAULT);
        hid_t sp = H5Dget_space(ds);
        hsize_t n;
        H5Sget_simple_extent_dims(sp, &n, NULL);
        whole = malloc(n * sizeof *whole);
        assert_true(H5Dread(ds, H5T_NATIVE_UINT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, whole) >= 0);
        H5Sclose(sp);
        H5Dclose(ds);
        H5Fclose(f);
    }
    assert_int_equal(sel_open(src, 0, 0, &st), 0);
    *rows_read = 0;
    int rc;
    while ((rc = sel_next(st, &d)) == 0) {
        size_t now = heap_in_use();
        if (now > base && now - base > peak) peak = now - base;
        *rows_read += d.n_added + d.n_removed;
    }
    assert_int_equal(rc, 1);
    sel_close(st);
    sel_source_free(src);
    free(whole);
    return peak;
}

static const char *write_long(const char *name, uint32_t n_pos)
{
    trace_shape sh;
    assert_int_equal(trace_shape_uniform(&sh, "m", 1, 1, 1, 512, 20000, n_pos), 0);
    sel_source *mem = make_memsrc(&sh, 64, 100);
    const char *path = tpath(name);
    assert_int_equal(trace_write(path, mem, NULL, NULL), 0);
    sel_source_free(mem);
    trace_shape_release(&sh);
    return path;
}

/* Memory must not grow with the stream: a stream four times longer may not
 * raise the reader's peak heap by more than a small part of the extra rows.
 * (The absolute peak is dominated by HDF5's own per-file metadata cache.) */
static void test_streaming_memory(void **state)
{
    if (heap_in_use() == 0) skip(); /* no heap figures (e.g. under valgrind) */
    const char *shorter = write_long("short.h5", 750), *longer = write_long("long.h5", 3000);
    uint64_t rows_short, rows_long;
    size_t peak_short = stream_peak(shorter, 0, &rows_short), peak_long = stream_peak(longer, 0, &rows_long);
    size_t extra_bytes = (rows_long - rows_short) * sizeof(uint32_t);
    assert_true(rows_long > 500000);
    if (peak_long > peak_short + extra_bytes / 16)
        fail_msg("reader peak heap grows with the stream: %zu bytes for %llu rows, %zu for %llu", peak_short,
                 (unsigned long long)rows_short, peak_long, (unsigned long long)rows_long);
    if (getenv("TRACE_TEST_VERBOSE")) fprintf(stderr, "peak %zu (%llu rows) vs %zu (%llu rows)\n", peak_short, (unsigned long long)rows_short, peak_long, (unsigned long long)rows_long);
    /* The planted fault: a reader that loads the whole rows dataset. */
    size_t planted_short = stream_peak(shorter, 1, &rows_short), planted_long = stream_peak(longer, 1, &rows_long);
    if (planted_long <= planted_short + extra_bytes / 16)
        fail_msg("whole-stream read went unnoticed: peak %zu vs %zu bytes", planted_long, planted_short);
}

/* ---- reading from several threads ------------------------------------- */

/* A digest of a whole stream (FNV-1a over every delta). */
static uint64_t stream_digest(sel_source *src, uint32_t r, uint32_t g)
{
    uint64_t h = 1469598103934665603ull;
    sel_stream *st;
    sel_delta d;
    if (sel_open(src, r, g, &st) < 0) return 0;
    int rc;
    while ((rc = sel_next(st, &d)) == 0) {
        uint32_t head[4] = { d.pos, d.n_sel, d.n_added, d.n_removed };
        const uint32_t *parts[3] = { head, d.added, d.removed };
        uint32_t lens[3] = { 4, d.n_added, d.n_removed };
        for (int p = 0; p < 3; p++)
            for (uint32_t i = 0; i < lens[p]; i++) h = (h ^ parts[p][i]) * 1099511628211ull;
    }
    sel_close(st);
    return rc == 1 ? h : 0;
}

typedef struct {
    sel_source *src;
    uint32_t n_req, n_grp, start;
    uint64_t digest[64];
} reader_job;

static void *reader_thread(void *arg)
{
    reader_job *j = arg;
    uint32_t n = j->n_req * j->n_grp;
    /* Each thread walks the streams in its own order. */
    for (uint32_t i = 0; i < n; i++) {
        uint32_t s = (i * 7 + j->start) % n;
        j->digest[s] = stream_digest(j->src, s / j->n_grp, s % j->n_grp);
    }
    return NULL;
}

/* Streams of one source read concurrently from four threads give what one
 * thread reads (HDF5 is the serial build: the reader serialises its calls). */
static void test_threaded_reads(void **state)
{
    trace_shape sh;
    assert_int_equal(trace_shape_uniform(&sh, "m", 4, 4, 1, 64, 3000, 150), 0);
    sel_source *mem = make_memsrc(&sh, 16, 20);
    const char *path = tpath("threads.h5");
    assert_int_equal(trace_write(path, mem, NULL, NULL), 0);
    sel_source *src;
    assert_int_equal(trace_open(path, &src), 0);
    reader_job one = { src, 4, 4, 0, { 0 } }, jobs[4];
    reader_thread(&one);
    pthread_t tid[4];
    for (int t = 0; t < 4; t++) {
        jobs[t] = (reader_job){ src, 4, 4, (uint32_t)t * 5, { 0 } };
        assert_int_equal(pthread_create(&tid[t], NULL, reader_thread, &jobs[t]), 0);
    }
    for (int t = 0; t < 4; t++) assert_int_equal(pthread_join(tid[t], NULL), 0);
    for (uint32_t s = 0; s < 16; s++) {
        assert_true(one.digest[s] != 0);
        assert_true(s == 0 || one.digest[s] != one.digest[s - 1]);
        for (int t = 0; t < 4; t++) assert_true(jobs[t].digest[s] == one.digest[s]);
    }
    /* The digests come out the same from the in-memory source too. */
    for (uint32_t s = 0; s < 16; s++) assert_true(stream_digest(mem, s / 4, s % 4) == one.digest[s]);
    sel_source_free(src);
    sel_source_free(mem);
    trace_shape_release(&sh);
}

/* ---- the generator, file against memory ---------------------------------- */

static void test_gen_file_equals_memory(void **state)
{
    gen_params *p;
    if (gen_params_load("glm51-longbench", &p) < 0) fail_msg("%s", dh_errmsg());
    trace_shape sh;
    assert_int_equal(gen_params_default_shape(p, &sh), 0);
    trace_shape small;
    assert_int_equal(trace_shape_uniform(&small, sh.model, 2, 8, 4, sh.group_k[0], 3000, 60), 0);
    sel_source *a, *b;
    assert_int_equal(gen_source_new(p, &small, 11, 16, &a), 0);
    assert_int_equal(gen_source_new(p, &small, 11, 16, &b), 0);
    const char *path = tpath("gen.h5");
    if (trace_write(path, a, NULL, NULL) < 0) fail_msg("%s", dh_errmsg());
    sel_source *f;
    assert_int_equal(trace_open(path, &f), 0);
    assert_string_equal(sel_meta(f)->preset, "glm51-longbench");
    assert_non_null(sel_meta(f)->generator_params);
    expect_same_source(b, f);
    sel_source_free(f);
    sel_source_free(a);
    sel_source_free(b);
    trace_shape_release(&small);
    trace_shape_release(&sh);
    gen_params_free(p);
}

static int setup(void **state)
{
    if (!mkdtemp(tmpdir)) return -1;
    return 0;
}

static int teardown(void **state)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    rnd_state = 88172645463325252ull;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_keyframe_true_delta),
        cmocka_unit_test(test_same_bytes),
        cmocka_unit_test(test_bad_source_no_output),
        cmocka_unit_test(test_raw_valid),
        cmocka_unit_test(test_raw_bad),
        cmocka_unit_test(test_damaged_files),
        cmocka_unit_test(test_streaming_memory),
        cmocka_unit_test(test_threaded_reads),
        cmocka_unit_test(test_gen_file_equals_memory),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
