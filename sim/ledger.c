/* ledger.c: the per-category HBM ledger; see ledger.h. */
#include "sim/ledger.h"
#include "common/dh_err.h"

#include <string.h>

const char *const ledger_category_name[MEM_N_CATEGORIES] = {
    "weights", "workspace", "indexer", "protected", "optional", "draft", "staging",
};

void ledger_init(mem_ledger *h, double capacity)
{
    memset(h, 0, sizeof *h);
    h->capacity = capacity;
}

int ledger_fits(const mem_ledger *h, double delta) { return h->total + delta <= h->capacity; }
double ledger_free(const mem_ledger *h) { return h->capacity - h->total; }

int ledger_charge(mem_ledger *h, int cat, double delta)
{
    DH_BUG_ON(cat < 0 || cat >= MEM_N_CATEGORIES);
    double nb = h->bytes[cat] + delta;
    /* Byte counts are integers held in doubles (exact below 2^53). */
    if (nb < 0)
        return dh_err("hbm ledger: category '%s' would go negative (%.0f - %.0f)", ledger_category_name[cat],
                      h->bytes[cat], -delta);
    if (delta > 0 && h->total + delta > h->capacity)
        return dh_err("hbm ledger: charging %.0f bytes of '%s' would exceed capacity (%.0f of %.0f in use)",
                      delta, ledger_category_name[cat], h->total, h->capacity);
    h->bytes[cat] = nb;
    h->total += delta;
    if (nb > h->peak[cat]) h->peak[cat] = nb;
    if (h->total > h->peak_total) h->peak_total = h->total;
    return 0;
}

int ledger_set(mem_ledger *h, int cat, double bytes) { return ledger_charge(h, cat, bytes - h->bytes[cat]); }
