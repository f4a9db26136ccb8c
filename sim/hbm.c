/* hbm.c: the per-category HBM ledger; see hbm.h. */
#include "sim/hbm.h"
#include "common/dh_err.h"

#include <string.h>

const char *const hbm_category_name[HBM_N_CATEGORIES] = {
    "weights", "workspace", "indexer", "protected", "optional", "draft", "staging",
};

void hbm_init(hbm_ledger *h, double capacity)
{
    memset(h, 0, sizeof *h);
    h->capacity = capacity;
}

int hbm_fits(const hbm_ledger *h, double delta) { return h->total + delta <= h->capacity; }
double hbm_free(const hbm_ledger *h) { return h->capacity - h->total; }

int hbm_charge(hbm_ledger *h, int cat, double delta)
{
    DH_BUG_ON(cat < 0 || cat >= HBM_N_CATEGORIES);
    double nb = h->bytes[cat] + delta;
    /* Byte counts are integers held in doubles (exact below 2^53). */
    if (nb < 0)
        return dh_err("hbm ledger: category '%s' would go negative (%.0f - %.0f)", hbm_category_name[cat],
                      h->bytes[cat], -delta);
    if (delta > 0 && h->total + delta > h->capacity)
        return dh_err("hbm ledger: charging %.0f bytes of '%s' would exceed capacity (%.0f of %.0f in use)",
                      delta, hbm_category_name[cat], h->total, h->capacity);
    h->bytes[cat] = nb;
    h->total += delta;
    if (nb > h->peak[cat]) h->peak[cat] = nb;
    if (h->total > h->peak_total) h->peak_total = h->total;
    return 0;
}

int hbm_set(hbm_ledger *h, int cat, double bytes) { return hbm_charge(h, cat, bytes - h->bytes[cat]); }
