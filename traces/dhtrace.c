/* dhtrace.c: the command-line tool for attention-selection traces (bin/dhtrace).
 *
 *   dhtrace gen   --preset NAME|PATH [shape options] [--set section.key=value]... -o FILE
 *   dhtrace info  FILE
 *   dhtrace check FILE
 *   dhtrace stats FILE | --preset NAME|PATH [shape options]   [--json | --tsv] [sampling]
 *
 * Every command has --help. Errors print one line "dhtrace: ..." and exit 1;
 * usage errors (unknown option, bad number, missing argument) exit 2. A
 * progress bar appears on stderr for long runs when stderr is a terminal. */
#include "common/dh_err.h"
#include "traces/gen.h"
#include "traces/progress.h"
#include "traces/stats.h"
#include "traces/trace.h"
#include "traces/trace_info.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOOL "dhtrace"
#define DEFAULT_KEYFRAME_INTERVAL 64 /* a keyframe costs k rows, so 64 adds ~k/64 rows per position */

static void usage_error(const char *cmd, const char *fmt, ...) DH_PRINTF(2, 3) __attribute__((noreturn));
static void usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, TOOL ": ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (see '" TOOL " %s --help')\n", cmd);
    exit(2);
}

/* A whole decimal number within [lo, hi]; anything else is a usage error. */
/* getopt_long's own messages are off (opterr = 0, optstrings start with ':'):
 * this names what was wrong. c is ':' for a missing argument, '?' otherwise. */
static void bad_option(const char *cmd, int c, char **argv)
{
    const char *what = argv[optind - 1];
    if (c == ':') {
        if (optopt && optopt < 256 && strncmp(what, "--", 2)) usage_error(cmd, "option '-%c' needs an argument", optopt);
        usage_error(cmd, "option '%s' needs an argument", what);
    }
    if (optopt && optopt < 256) usage_error(cmd, "unknown option '-%c'", optopt);
    usage_error(cmd, "unknown option '%s'", what);
}

static uint64_t parse_num(const char *cmd, const char *opt, const char *s, uint64_t lo, uint64_t hi)
{
    char *end;
    errno = 0;
    if (!s[0] || s[0] == '-') usage_error(cmd, "%s: '%s' is not a whole number", opt, s);
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) usage_error(cmd, "%s: '%s' is not a whole number", opt, s);
    if (v < lo || v > hi) usage_error(cmd, "%s: %llu is outside %" PRIu64 "..%" PRIu64, opt, v, lo, hi);
    return v;
}

/* ---- shape and generator options, shared by gen and stats ---------------- */

typedef struct {
    const char *preset;
    uint64_t seed;
    uint32_t requests, layers, group_every, k, prompt, output; /* 0 = the preset's default */
    uint32_t keyframe_interval;
    const char **sets;
    int n_sets;
} gen_opts;

enum {
    OPT_PRESET = 1000, OPT_SEED, OPT_REQUESTS, OPT_LAYERS, OPT_GROUP_EVERY, OPT_K, OPT_PROMPT, OPT_OUTPUT,
    OPT_KEYFRAME, OPT_SET, OPT_JSON, OPT_TSV, OPT_BUDGETS, OPT_UNION_Q, OPT_NO_FIFO, OPT_NO_RANDOM,
    OPT_NO_BELADY, OPT_REQ_SAMPLE, OPT_REQ_STEP, OPT_GRP_SAMPLE, OPT_GRP_STEP, OPT_POSITIONS, OPT_EVICT_SEED,
};

#define GEN_LONG_OPTIONS                                                                                       \
    { "preset", required_argument, NULL, OPT_PRESET }, { "seed", required_argument, NULL, OPT_SEED },        \
    { "requests", required_argument, NULL, OPT_REQUESTS }, { "layers", required_argument, NULL, OPT_LAYERS }, \
    { "group-every", required_argument, NULL, OPT_GROUP_EVERY }, { "k", required_argument, NULL, OPT_K },     \
    { "prompt", required_argument, NULL, OPT_PROMPT }, { "output", required_argument, NULL, OPT_OUTPUT },     \
    { "set", required_argument, NULL, OPT_SET }

