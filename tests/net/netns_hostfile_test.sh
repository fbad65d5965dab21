#!/usr/bin/env bash
# tpusim launch --hostfile across network namespaces named as nodes: v4-32 (four TPU
# hosts of five ranks) on a hostfile whose first node holds two TPU hosts, whose
# second is too small for one and is skipped, and whose last two take one each.
# Checks the placement launch prints, that the ranks ran in those groups (the role
# listing numbers each rank's node as MPI sees it), and that a hostfile with too few
# slots is refused in one line before mpirun starts. Then the same slice in the
# threads layout (an MPI rank per TPU host): its 4 ranks on a hostfile of 2 + 1 + 1
# slots, and the simulated ranks in the same three groups. Skips (77) without root or ip.
set -u
tpusim=$1
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
[ "$(id -u)" -eq 0 ] && command -v ip >/dev/null && ip netns list >/dev/null 2>&1 || exit 77
work=$(mktemp -d)
trap '"$source_dir/scripts/netns-cluster" down; rm -rf "$work"' EXIT
printf 'tpusim0 slots=12\ntpusim1 slots=4\ntpusim2 slots=5\ntpusim3 slots=5\n' > "$work/hosts"
TPUSIM_BIN=$tpusim TPUSIM_TIMEOUT=240 "$source_dir/scripts/netns-cluster" launch "$work/hosts" \
  "$source_dir/configs/runs/v4-32-single-host.yaml" --set train.steps=20 --set infeed.verify=true \
  > "$work/out" 2>&1 || { cat "$work/out"; echo "netns hostfile launch failed"; exit 1; }
fail=0
expect() { grep -qE "$1" "$work/out" || { echo "missing: $1"; fail=1; }; }
expect '^  node tpusim0: TPU hosts 0-1 \(ranks 0-9\)$'
expect '^  node tpusim2: TPU host 2 \(ranks 10-14\)$'
expect '^  node tpusim3: TPU host 3 \(ranks 15-19\)$'
grep -q 'node tpusim1:' "$work/out" && { echo "tpusim1 (4 slots) should hold no TPU host"; fail=1; }
# Where every rank ran as MPI sees it (ranks sharing memory share a node; nodes
# are numbered by their first rank): ranks 0-9, 10-14 and 15-19, three nodes.
for r in $(seq 0 19); do
  if [ "$r" -lt 10 ]; then node=0; elif [ "$r" -lt 15 ]; then node=1; else node=2; fi
  grep -qE "^  rank +$r: .*, node $node \(.*\), pid" "$work/out" || { echo "rank $r not on node $node"; fail=1; }
done
grep -q "crosses the network" "$work/out" && { echo "a TPU host was split over nodes"; fail=1; }
# The threads layout: an MPI rank per TPU host, its 5 ranks threads of it.
printf 'tpusim0 slots=2\ntpusim1 slots=1\ntpusim2 slots=1\n' > "$work/threads-hosts"
TPUSIM_BIN=$tpusim TPUSIM_TIMEOUT=240 "$source_dir/scripts/netns-cluster" launch "$work/threads-hosts" \
  "$source_dir/configs/runs/v4-32-single-host.yaml" --set train.steps=20 --set infeed.verify=true \
  --set cluster.layout=threads > "$work/threads" 2>&1 || { cat "$work/threads"; echo "threads layout launch failed"; exit 1; }
grep -qE '^  node tpusim0: TPU hosts 0-1 \(ranks 0-1\)$' "$work/threads" || { echo "threads: placement on tpusim0"; fail=1; }
grep -qE '^  node tpusim2: TPU host 3 \(ranks 3\)$' "$work/threads" || { echo "threads: placement on tpusim2"; fail=1; }
for r in $(seq 0 19); do
  if [ "$r" -lt 10 ]; then node=0; elif [ "$r" -lt 15 ]; then node=1; else node=2; fi
  grep -qE "^  rank +$r: .*, node $node \(.*\), pid" "$work/threads" || { echo "threads: rank $r not on node $node"; fail=1; }
done
# Too few slots: one line, exit 2, and no mpirun.
printf 'tpusim0 slots=9\ntpusim1 slots=9\n' > "$work/small"
start=$(date +%s%N)
"$tpusim" launch "$source_dir/configs/runs/v4-32-single-host.yaml" --hostfile "$work/small" > "$work/small.out" 2>&1
rc=$?
ms=$(( ($(date +%s%N) - start) / 1000000 ))
expected="tpusim: error: hostfile $work/small: 18 slots on 2 nodes hold 2 TPU hosts of 5 ranks each (a TPU host's ranks stay on one node); the slice needs 4 (20 ranks)"
[ "$rc" -eq 2 ] && [ "$(cat "$work/small.out")" = "$expected" ] || {
  echo "too few slots: rc $rc, printed:"; cat "$work/small.out"; fail=1; }
echo "hostfile placement checked; too few slots refused in ${ms} ms"
[ "$ms" -lt 1000 ] || { echo "refusal took ${ms} ms"; fail=1; }
exit $fail
