/* prov.c: a run's configuration files and their digest; see prov.h. */
#include "sim/prov.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const prov_file_role[PROV_N_FILES] = { "instance", "model", "hw" };

uint64_t prov_fnv(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

void prov_files(const sim_config *sc, const cfg *out[PROV_N_FILES])
{
    out[PROV_INSTANCE] = sc->inst;
    out[PROV_MODEL] = sc->model_cfgf;
    out[PROV_HW] = sc->hw_cfgf;
}

void prov_digest(const sim_config *sc, char *const *gen_sets, int n_gen, const char *label, char out[17])
{
    uint64_t h = PROV_FNV_INIT;
    const cfg *files[PROV_N_FILES];
    prov_files(sc, files);
    for (int i = 0; i < PROV_N_FILES; i++) {
        char *s = cfg_to_string(files[i]);
        h = prov_fnv(h, s, strlen(s) + 1);
        free(s);
    }
    for (int i = 0; i < n_gen; i++) h = prov_fnv(h, gen_sets[i], strlen(gen_sets[i]) + 1);
    h = prov_fnv(h, label, strlen(label) + 1);
    snprintf(out, 17, "%016llx", (unsigned long long)h);
}
