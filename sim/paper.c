/* paper.c: the paper's published results file; see paper.h. */
#include "sim/paper.h"
#include "common/dh_err.h"

#include <string.h>

static const cfg_key paper_keys[] = {
    CK_ROW("headline", "setting", CK_STR, "", 0, 0, NULL, "The setting of the paper's headline, in words.", 0),
    CK_ROW("headline", "adaptive_dflash2_tok_s_per_gpu", CK_NUM, "tokens/s", 0, 1e9, NULL, "Output tokens/s per decode "
           "GPU of Adaptive + DFlash2 (the paper's abstract).", 0),
    CK_ROW("headline", "ratio_vs_hisparse", CK_NUM, "", 0, 1e3, NULL, "Adaptive + DFlash2 over HiSparse.", 0),
    CK_ROW("headline", "ratio_vs_adaptive_plain", CK_NUM, "", 0, 1e3, NULL, "Adaptive + DFlash2 over Adaptive without "
           "speculation.", 0),
    CK_ROW("result2", "setting", CK_STR, "", 0, 0, NULL, "Result 2's setting (latency-bounded concurrency).", 0),
    CK_ROW("result2", "max_concurrency_ratio", CK_NUM, "", 0, 1e3, NULL, "Largest concurrency under the same latency "
           "bound, Adaptive + DFlash2 over HiSparse.", 0),
    CK_ROW("result2", "output_ratio_low", CK_NUM, "", 0, 1e3, NULL, "Output ratio at the bounds, low end.", 0),
    CK_ROW("result2", "output_ratio_high", CK_NUM, "", 0, 1e3, NULL, "Output ratio at the bounds, high end.", 0),
    CK_ROW("result3", "setting", CK_STR, "", 0, 0, NULL, "Result 3's setting (DeepSeek-V4.1-Flash, DSpark).", 0),
    CK_ROW("result3", "ratio_vs_resident_dspark", CK_NUM, "", 0, 1e3, NULL, "Adaptive + DSpark over the resident "
           "policy with DSpark.", 0),
    CK_ROW("result4", "setting", CK_STR, "", 0, 0, NULL, "Result 4's setting (a load step).", 0),
    CK_ROW("result4", "hisparse_budget_fetch_pct", CK_NUM, "%", 0, 100, NULL, "Host fetches as % of selected rows, "
           "HiSparse's budget.", 0),
    CK_ROW("result4", "adaptive_low_load_fetch_pct", CK_NUM, "%", 0, 100, NULL, "The same for Adaptive at low load.", 0),
};
const cfg_schema paper_schema = CFG_SCHEMA("models/paper-results.ini", "Paper results", "The paper's published "
    "figures, printed by bin/dhsim --compare beside the simulated ones and drawn by paper-figs/ (each with its source "
    "in the file).", paper_keys);

int paper_load(cfg *c, paper_headline *h)
{
    const cfg_schema *S = &paper_schema;
    memset(h, 0, sizeof *h);
    for (size_t i = 0; i < S->n; i++) {
        const cfg_key *k = &S->k[i];
        const char *s;
        double x;
        if (k->type == CK_STR ? cfgk_string(c, S, k->section, k->key, &s) < 0 : cfgk_double(c, S, k->section, k->key, &x) < 0)
            return -1;
        if (!strcmp(k->section, "headline") && !strcmp(k->key, "setting")) h->setting = s;
        else if (!strcmp(k->key, "adaptive_dflash2_tok_s_per_gpu")) h->tok_s_per_gpu = x;
        else if (!strcmp(k->key, "ratio_vs_hisparse")) h->ratio_vs_hisparse = x;
        else if (!strcmp(k->key, "ratio_vs_adaptive_plain")) h->ratio_vs_adaptive_plain = x;
    }
    return cfg_check_unused(c);
}
