/* paper.h: the paper's published results (models/paper-results.ini), which bin/dhsim
 * --compare prints beside its own figures and paper-figs/ draws beside the simulated ones.
 * The file's schema is paper_schema (docs/CONFIG.md); paper_load reads and checks every key. */
#ifndef DH_PAPER_H
#define DH_PAPER_H

#include "common/cfg.h"
#include "common/cfgkey.h"

typedef struct {
    const char *setting;          /* [headline] setting (points into the cfg) */
    double tok_s_per_gpu;         /* Adaptive + DFlash2, output tokens/s per decode GPU */
    double ratio_vs_hisparse, ratio_vs_adaptive_plain;
} paper_headline;

extern const cfg_schema paper_schema;

/* Every key of c read through paper_schema (an unknown one is an error); the headline in
 * *h. 0 or -1 with dh_err(). */
int paper_load(cfg *c, paper_headline *h);

#endif
