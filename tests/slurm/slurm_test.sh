#!/usr/bin/env bash
# tpusim on a real Slurm: starts munge, slurmctld and slurmd (Debian's packages)
# on this machine with a config written to a temporary folder (one node, this
# machine, declared with 20 CPUs), then runs a v4-8 slice (one TPU host of 5 ranks,
# 4 steps) three ways and checks each report's rank count and that each placement
# log is byte for byte the one of the same run without Slurm:
#   salloc -n 5 tpusim launch ...                 (mpirun on the allocation's node)
#   salloc -n 5 tpusim launch --launcher srun ... (srun --mpi=pmix, arbitrary distribution)
#   sbatch -n 5 --wait configs/slurm/v4-32.sbatch ... (the shipped script, its report)
# plus `sbatch --test-only` of both shipped scripts against the controller, and the
# refusal of an allocation too small for the slice; the launcher lines the first two
# ran are checked through --dry-run in the same allocation. Stops the daemons it started by
# pid. Skips (77) only without root, without the packages, or when the daemons do
# not come up (their logs are printed). Every wait is under `timeout`.
set -u
tpusim=$(realpath "$1")
src=$(cd "$(dirname "$0")/../.." && pwd)
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "the daemons run as root here (SlurmUser=root); not root"
for p in munged slurmctld slurmd salloc sbatch srun sinfo; do
  command -v "$p" >/dev/null || skip "no $p (scripts/install-deps installs munge, slurmctld, slurmd, slurm-client)"
