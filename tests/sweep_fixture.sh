# tests/sweep_fixture.sh: sourced by the sweep tests (cli_dhsweep.sh, cli_sweep_mpi.sh,
# cli_sweep_slurm.sh). small_sweep FILE OUTPUT POLICIES SEEDS writes a small sweep file:
# three HiSparse budgets, 4 requests per GPU, 8 steps of short requests, so a sweep of it
# takes a second or two.
small_sweep() {
  cat >"$1" <<EOF2
[sweep]
policies = $3
seeds = $4
steps = 8
output = $2
[base]
workload.concurrency = 32
workload.output_len = 6
workload.output_len_max = 12
[axes]
policy.hisparse_budget_k = 1,2,3
EOF2
}
