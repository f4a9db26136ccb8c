# searchlog.awk: the answer of a latency search at bound b (ms) for policy pol, from the runs
# that earlier searches of the same policy, run length and configuration made (their progress
# lines on stderr, "search: POL per GPU C (concurrency N): STAT V ms [LO,HI] over M measured
# steps (warm-up W): meets|exceeds|memory-bound ...", sim/dhsim.c), where those runs settle it.
#
#     awk -v pol=adaptive+dflash2 -v b=60 -f paper-figs/searchlog.awk LOG...
#
# A run at per-GPU concurrency c is deterministic and does not depend on the bound, which only
# judges it: c meets b when it is not memory-bound and its statistic is <= b. The search
# (sim/search.h) answers the c* that met with c* + 1 run and failed, and assumes that failing is
# monotone in c. So where the runs already hold such a pair -- the largest c that meets b, and
# c + 1 failing -- and every run below it meets b too (no sign against monotonicity), that pair
# is the search's answer and check, and the search need not run again. Prints one line,
#     per_gpu concurrency stat_ms ci stop check check_ms warmup measured noisy
# (stop: memory or latency; noisy: 1 when b lies inside the 95 % CI at c* or at a c* + 1 that is
# not memory-bound, as the search reports it), or nothing when the runs do not settle b.
# Cost: O(runs).
$1 == "search:" && $2 == pol && $3 == "per" && $4 == "GPU" {
    c = $5 + 0
    conc = $7; sub(/\):$/, "", conc)
    warm = $17; sub(/\):$/, "", warm)
    seen[c] = 1; mem[c] = ($18 ~ /^memory/); val[c] = $9; ci[c] = $11; n[c] = conc
    measured[c] = $13; warmup[c] = warm
}
function meets(c) { return !mem[c] && val[c] != "-" && val[c] + 0 <= b + 0 }
function inside(c,    x) {
    if (ci[c] == "-") return 0
    x = ci[c]; gsub(/\[|\]/, "", x); split(x, lh, ",")
    return lh[1] + 0 >= 0 && lh[1] + 0 <= b + 0 && b + 0 <= lh[2] + 0
}
END {
    best = 0
    for (c in seen) if (meets(c) && c + 0 > best) best = c + 0
    if (best == 0 || !((best + 1) in seen)) exit
    for (c in seen) if (c + 0 < best && !meets(c)) exit
    up = best + 1
    stop = mem[up] ? "memory" : "latency"
    check_ms = mem[up] ? "memory" : val[up]
    noisy = inside(best) || (!mem[up] && inside(up))
    print best, n[best], val[best], ci[best], stop, up, check_ms, warmup[best], measured[best], noisy
}
