#!/bin/sh
# cli_sweep_slurm.sh: the script of `dhsweep slurm` submitted to a real,
# single-node Slurm that this test starts itself: a munge key, munged,
# slurmctld and slurmd as root with a slurm.conf in a temporary folder naming
# this host (hostname -s) with its CPUs and memory (slurmd -C), then sbatch,
# a wait for the array, `dhsweep merge`, and the table compared with a run on
# threads. The daemons are stopped by their pids and the folder removed on
# every exit, failures included. Needs root (slurmd runs jobs as their
# user); Debian's slurm-wlm and munge are installed here when missing.
# Runs from the repository root.
bin=./bin/dhsweep
tmp=$(mktemp -d)
pids=""
cleanup() {
  for p in $pids; do kill "$p" 2>/dev/null; done
  i=0; while [ $i -lt 50 ]; do
    alive=""; for p in $pids; do kill -0 "$p" 2>/dev/null && alive="$alive $p"; done
    [ -z "$alive" ] && break; sleep 0.1; i=$((i + 1))
  done
  for p in $pids; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1"; }
# need: the rest of the test cannot run; report one failure and stop.
need() { fail "$1"; exit 1; }

[ "$(id -u)" = 0 ] || need "slurm: needs root to start slurmd (run make test as root)"
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge) >"$tmp/apt.log" 2>&1 ||
    need "slurm: unable to install slurm-wlm and munge: $(tail -2 "$tmp/apt.log")"
fi
for c in slurmctld slurmd munged sbatch squeue sinfo; do command -v $c >/dev/null || need "slurm: $c not found"; done
pass "slurm and munge installed"

host=$(hostname -s)
# Ports away from Slurm's defaults (6817, 6818), so that another Slurm on this host is not disturbed.
base=$((20000 + $$ % 20000))
mkdir -p "$tmp/state" "$tmp/spool" "$tmp/munge"
dd if=/dev/urandom of="$tmp/munge/key" bs=1024 count=1 2>/dev/null; chmod 400 "$tmp/munge/key"
munged -F -f --socket="$tmp/munge/sock" --key-file="$tmp/munge/key" --pid-file="$tmp/munge/pid" \
  --log-file="$tmp/munge/log" --seed-file="$tmp/munge/seed" >"$tmp/munged.out" 2>&1 &
pids="$pids $!"
i=0; while [ $i -lt 50 ] && [ ! -S "$tmp/munge/sock" ]; do sleep 0.1; i=$((i + 1)); done
[ -S "$tmp/munge/sock" ] || need "slurm: munged did not start: $(cat "$tmp/munged.out" "$tmp/munge/log" 2>/dev/null | tail -3)"
node=$(slurmd -C 2>/dev/null | head -1 | sed 's/ UpTime=.*//')
case "$node" in NodeName=*) ;; *) need "slurm: slurmd -C printed no node line" ;; esac
cat >"$tmp/slurm.conf" <<EOF2
ClusterName=dhsweeptest
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$base
SlurmdPort=$((base + 1))
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$tmp/munge/sock
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
$node
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF2
export SLURM_CONF="$tmp/slurm.conf"
slurmctld -D -i -f "$SLURM_CONF" >"$tmp/slurmctld.out" 2>&1 &
pids="$pids $!"
slurmd -D -f "$SLURM_CONF" >"$tmp/slurmd.out" 2>&1 &
pids="$pids $!"
i=0; state=""
while [ $i -lt 300 ]; do
  state=$(sinfo -h -n "$host" -o %T 2>/dev/null | head -1)
  case "$state" in idle*|mixed*|allocated*) break ;; esac
  sleep 0.2; i=$((i + 1))
done
case "$state" in idle*|mixed*|allocated*) pass "single-node slurm up ($host)" ;;
  *) need "slurm: the node did not come up (state '$state'): $(tail -3 "$tmp/slurmctld.log" "$tmp/slurmd.log" 2>/dev/null)" ;; esac

. tests/sweep_fixture.sh
small_sweep "$tmp/s.ini" "$tmp/slurm-out" hisparse,adaptive 1,2
sed "s|^output = .*|output = $tmp/threads-out|" "$tmp/s.ini" >"$tmp/t.ini"
"$bin" run "$tmp/t.ini" --workers 2 --quiet
script=$("$bin" slurm "$tmp/s.ini" --tasks 4 --cpus 1) || need "slurm: dhsweep slurm failed"
job=$(sbatch --parsable "$script" 2>"$tmp/sbatch.err") || need "slurm: sbatch failed: $(cat "$tmp/sbatch.err")"
job=${job%%;*}
pass "sbatch accepted the array (job $job)"
i=0
while [ $i -lt 1500 ] && [ -n "$(squeue -h -j "$job" 2>/dev/null)" ]; do sleep 0.2; i=$((i + 1)); done
if [ -z "$(squeue -h -j "$job" 2>/dev/null)" ]; then pass "array finished"; else need "slurm: the array did not finish in 300 s"; fi
n=$(ls "$tmp"/slurm-out/slurm/"${job}"_*.out 2>/dev/null | wc -l)
if [ "$n" -eq 4 ]; then pass "four array tasks ran"; else fail "four array tasks ran ($n logs)"; fi
if "$bin" merge "$tmp/slurm-out" >"$tmp/out" 2>&1 && cmp -s "$tmp/slurm-out/results.csv" "$tmp/threads-out/results.csv" &&
   cmp -s "$tmp/slurm-out/results.h5" "$tmp/threads-out/results.h5"; then pass "merged shards equal a run on threads"
else fail "merged shards equal a run on threads: $(cat "$tmp/out"; cat "$tmp"/slurm-out/slurm/*.out 2>/dev/null | tail -3)"; fi
