/* hbm.h: the HBM ledger of one GPU, by category.
 *
 * Every byte the simulator places on the GPU is charged to one category.
 * A charge that would take the total above capacity is refused (-1 with
 * dh_err() set): callers that may legitimately fail (admission) ask
 * hbm_fits() first, so a refused charge is a simulator bug and ends the run.
 * Peaks are kept per category and in total for the report. */
#ifndef DH_HBM_H
#define DH_HBM_H

#include <stdint.h>

enum {
    HBM_WEIGHTS = 0,   /* this GPU's share of the model weights (+ draft weights) */
    HBM_WORKSPACE,     /* activations, communication buffers, graphs */
    HBM_INDEXER,       /* indexer keys of every token of every admitted request */
    HBM_PROTECTED,     /* rows that must be resident for the step: selected now, sinks, newest */
    HBM_OPTIONAL,      /* clean copies kept while HBM is spare (or a fixed budget's spare slots) */
    HBM_DRAFT,         /* draft-model KV rings */
    HBM_STAGING,       /* verification staging (one layer group) */
    HBM_N_CATEGORIES
};

extern const char *const hbm_category_name[HBM_N_CATEGORIES];

typedef struct {
    double capacity;
    double bytes[HBM_N_CATEGORIES];
    double total;
    double peak[HBM_N_CATEGORIES];
    double peak_total;
} hbm_ledger;

void hbm_init(hbm_ledger *h, double capacity);
/* Would adding delta bytes (any category) fit? */
int hbm_fits(const hbm_ledger *h, double delta);
double hbm_free(const hbm_ledger *h);
/* Change category cat by delta bytes (negative releases). Refuses to exceed
 * capacity or to go below zero in a category. */
int hbm_charge(hbm_ledger *h, int cat, double delta);
/* Set category cat to exactly bytes (same checks). */
int hbm_set(hbm_ledger *h, int cat, double bytes);

#endif
