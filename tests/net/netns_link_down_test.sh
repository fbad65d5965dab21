#!/usr/bin/env bash
# A TPU host lost mid-run, on the network-namespace cluster (one namespace per TPU
# host of v4-32, TCP between them), under a 5 s watchdog:
#   1. its link goes down (`ip link set tpusimv2 down` on the bridge's side) while the
#      job runs: one line names TPU host 2 and its ranks, and the job ends within the
#      deadline — Open MPI's keepalives find the silent node first, `tpusim launch`
#      says so in its words and stops an mpirun left waiting for that node;
#   2. its process is killed (threads layout: one process is the whole TPU host, so
#      no rank of that node survives to name it): one line names rank 2, its signal
#      and TPU host 2.
# The link is restored and the namespace's leftovers (processes this test started,
# found by pid in that namespace) are ended before the next case, which runs across
# the restored link. Skips (77)
# without root or ip.
set -u
tpusim=$1
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
[ "$(id -u)" -eq 0 ] && command -v ip >/dev/null && ip netns list >/dev/null 2>&1 || exit 77
work=$(mktemp -d)
cluster=$source_dir/scripts/netns-cluster
trap 'ip link set tpusimv2 up 2>/dev/null; end_leftovers; "$cluster" down; rm -rf "$work"' EXIT
deadline_s=5
fail=0

# The pids of this job's tpusim processes in namespace tpusim2 (`rank` = one world rank only).
tpusim_pids() {
  local rank=${1:-}
  for p in $(ip netns pids tpusim2 2>/dev/null); do
    [ "$(readlink "/proc/$p/exe" 2>/dev/null)" = "$(readlink -f "$tpusim")" ] || continue
    [ -z "$rank" ] || tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$rank" || continue
    echo "$p"
  done
}

end_leftovers() {
  for p in $(ip netns pids tpusim2 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
}

# Starts the job in the background (output in $work/out), waits until it trains
# (its first loop line: every rank is past MPI's start-up and in the cross-replica
# sums) and 1 s more, then runs the fault ($1) and waits for the job to end. A fault
# during start-up is not what this test checks: Open MPI does not notice a node
# lost before its daemons have all reported in (README "Not done yet"), and 3 s
# after TPU host 2's processes appeared was not always past it (a CI run of the
# sanitized build in 8 saw no error at all until the job's 120 s timeout).
# Sets `elapsed` to the seconds from the fault to the job's end and `rc`.
run_with_fault() {
  local fault=$1 hostfile=$2
  shift 2
  rm -f "$work/rc"
  (TPUSIM_BIN=$tpusim TPUSIM_TIMEOUT=120 "$cluster" launch "$hostfile" \
     "$source_dir/configs/runs/v4-32-single-host.yaml" --set train.steps=1000000 \
     --set run.watchdog_s=$deadline_s "$@" > "$work/out" 2>&1; echo $? > "$work/rc") &
  # A job that ends before its ranks start (mpirun failed) is reported at once.
  for _ in $(seq 1 240); do [ -n "$(tpusim_pids)" ] || [ -f "$work/rc" ] && break; sleep 0.5; done
  if [ -z "$(tpusim_pids)" ]; then
    echo "TPU host 2 never started"; cat "$work/out"
    # Open MPI sometimes fails to start a job right after the namespace's link came
    # back (1 CI run in 3, cause not found): the start, which is not what this test
    # checks, is tried once more; the fault is then run on that job.
    if [ "${retried:-0}" -eq 0 ] && [ -f "$work/rc" ]; then
      retried=1; echo "(starting the job once more)"; run_with_fault "$fault" "$hostfile" "$@"; return
    fi
    fail=1; return
  fi
  for _ in $(seq 1 600); do grep -q '^loop ' "$work/out" || [ -f "$work/rc" ] && break; sleep 0.1; done
  if ! grep -q '^loop ' "$work/out"; then
    echo "the job did not finish its first loop within 60 s"; cat "$work/out"; fail=1
  fi
  sleep 1
  local start
  start=$(date +%s%N)
  $fault
  # The job's own timeout (120 s) ends it, and launch kills an mpirun that outlives
  # that; this bound only keeps a broken launch from hanging the test.
  for _ in $(seq 1 1800); do [ -f "$work/rc" ] && break; sleep 0.1; done
  [ -f "$work/rc" ] || { echo "the job did not end 180 s after the fault"; fail=1; echo 124 > "$work/rc"; }
  elapsed=$(( ($(date +%s%N) - start) / 1000000 ))
  rc=$(cat "$work/rc")
}

# One tpusim error line in the output, and it is `expected` (a regex).
expect_one_line() {
  local expected=$1 what=$2
  local lines
  lines=$(grep -c 'error' "$work/out")
  if [ "$lines" -ne 1 ] || ! grep -qE "$expected" "$work/out"; then
    echo "$what: expected one line matching: $expected"; grep -v '^  ' "$work/out"; fail=1
  fi
  [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { echo "$what: exit code $rc"; fail=1; }
  echo "$what: ended $elapsed ms after the fault (deadline ${deadline_s} s), exit $rc"
  grep 'error' "$work/out"
}

link_down() { ip link set tpusimv2 down; }
kill_host_process() { kill -9 $(tpusim_pids 2); }

printf 'tpusim%d slots=5\n' 0 1 2 3 > "$work/hosts"
run_with_fault link_down "$work/hosts"
expect_one_line '^tpusim: error: lost TPU host 2 \(ranks 10-14\) on node tpusim2: ' "link down"
[ "$elapsed" -le $((deadline_s * 1000 + 2000)) ] || { echo "link down: the job outlived the deadline + 2 s"; fail=1; }
ip link set tpusimv2 up
end_leftovers
# The namespace is whole again: its link up (the next case runs across it).
ip link show tpusimv2 | grep -q 'state UP' || { echo "tpusimv2 did not come back up"; fail=1; }
[ -z "$(tpusim_pids)" ] || { echo "tpusim processes left in tpusim2"; fail=1; }

printf 'tpusim%d slots=1\n' 0 1 2 3 > "$work/threads-hosts"
run_with_fault kill_host_process "$work/threads-hosts" --set cluster.layout=threads
expect_one_line '^tpusim: error: rank 2 died of signal 9 \(Killed\) — TPU host 2 \(ranks 2\) on node tpusim2; ' "killed host"
[ "$elapsed" -le $((deadline_s * 1000 + 2000)) ] || { echo "killed host: the job outlived the deadline + 2 s"; fail=1; }
exit $fail