#define GEN_OPTIONS_HELP                                                                                        \
    "  --preset NAME|PATH     generator preset (traces/presets/NAME.ini, or a path)\n"                         \
    "  --seed N               seed of the random streams (default 1)\n"                                         \
    "  --requests N           number of requests (default: the preset's [shape])\n"                            \
    "  --layers N             number of layers\n"                                                               \
    "  --group-every N        layers sharing one selection (IndexShare frequency); with --layers,\n"           \
    "                         makes the grouping uniform (default: the preset's grouping)\n"                   \
    "  --k N                  rows selected per query token, every group\n"                                     \
    "  --prompt N             prompt length in tokens, every request\n"                                         \
    "  --output N             decode positions per request\n"                                                   \
    "  --set SECTION.KEY=VAL  override one preset parameter (repeatable; unknown keys are errors)\n"

/* Returns 1 if opt was a generator option (consumed). */
static int gen_opt(const char *cmd, int opt, const char *arg, gen_opts *g)
{
    switch (opt) {
    case OPT_PRESET: g->preset = arg; return 1;
    case OPT_SEED: g->seed = parse_num(cmd, "--seed", arg, 0, UINT64_MAX); return 1;
    case OPT_REQUESTS: g->requests = (uint32_t)parse_num(cmd, "--requests", arg, 1, UINT32_MAX); return 1;
    case OPT_LAYERS: g->layers = (uint32_t)parse_num(cmd, "--layers", arg, 1, 100000); return 1;
    case OPT_GROUP_EVERY: g->group_every = (uint32_t)parse_num(cmd, "--group-every", arg, 1, 100000); return 1;
    case OPT_K: g->k = (uint32_t)parse_num(cmd, "--k", arg, 1, UINT32_MAX); return 1;
    case OPT_PROMPT: g->prompt = (uint32_t)parse_num(cmd, "--prompt", arg, 1, UINT32_MAX); return 1;
    case OPT_OUTPUT: g->output = (uint32_t)parse_num(cmd, "--output", arg, 1, UINT32_MAX); return 1;
    case OPT_SET:
        g->sets = realloc(g->sets, (size_t)(g->n_sets + 1) * sizeof *g->sets);
        DH_BUG_ON(!g->sets);
        g->sets[g->n_sets++] = arg;
        return 1;
    }
    return 0;
}

static uint32_t *fill_u32(uint32_t *old, uint32_t n, uint32_t v)
{
    free(old);
    uint32_t *a = malloc((n ? n : 1) * sizeof *a);
    DH_BUG_ON(!a);
    for (uint32_t i = 0; i < n; i++) a[i] = v;
    return a;
}

/* The preset's default shape with the command line's overrides applied.
 * Per-request and per-group values given on the command line apply to every
 * request or group; --layers/--group-every regroup the layers uniformly. */
static int build_shape(const gen_params *p, const gen_opts *g, trace_shape *sh)
{
    if (gen_params_default_shape(p, sh) < 0) return -1;
    if (g->requests || g->prompt || g->output) {
        uint32_t prompt = g->prompt ? g->prompt : sh->prompt_len[0];
        uint32_t output = g->output ? g->output : sh->output_len[0];
        if (g->requests) sh->n_requests = g->requests;
        if (g->prompt || g->requests) sh->prompt_len = fill_u32(sh->prompt_len, sh->n_requests, prompt);
        if (g->output || g->requests) sh->output_len = fill_u32(sh->output_len, sh->n_requests, output);
    }
    if (g->layers || g->group_every) {
        /* The preset's group size: its largest group (IndexShare's frequency). */
        uint32_t every = g->group_every, compress = sh->group_compress[0], k = sh->group_k[0];
        if (!every) {
            uint32_t *count = calloc(sh->n_groups, sizeof *count);
            DH_BUG_ON(!count);
            for (uint32_t l = 0; l < sh->n_layers; l++)
                if (++count[sh->layer_group[l]] > every) every = count[sh->layer_group[l]];
            free(count);
        }
        if (g->layers) sh->n_layers = g->layers;
        sh->n_groups = (sh->n_layers + every - 1) / every;
        free(sh->layer_group);
        sh->layer_group = malloc(sh->n_layers * sizeof *sh->layer_group);
        DH_BUG_ON(!sh->layer_group);
        for (uint32_t l = 0; l < sh->n_layers; l++) sh->layer_group[l] = l / every;
        sh->group_k = fill_u32(sh->group_k, sh->n_groups, k);
        sh->group_compress = fill_u32(sh->group_compress, sh->n_groups, compress);
    }
    if (g->k) sh->group_k = fill_u32(sh->group_k, sh->n_groups, g->k);
    return trace_shape_validate(sh);
}

