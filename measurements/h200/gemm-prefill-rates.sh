#!/bin/sh
# The prefill GEMM table of models/hw/h200.ini ([hw] prefill_gemm_m, prefill_gemm_flops,
# prefill_expert_flops) from a gemm-prefill suite run (kernels/suites/gemm-prefill.suite):
#   sh measurements/h200/gemm-prefill-rates.sh [measurements/h200/gemm-prefill.csv]
# At each M, the FLOPs summed over a set of shapes over their median times summed: the
# projections and the shared expert of a GLM-5.3 MoE layer (q_a, q_b, kv_a, o_proj, the
# indexer's query, the shared expert's gate/up and down) at M tokens, and the routed experts'
# gate/up and down at M rows. The dense layers' MLP is printed beside them (3 of 78 layers
# run it; the projections' rate stands for it in the simulator).
csv=${1:-measurements/h200/gemm-prefill.csv}
awk -F, '
NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
$col["kernel"] == "gemm" && $col["checked"] == 1 {
    k = $col["pattern"] "," $col["m"]; f[k] += $col["flops"]; t[k] += $col["median_us"] * 1e-6
    if ($col["pattern"] == "glm53.q_a") ms[$col["m"]] = 1
}
function rate(names, m,    n, a, i, ff, tt) {
    n = split(names, a, " ")
    for (i = 1; i <= n; i++) { ff += f[a[i] "," m]; tt += t[a[i] "," m] }
    return ff / tt
}
END {
    proj = "glm53.q_a glm53.q_b glm53.kv_a glm53.o_proj glm53.idx_q glm53.expert_gate_up glm53.expert_down"
    exp_ = "glm53.expert_gate_up glm53.expert_down"
    dense = "glm53.dense_gate_up glm53.dense_down"
    n = 0
    for (m in ms) mm[++n] = m + 0
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (mm[j] < mm[i]) { x = mm[i]; mm[i] = mm[j]; mm[j] = x }
    printf "prefill_gemm_m ="; for (i = 1; i <= n; i++) printf "%s %d", (i > 1 ? "," : ""), mm[i]; print ""
    printf "prefill_gemm_flops ="; for (i = 1; i <= n; i++) printf "%s %.4ge12", (i > 1 ? "," : ""), rate(proj, mm[i]) / 1e12; print ""
    printf "prefill_expert_flops ="; for (i = 1; i <= n; i++) printf "%s %.4ge12", (i > 1 ? "," : ""), rate(exp_, mm[i]) / 1e12; print ""
    printf "; dense MLP (not a key):"; for (i = 1; i <= n; i++) printf " %.4ge12", rate(dense, mm[i]) / 1e12; print ""
}' "$csv"
