/* gen.h: the calibrated synthetic generator of attention selections.
 *
 * A preset (traces/presets/NAME.ini) holds every parameter with the source of
 * the target it was calibrated against. gen_source_new() returns a sel_source
 * (sel.h) that produces the selections in memory: the simulator calls it
 * directly, so a sweep never needs a file, and `dhtrace gen` writes the same
 * streams to HDF5 (a file and the in-memory stream for the same preset, shape
 * and seed are identical row for row).
 *
 * Determinism: every (request, group) stream draws from its own counter-based
 * Philox stream (common/rng.h) keyed by (seed, request, group), so any stream
 * can be generated alone, in any order, on any thread. */

#ifndef DH_GEN_H
#define DH_GEN_H

#include "common/cfgkey.h"

#include "traces/sel.h"

typedef struct gen_params gen_params;

/* Load a preset by path, or by name from traces/presets/NAME.ini (also looked
 * up relative to DHSPARSE_ROOT when set). 0 or -1 with dh_err() set. */
int gen_params_load(const char *preset, gen_params **out);
/* Override one parameter, "section.key=value"; unknown keys and bad values are errors. */
int gen_params_set(gen_params *p, const char *assignment);
void gen_params_free(gen_params *p);
/* Preset name and the full parameter set as INI text (recorded in trace files). */
const char *gen_params_name(const gen_params *p);
char *gen_params_to_string(const gen_params *p);

/* A number from the preset's [targets] section (the published figure the
 * preset was calibrated against); read by the tests and the calibration. */
int gen_params_target(const gen_params *p, const char *key, double *out);

/* The preset may suggest a default shape (its [shape] section); fills sh. */
int gen_params_default_shape(const gen_params *p, trace_shape *sh);

/* A source producing the selections of shape sh from preset p and seed. */
int gen_source_new(const gen_params *p, const trace_shape *sh, uint64_t seed,
                   uint32_t keyframe_interval, sel_source **out);

/* Like gen_source_new, for several consumers of one workload in one process
 * (dhsim --compare simulates each policy on its own source): sources with the
 * same preset, seed and keyframe interval share their streams when the shape
 * of one is that of the other's first requests (a stream depends only on its
 * own request's lengths, so a smaller concurrency's streams are a larger
 * one's first ones; dhsweep makes its largest first). Each
 * stream is generated once, kept as compact records (about 1.5 bytes per
 * changed row) and replayed by the other sources, on any thread; at most
 * 3 GiB of records are kept, beyond which streams are generated again. The
 * records live until a source for another workload is made (or the process
 * ends), so sources made one after the other share them too. Content is
 * identical to gen_source_new's. */
int gen_source_new_shared(const gen_params *p, const trace_shape *sh, uint64_t seed,
                          uint32_t keyframe_interval, sel_source **out);

/* The groups of one request with the same (k, compress) derive their streams
 * from one latent process; a source generates it once and lets the groups
 * replay it, holding at most `bytes` of such logs (default 512 MiB). Beyond
 * that, and for a stream opened after the others have moved on, the stream
 * regenerates the latent process itself. For a source from
 * gen_source_new_shared, `bytes` bounds instead the records kept for all the
 * sources sharing it. Content never depends on either limit; 0 turns sharing
 * off. -1 with dh_err() if src is not a generator source. */
int gen_source_set_share_limit(sel_source *src, size_t bytes);

/* Every key of a generator preset (docs/CONFIG.md). */
extern const cfg_schema gen_schema;

#endif
