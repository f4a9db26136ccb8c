/* ledger.h: the HBM ledger of one GPU, by category.
 *
 * Every byte the simulator places on the GPU is charged to one category.
 * A charge that would take the total above capacity is refused (-1 with
 * dh_err() set): callers that may legitimately fail (admission) ask
 * ledger_fits() first, so a refused charge is a simulator bug and ends the run.
 * Peaks are kept per category and in total for the report. */
#ifndef DH_LEDGER_H
#define DH_LEDGER_H

#include <stdint.h>

enum {
    MEM_WEIGHTS = 0,   /* this GPU's share of the model weights (+ draft weights) */
    MEM_WORKSPACE,     /* activations, communication buffers, graphs */
    MEM_INDEXER,       /* indexer keys of every token of every admitted request */
    MEM_PROTECTED,     /* rows that must be resident for the step: selected now, sinks, newest */
    MEM_OPTIONAL,      /* clean copies kept while HBM is spare (or a fixed budget's spare slots) */
    MEM_DRAFT,         /* draft-model KV rings */
    MEM_STAGING,       /* verification staging (one layer group) */
    MEM_N_CATEGORIES
};

extern const char *const ledger_category_name[MEM_N_CATEGORIES];

typedef struct {
    double capacity;
    double bytes[MEM_N_CATEGORIES];
    double total;
    double peak[MEM_N_CATEGORIES];
    double peak_total;
} mem_ledger;

void ledger_init(mem_ledger *h, double capacity);
/* Would adding delta bytes (any category) fit? */
int ledger_fits(const mem_ledger *h, double delta);
double ledger_free(const mem_ledger *h);
/* Change category cat by delta bytes (negative releases). Refuses to exceed
 * capacity or to go below zero in a category. */
int ledger_charge(mem_ledger *h, int cat, double delta);
/* Set category cat to exactly bytes (same checks). */
int ledger_set(mem_ledger *h, int cat, double bytes);

#endif