done
w=$(mktemp -d /tmp/tpusim-slurm.XXXXXX)
chmod 755 "$w"
# A daemon whose parent does not reap it stays a zombie: that counts as ended.
alive() { local state; state=$(ps -o stat= -p "$1" 2>/dev/null) && [[ $state != Z* ]]; }
# Stops the daemon of pid file $1 while its pid is still daemon $2's (a pid that
# another process took since is left alone).
stop_daemon() {
  [ -s "$1" ] || return 0
  local pid
  pid=$(cat "$1")
  rm -f "$1"
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ] || return 0
  kill "$pid" 2>/dev/null
  for _ in $(seq 50); do alive "$pid" || return 0; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null
}
stop() {
  # A job still running (a timeout cut its wait) is cancelled while slurmd can end it.
  if [ -s "$w/slurmctld.pid" ] && [ -n "$(timeout 5 squeue -h -o %i 2>/dev/null)" ]; then
    timeout 10 scancel --user=root
    for _ in $(seq 50); do [ -z "$(timeout 5 squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.1; done
  fi
  stop_daemon "$w/slurmd.pid" slurmd
  stop_daemon "$w/slurmctld.pid" slurmctld
  stop_daemon "$w/munge/pid" munged
  rm -rf "$w"
}
trap stop EXIT
node=$(hostname -s)

start_munge() {
  mkdir -p "$w/state" "$w/spool" "$w/munge" "$w/log"
  chmod 755 "$w/munge"
  dd if=/dev/urandom of="$w/munge/key" bs=1024 count=1 2>/dev/null && chmod 400 "$w/munge/key"
  munged --socket="$w/munge/sock" --key-file="$w/munge/key" --pid-file="$w/munge/pid" \
    --seed-file="$w/munge/seed" --log-file="$w/log/munged.log" -f
}

write_config() {  # PORT: slurmctld's; slurmd's is the next
  cat > "$w/slurm.conf" <<CONF
ClusterName=tpusim$$
SlurmctldHost=$node(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$w/munge/sock
SlurmctldPort=$1
SlurmdPort=$(($1 + 1))
StateSaveLocation=$w/state
SlurmdSpoolDir=$w/spool
SlurmctldPidFile=$w/slurmctld.pid
SlurmdPidFile=$w/slurmd.pid
SlurmctldLogFile=$w/log/slurmctld.log
SlurmdLogFile=$w/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
ReturnToService=2
SlurmdParameters=config_overrides
NodeName=$node NodeAddr=127.0.0.1 CPUs=20 Sockets=1 CoresPerSocket=20 ThreadsPerCore=1 State=UNKNOWN
PartitionName=tpusim Nodes=$node Default=YES MaxTime=INFINITE State=UP
CONF
}

# Whether the daemon whose pid file is $1 wrote it and is gone (a daemon forks
# before it binds its port, so it can start and then die).
daemon_died() { [ -s "$1" ] && ! alive "$(cat "$1")"; }

# slurmctld and slurmd until the node is idle; another pair of ports if a port
# was taken (three tries).
start_daemons() {
  start_munge || return 1
  export SLURM_CONF=$w/slurm.conf
  for _ in 1 2 3; do
    # Below Linux's ephemeral range (32768-60999): a port there can be an outgoing
    # connection's, and slurmctld then dies with "Address already in use".
    write_config $((20000 + RANDOM % 12000))
    if slurmctld -f "$SLURM_CONF" && slurmd -f "$SLURM_CONF"; then
      local deadline=$((SECONDS + 30))
      while ((SECONDS < deadline)); do
        [ "$(timeout 2 sinfo -h -n "$node" -o %t 2>/dev/null)" = idle ] && return 0
        if daemon_died "$w/slurmctld.pid" || daemon_died "$w/slurmd.pid"; then break; fi  # the next ports
        sleep 0.2
      done
    fi
    stop_daemon "$w/slurmd.pid" slurmd
    stop_daemon "$w/slurmctld.pid" slurmctld
  done
  return 1
}
if ! start_daemons; then
  for f in "$w"/log/*.log; do echo "== $f"; tail -n 5 "$f"; done
  skip "munge, slurmctld or slurmd did not start (logs above)"
fi
echo "slurm $(sinfo -V | cut -d' ' -f2) up on node $node in $w"

. "$src/scripts/mpi-env"
run=$src/configs/runs/v3-8-per-host.yaml
small=(--set topology=v4-8 --set model.hidden=[16,8] --set train.iterations_per_loop=2 --set train.steps=4
       --set train.optimizer.learning_rate=0.05 --set input.global_batch=32 --quiet)
fail=0
check() {  # NAME OUTPUT_FILE REPORT PLACEMENT_LOG
  local name=$1
  grep -qx "  node $node: TPU host 0 (ranks 0-4)" "$2" || { echo "$name: no placement line"; cat "$2"; fail=1; }
  python3 -c "import json, sys; e = json.load(open(sys.argv[1]))['environment']
sys.exit(0 if e['mpi_ranks'] == 5 and e['world_size'] == 5 else 1)" "$3" \
    || { echo "$name: report $3 is not of 5 ranks"; fail=1; }
  cmp -s "$w/plain.jsonl" "$4" || { echo "$name: placement log differs from the run without Slurm"; fail=1; }
}
# The same run without Slurm: no SLURM_* in its environment.
env -u SLURM_CONF -u SLURM_JOB_ID -u SLURM_JOB_NODELIST timeout -k 5 120 "$tpusim" launch "$run" \
  "${small[@]}" --placement-log "$w/plain.jsonl" --report "$w/plain.json" > "$w/plain.out" 2>&1 \
  || { cat "$w/plain.out"; echo "the run without Slurm failed"; exit 1; }

for launcher in mpirun srun; do
  timeout -k 5 120 salloc -n 5 "$tpusim" launch "$run" "${small[@]}" --launcher $launcher \
    --placement-log "$w/$launcher.jsonl" --report "$w/$launcher.json" > "$w/$launcher.out" 2>&1 \
    || { cat "$w/$launcher.out"; echo "salloc ... --launcher $launcher failed"; fail=1; }
  check "salloc $launcher" "$w/$launcher.out" "$w/$launcher.json" "$w/$launcher.jsonl"
done
# The lines each launcher ran, as --dry-run prints them inside an allocation.
for launcher in mpirun srun; do
  timeout -k 5 60 salloc -n 5 "$tpusim" launch "$run" "${small[@]}" --launcher $launcher --dry-run \
    > "$w/dry-$launcher.out" 2>/dev/null
done
grep -q " mpirun -np 5 --bind-to none --host $node:5 --map-by slot " "$w/dry-mpirun.out" \
  || { echo "salloc: no mpirun line on the allocation's node"; cat "$w/dry-mpirun.out"; fail=1; }
grep -q " srun --mpi=pmix[_v0-9]* --ntasks 5 --distribution=arbitrary --nodelist=$node,$node,$node,$node,$node " \
  "$w/dry-srun.out" || { echo "salloc: no srun line"; cat "$w/dry-srun.out"; fail=1; }

# The shipped batch script, its #SBATCH lines overridden for this one node. Its end
# is polled every 0.2 s (sbatch --wait polls every 2 s and more, which cost the
# suite up to 8 s); the job's exit code is the one scontrol keeps for it.
batch_job() {
  local id state
  id=$(cd "$src" && TPUSIM=$tpusim TPUSIM_CONFIG=$run TPUSIM_OUT=$w/batch timeout 30 \
    sbatch --parsable -n 5 --output "$w/batch.out" configs/slurm/v4-32.sbatch "${small[@]}") || return 1
  for _ in $(seq 750); do
    state=$(timeout 5 scontrol -o show job "$id" 2>/dev/null)
    case $state in
      *JobState=PENDING* | *JobState=RUNNING* | *JobState=CONFIGURING* | *JobState=COMPLETING* | "") sleep 0.2 ;;
      *) echo "$state"; [[ $state == *"JobState=COMPLETED"*"ExitCode=0:0"* ]]; return ;;
    esac
  done
  echo "job $id still running after 150 s"
  return 1
}
batch_job > "$w/sbatch.log" 2>&1 \
  || { cat "$w/sbatch.log" "$w/batch.out"; echo "sbatch configs/slurm/v4-32.sbatch failed"; fail=1; }
check sbatch "$w/batch.out" "$w/batch/report.json" "$w/batch/placement.jsonl"
for script in v4-32 capacity; do
  (cd "$src" && timeout 30 sbatch --test-only "configs/slurm/$script.sbatch") > "$w/test-only.out" 2>&1 \
    || { cat "$w/test-only.out"; echo "sbatch --test-only configs/slurm/$script.sbatch refused"; fail=1; }
done

# An allocation too small for v4-32 (20 ranks): one line, exit 2, no mpirun.
timeout -k 5 60 salloc -n 8 "$tpusim" launch "$src/configs/runs/v4-32-single-host.yaml" > "$w/small.out" 2>"$w/small.err"
rc=$?
expected="tpusim: error: v4-32 needs 20 ranks; this allocation has 8 tasks on 1 node (Slurm job N): ask salloc or sbatch for -n 20"
line=$(grep -v '^salloc: ' "$w/small.err" | sed 's/Slurm job [0-9]*/Slurm job N/')
[ $rc -eq 2 ] && [ "$line" = "$expected" ] && [ ! -s "$w/small.out" ] \
  || { echo "small allocation: rc $rc"; cat "$w/small.out" "$w/small.err"; fail=1; }
[ $fail -eq 0 ] && echo "salloc (mpirun, srun) and sbatch: 5 ranks, placement logs identical to the run without Slurm"
exit $fail