/* Load the preset, apply --set, build the shape and the in-memory source. */
static int make_gen_source(const gen_opts *g, uint32_t keyframe_interval, sel_source **out)
{
    gen_params *p;
    if (gen_params_load(g->preset, &p) < 0) return -1;
    for (int i = 0; i < g->n_sets; i++)
        if (gen_params_set(p, g->sets[i]) < 0) {
            gen_params_free(p);
            return -1;
        }
    trace_shape sh;
    int rc = build_shape(p, g, &sh);
    if (rc == 0) rc = gen_source_new(p, &sh, g->seed, keyframe_interval, out);
    trace_shape_release(&sh);
    gen_params_free(p);
    return rc;
}

/* ---- gen ---------------------------------------------------------------- */

static const char gen_help[] =
    "usage: " TOOL " gen --preset NAME|PATH [OPTIONS] -o FILE\n"
    "Generate a synthetic attention-selection trace and write it as HDF5 (traces/README.md).\n"
    "\n" GEN_OPTIONS_HELP
    "  --keyframe-interval N  positions between keyframes (full selections; default 64)\n"
    "  -o, --output-file FILE the trace to write (written whole or not at all)\n"
    "  -h, --help             this help\n";

static int cmd_gen(int argc, char **argv)
{
    gen_opts g = { .seed = 1, .keyframe_interval = DEFAULT_KEYFRAME_INTERVAL };
    const char *out = NULL;
    static const struct option opts[] = {
        GEN_LONG_OPTIONS,
        { "keyframe-interval", required_argument, NULL, OPT_KEYFRAME },
        { "output-file", required_argument, NULL, 'o' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    int c;
    while ((c = getopt_long(argc, argv, ":o:h", opts, NULL)) != -1) {
        if (gen_opt("gen", c, optarg, &g)) continue;
        switch (c) {
        case OPT_KEYFRAME: g.keyframe_interval = (uint32_t)parse_num("gen", "--keyframe-interval", optarg, 1, UINT32_MAX); break;
        case 'o': out = optarg; break;
        case 'h': fputs(gen_help, stdout); return 0;
        default: bad_option("gen", c, argv);
        }
    }
    if (optind < argc) usage_error("gen", "unexpected argument '%s'", argv[optind]);
    if (!g.preset) usage_error("gen", "--preset is required");
    if (!out) usage_error("gen", "-o FILE is required");
    sel_source *src;
    if (make_gen_source(&g, g.keyframe_interval, &src) < 0) dh_die_last(TOOL);
    progress bar;
    progress_init(&bar, "writing");
    int rc = trace_write(out, src, progress_update, &bar);
    progress_done(&bar);
    sel_source_free(src);
    free(g.sets);
    if (rc < 0) dh_die_last(TOOL);
    return 0;
}

/* ---- info --------------------------------------------------------------- */

static const char info_help[] =
    "usage: " TOOL " info FILE\n"
    "Print a trace's attributes, shape and storage: sizes, compression ratio and bytes per\n"
    "stored row. Reads only metadata; '" TOOL " check' reads and validates the rows.\n"
    "  -h, --help   this help\n";

/* "min..max" of an array, or one value when all are equal. */
static void print_range(const char *label, const uint32_t *a, uint32_t n)
{
    uint32_t lo = UINT32_MAX, hi = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (a[i] < lo) lo = a[i];
        if (a[i] > hi) hi = a[i];
    }
    if (lo == hi) printf("%-20s %u\n", label, lo);
    else printf("%-20s %u..%u\n", label, lo, hi);
}

static const char *human_bytes(uint64_t b, char *buf, size_t cap)
{
    const char *unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    double v = (double)b;
    int u = 0;
    while (v >= 1024 && u < 4) { v /= 1024; u++; }
    if (u == 0) snprintf(buf, cap, "%" PRIu64 " B", b);
    else snprintf(buf, cap, "%.1f %s", v, unit[u]);
    return buf;
}

/* The options of a command that takes only --help and one trace file: the
 * file's path, or NULL once --help has been printed. */
static const char *one_file_arg(const char *cmd, const char *help, int argc, char **argv)
{
    static const struct option opts[] = { { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };
    int c;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if (c == 'h') { fputs(help, stdout); return NULL; }
        bad_option(cmd, c, argv);
    }
    if (argc - optind != 1) usage_error(cmd, "expected one trace file");
    return argv[optind];
}

static int cmd_info(int argc, char **argv)
{
    const char *path = one_file_arg("info", info_help, argc, argv);
    if (!path) return 0;
    sel_source *src;
    if (trace_open(path, &src) < 0) dh_die_last(TOOL);
    const trace_meta *m = sel_meta(src);
    const trace_shape *sh = &m->shape;
    trace_sizes z;
    if (trace_sizes_get(path, m, &z) < 0) dh_die_last(TOOL);
    char b1[32], b2[32];
    printf("%-20s %s\n", "file", path);
    printf("%-20s %u\n", "format_version", m->format_version);
    printf("%-20s %s\n", "model", sh->model);
    printf("%-20s %s\n", "generator", m->generator);
    printf("%-20s %s\n", "preset", m->preset[0] ? m->preset : "(none)");
    printf("%-20s %" PRIu64 "\n", "seed", m->seed);
    printf("%-20s %u\n", "keyframe_interval", m->keyframe_interval);
    printf("%-20s %u\n", "requests", sh->n_requests);
    print_range("prompt_len", sh->prompt_len, sh->n_requests);
    print_range("output_len", sh->output_len, sh->n_requests);
    printf("%-20s %u\n", "layers", sh->n_layers);
    printf("%-20s %u\n", "selection groups", sh->n_groups);
    printf("%-20s", "layer -> group");
    for (uint32_t l = 0; l < sh->n_layers; l++) {
        /* Runs of layers sharing a group: "0:0 1-4:1 ..." keeps 78 layers on one line. */
        uint32_t e = l;
        while (e + 1 < sh->n_layers && sh->layer_group[e + 1] == sh->layer_group[l]) e++;
        if (e > l) printf(" %u-%u:%u", l, e, sh->layer_group[l]);
        else printf(" %u:%u", l, sh->layer_group[l]);
        l = e;
    }
    printf("\n");
    print_range("k", sh->group_k, sh->n_groups);
    print_range("compress", sh->group_compress, sh->n_groups);
    printf("%-20s %" PRIu64 "\n", "streams", z.streams);
    printf("%-20s %" PRIu64 " (%" PRIu64 " keyframes)\n", "positions", z.positions, z.keyframes);
    printf("%-20s %" PRIu64 "\n", "selected rows", z.selected_rows);
    printf("%-20s %" PRIu64 " (%.3f per selected row)\n", "stored rows", z.stored_rows,
           z.selected_rows ? (double)z.stored_rows / (double)z.selected_rows : 0.0);
    printf("%-20s %s\n", "file size", human_bytes(z.file_bytes, b1, sizeof b1));
    printf("%-20s %s raw, %s on disk\n", "rows datasets", human_bytes(z.rows_raw_bytes, b1, sizeof b1),
           human_bytes(z.rows_disk_bytes, b2, sizeof b2));
    printf("%-20s %s raw, %s on disk\n", "index datasets", human_bytes(z.index_raw_bytes, b1, sizeof b1),
           human_bytes(z.index_disk_bytes, b2, sizeof b2));
    uint64_t raw = z.rows_raw_bytes + z.index_raw_bytes, disk = z.rows_disk_bytes + z.index_disk_bytes;
    printf("%-20s %.2f\n", "compression ratio", disk ? (double)raw / (double)disk : 0.0);
    printf("%-20s %.3f\n", "bytes/stored row", z.stored_rows ? (double)z.rows_disk_bytes / (double)z.stored_rows : 0.0);
    printf("%-20s %.4f\n", "file bytes/selected row",
           z.selected_rows ? (double)z.file_bytes / (double)z.selected_rows : 0.0);
    sel_source_free(src);
    return 0;
}

/* ---- check -------------------------------------------------------------- */

static const char check_help[] =
    "usage: " TOOL " check FILE\n"
    "Read every stream of a trace end to end and validate it: format version, sizes, sorted\n"
    "distinct rows, deltas consistent with the selection, selections of min(k, context) rows,\n"
    "rows inside the context. Prints one line and exits 0 when the trace is valid, else one\n"
    "error line naming the dataset and position and exits 1.\n"
    "  -h, --help   this help\n";

static int cmd_check(int argc, char **argv)
{
    const char *path = one_file_arg("check", check_help, argc, argv);
    if (!path) return 0;
    progress bar;
    progress_init(&bar, "checking");
    int rc = trace_check(path, progress_update, &bar);
    progress_done(&bar);
    if (rc < 0) dh_die_last(TOOL);
    printf("%s: ok\n", argv[optind]);
    return 0;
}

/* ---- stats -------------------------------------------------------------- */

static const char stats_help[] =
    "usage: " TOOL " stats FILE [OPTIONS]\n"
    "       " TOOL " stats --preset NAME|PATH [generator options] [OPTIONS]\n"
    "Locality statistics of a trace file, or of a preset's selections generated in memory:\n"
    "step and cross-group overlap, reuse distances, the LRU miss-ratio curve, FIFO, random\n"
    "and Belady miss rates at chosen budgets, and the union of q consecutive selections.\n"
    "\n"
    "Output:\n"
    "  --json                 one JSON object (default: a table)\n"
    "  --tsv                  TSV blocks for gnuplot\n"
    "Analysis:\n"
    "  --budgets LIST         budgets, multiples of k ('1k,2k,4k', the default) or rows ('4096')\n"
    "  --union-q N            largest q for the union of consecutive selections (1..8, default 8)\n"
    "  --no-fifo, --no-random, --no-belady   skip a fixed-budget policy\n"
    "  --eviction-seed N      seed of random eviction (default 1)\n"
    "Sampling (stated in the output when used):\n"
    "  --requests-sample N    analyse at most N requests\n"
    "  --request-step N       take every N-th request\n"
    "  --groups-sample N      analyse at most N selection groups\n"
    "  --group-step N         take every N-th group\n"
    "  --positions N          the first N positions of each stream\n"
    "Generator (with --preset instead of FILE):\n" GEN_OPTIONS_HELP
    "  -h, --help             this help\n";

static int cmd_stats(int argc, char **argv)
{
    gen_opts g = { .seed = 1 };
    stats_options so;
    stats_options_init(&so);
    int json = 0, tsv = 0;
    static const struct option opts[] = {
        GEN_LONG_OPTIONS,
        { "json", no_argument, NULL, OPT_JSON },
        { "tsv", no_argument, NULL, OPT_TSV },
        { "budgets", required_argument, NULL, OPT_BUDGETS },
        { "union-q", required_argument, NULL, OPT_UNION_Q },
        { "no-fifo", no_argument, NULL, OPT_NO_FIFO },
        { "no-random", no_argument, NULL, OPT_NO_RANDOM },
        { "no-belady", no_argument, NULL, OPT_NO_BELADY },
        { "eviction-seed", required_argument, NULL, OPT_EVICT_SEED },
        { "requests-sample", required_argument, NULL, OPT_REQ_SAMPLE },
        { "request-step", required_argument, NULL, OPT_REQ_STEP },
        { "groups-sample", required_argument, NULL, OPT_GRP_SAMPLE },
        { "group-step", required_argument, NULL, OPT_GRP_STEP },
        { "positions", required_argument, NULL, OPT_POSITIONS },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    int c;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if (gen_opt("stats", c, optarg, &g)) continue;
        switch (c) {
        case OPT_JSON: json = 1; break;
        case OPT_TSV: tsv = 1; break;
        case OPT_BUDGETS:
            if (stats_parse_budgets(&so, optarg) < 0) usage_error("stats", "--budgets: %s", dh_errmsg());
            break;
        case OPT_UNION_Q: so.union_qmax = (uint32_t)parse_num("stats", "--union-q", optarg, 1, STATS_MAX_Q); break;
        case OPT_NO_FIFO: so.fifo = 0; break;
        case OPT_NO_RANDOM: so.random = 0; break;
        case OPT_NO_BELADY: so.belady = 0; break;
        case OPT_EVICT_SEED: so.seed = parse_num("stats", "--eviction-seed", optarg, 0, UINT64_MAX); break;
        case OPT_REQ_SAMPLE: so.max_requests = (uint32_t)parse_num("stats", "--requests-sample", optarg, 1, UINT32_MAX); break;
        case OPT_REQ_STEP: so.request_step = (uint32_t)parse_num("stats", "--request-step", optarg, 1, UINT32_MAX); break;
        case OPT_GRP_SAMPLE: so.max_groups = (uint32_t)parse_num("stats", "--groups-sample", optarg, 1, UINT32_MAX); break;
        case OPT_GRP_STEP: so.group_step = (uint32_t)parse_num("stats", "--group-step", optarg, 1, UINT32_MAX); break;
        case OPT_POSITIONS: so.max_positions = (uint32_t)parse_num("stats", "--positions", optarg, 1, UINT32_MAX); break;
        case 'h': fputs(stats_help, stdout); return 0;
        default: bad_option("stats", c, argv);
        }
    }
    if (json && tsv) usage_error("stats", "--json and --tsv exclude each other");
    int n_files = argc - optind;
    if (g.preset && n_files) usage_error("stats", "give a trace file or --preset, not both");
    if (!g.preset && n_files != 1) usage_error("stats", "expected one trace file or --preset");
    if (!g.preset && (g.requests || g.layers || g.group_every || g.k || g.prompt || g.output || g.n_sets))
        usage_error("stats", "generator options need --preset");

    sel_source *src;
    if (g.preset) {
        if (make_gen_source(&g, DEFAULT_KEYFRAME_INTERVAL, &src) < 0) dh_die_last(TOOL);
    } else if (trace_open(argv[optind], &src) < 0) {
        dh_die_last(TOOL);
    }
    progress bar;
    progress_init(&bar, "analysing");
    so.progress = progress_update;
    so.progress_arg = &bar;
    stats_report *rep;
    int rc = stats_run(src, &so, &rep);
    progress_done(&bar);
    sel_source_free(src);
    free(g.sets);
    if (rc < 0) dh_die_last(TOOL);
    rc = json ? stats_print_json(stdout, rep) : tsv ? stats_print_tsv(stdout, rep) : stats_print_table(stdout, rep);
    stats_report_free(rep);
    if (rc < 0 || fflush(stdout) != 0) dh_die(TOOL, "cannot write the report to standard output");
    return 0;
}

/* ---- main --------------------------------------------------------------- */

static const char main_help[] =
    "usage: " TOOL " COMMAND [OPTIONS]\n"
    "Make, check and understand attention-selection traces (schema: traces/README.md).\n"
    "\n"
    "Commands:\n"
    "  gen     generate a synthetic trace from a preset and write it as HDF5\n"
    "  info    print a trace's attributes, shape and storage figures\n"
    "  check   read and validate every stream of a trace\n"
    "  stats   locality statistics of a trace or of a preset's selections\n"
    "\n"
    "'" TOOL " COMMAND --help' shows a command's options.\n";

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(main_help, stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        fputs(main_help, stdout);
        return 0;
    }
    /* Each command parses argv[1..] with its own getopt_long. */
    opterr = 0;
    argc--;
    argv++;
    if (!strcmp(cmd, "gen")) return cmd_gen(argc, argv);
    if (!strcmp(cmd, "info")) return cmd_info(argc, argv);
    if (!strcmp(cmd, "check")) return cmd_check(argc, argv);
    if (!strcmp(cmd, "stats")) return cmd_stats(argc, argv);
    fprintf(stderr, TOOL ": unknown command '%s' (see '" TOOL " --help')\n", cmd);
    return 2;
}
