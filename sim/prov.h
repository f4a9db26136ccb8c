/* prov.h: what a simulation was made from, for the records the outputs carry.
 *
 * A run's configuration is its instance file with the model and hardware files
 * the instance names, each after the --set overrides (sim_config_load); files
 * they name by path (a trace, a draft, an all-to-all measurement, a generator
 * preset) are recorded by that path, their content by the commit.
 *
 *   prov_files(&sc, files);      // the three cfgs, in prov_file_role order
 *   prov_digest(&sc, NULL, 0, "adaptive+dflash2", digest);
 *
 * The digest is FNV-1a (64 bits) over the three files' entries as
 * cfg_to_string writes them, then the generator overrides a sweep adds, then
 * the column's label: dhsweep's config_digest column and dhsim's records give
 * the same 16 hex digits for the same configuration and label, so a dhsim run
 * can be matched with a sweep's point. */
#ifndef DH_PROV_H
#define DH_PROV_H

#include <stddef.h>
#include <stdint.h>

#include "common/cfg.h"
#include "sim/sim.h"

enum { PROV_INSTANCE, PROV_MODEL, PROV_HW, PROV_N_FILES };
/* "instance", "model", "hw": the names the records give the files. */
extern const char *const prov_file_role[PROV_N_FILES];

#define PROV_FNV_INIT 0xcbf29ce484222325ULL
/* FNV-1a, 64 bits, chained from h (start with PROV_FNV_INIT). */
uint64_t prov_fnv(uint64_t h, const void *data, size_t n);

void prov_files(const sim_config *sc, const cfg *out[PROV_N_FILES]);
/* The digest as 16 lower-case hex digits and a NUL. */
void prov_digest(const sim_config *sc, char *const *gen_sets, int n_gen, const char *label, char out[17]);

#endif
