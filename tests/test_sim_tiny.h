/* test_sim_tiny.h: the tiny simulator fixture shared by tests/test_sim.c
 * and tests/test_specrun.c: a scratch directory, a 4-layer model with one
 * selection group (one indexer layer, three reusing it, no MoE) and a
 * hardware profile on which compute and HBM are effectively free and the
 * gather runs at one flat bandwidth with no fixed costs, so that fetch-bound
 * figures can be computed by hand; json_of() for determinism checks.
 * Include after cmocka.h. */
#ifndef TEST_SIM_TINY_H
#define TEST_SIM_TINY_H

#include <stdio.h>
#include <stdlib.h>

#include "sim/out.h"
#include "sim/sim.h"
#include "traces/memsrc.h"

/* Write text to DIR/NAME (a test failure if it cannot). */
static inline void tiny_write(const char *dir, const char *name, const char *text)
{
    char p[400];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* DIR/tiny.ini: rows of row_bytes, top-k of k. */
static inline void tiny_write_model(const char *dir, double row_bytes, int k)
{
    char buf[1024];
    snprintf(buf, sizeof buf,
             "[model]\nname = tiny\nlayers = own, reuse*3\nhidden = 1024\nactive_params = 1e6\n"
             "experts = 0\nexperts_per_token = 0\nexpert_bytes = 0\n"
             "[kind.own]\nselect = own\nrow_bytes = %g\ntopk = %d\nindexer_key_bytes = 16\n"
             "indexer_heads = 1\nindexer_dim = 16\nattn_heads = 1\nattn_qk_dim = 64\nattn_v_dim = 64\nmoe = false\n"
             "[kind.reuse]\nbase = own\nselect = reuse\n", row_bytes, k);
    tiny_write(dir, "tiny.ini", buf);
}

/* The hardware profile's text: HBM at hbm_bw bytes/s, both tensor rates at flops, a kernel
 * launch of launch_s, gathering at gather_bw bytes/s; extra (may be "") is appended, e.g. a
 * [fit_range] section. */
static inline void tiny_hw_text_at(char *buf, size_t cap, double hbm_bw, double flops, double launch_s, double gather_bw,
                            const char *extra)
{
    snprintf(buf, cap,
             "[hw]\nname = test\nhbm_bytes = 1e12\nhbm_bw = %g\nsms = 100\nfp8_flops = %g\nbf16_flops = %g\n"
             "mma_efficiency = 1\nkernel_launch_s = %g\n"
             "[pcie]\nh2d_bw = 1e12\nd2h_bw = 1e12\nduplex_bw = 2e12\n"
             "[gather]\nrow_bytes = 1000\nrow_bw = %g\nref_row_bytes = 1000\npages = 1000\npages_bw = %g\n"
             "sms = 8\nsms_factor = 1\nfetch_sms = 8\npage_bytes = 4096\nlaunch_s = 0\n"
             "[host]\ndram_bytes = 1e12\n%s", hbm_bw, flops, flops, launch_s, gather_bw, gather_bw, extra);
}

/* The profile of most tests: memory and tensor rates far above anything the tiny model asks,
 * so the gather at gather_bw is what a step costs. */
static inline void tiny_hw_text(char *buf, size_t cap, double gather_bw, const char *extra)
{
    tiny_hw_text_at(buf, cap, 1e15, 1e19, 0, gather_bw, extra);
}

/* One run's JSON as a string (freed by the caller), for byte comparisons. */
static inline char *json_of(const sim_result *r)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    assert_int_equal(out_json(f, r, 1, 0), 0);
    fclose(f);
    return buf;
}

/* The tiny instance's [instance] section with micro-batches mb, for snprintf with the
 * test directory twice (the model and the profile written by the helpers above). */
#define TINY_INSTANCE(mb)                                                                      \
    "[instance]\nmodel = %s/tiny.ini\nhw = %s/hw.ini\ngpus = 1\nattention_dp = 1\nmoe_ep = 1\n" \
    "weights_per_gpu_bytes = 1e6\nworkspace_bytes = 1e9\nmicro_batches = " #mb "\nstep_overhead_s = 0\nmoe_comm_s = 0\n"

/* Every position selects k rows never selected before (and never the newest rows), so
 * each position misses all k rows under a budget of k. */
static inline sel_source *tiny_fresh_rows_source(const sim_config *sc, uint32_t k)
{
    trace_shape sh;
    assert_int_equal(sim_shape(sc, &sh), 0);
    sel_source *src;
    assert_int_equal(memsrc_new(&sh, 8, 1, &src), 0);
    uint32_t *rows = malloc(k * sizeof *rows);
    assert_non_null(rows);
    for (uint32_t r = 0; r < sh.n_requests; r++)
        for (uint32_t p = 0; p < sh.output_len[r]; p++) {
            for (uint32_t i = 0; i < k; i++) rows[i] = p * k + i;
            memsrc_put(src, r, 0, p, rows, k);
        }
    free(rows);
    trace_shape_release(&sh);
    return src;
}

/* Remove the test directory (a cmocka group teardown's body). */
static inline int tiny_rmdir(const char *dir)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

#endif
