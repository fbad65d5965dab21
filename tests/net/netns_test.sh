#!/usr/bin/env bash
# Runs v4-32 with single-host infeed across four network namespaces (one per TPU
# host, TCP between them): every shard for hosts 1-3 crosses a veth link, is relayed
# by that host's rank and verified by its core. Skips (exit 77) without root or ip.
set -u
tpusim=$1
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
[ "$(id -u)" -eq 0 ] && command -v ip >/dev/null && ip netns list >/dev/null 2>&1 || exit 77
log=$(mktemp)
trap '"$source_dir/scripts/netns-cluster" down; rm -f "$log"' EXIT
TPUSIM_BIN=$tpusim TPUSIM_TIMEOUT=240 "$source_dir/scripts/netns-cluster" run \
  "$source_dir/configs/runs/v4-32-single-host.yaml" --set train.steps=20 --set infeed.verify=true \
  --placement-log "$log" --quiet || { echo "netns run failed"; exit 1; }
lines=$(wc -l < "$log")
remote=$(grep -c '"host":[123],' "$log")
echo "placement lines: $lines (expected 320), on hosts 1-3: $remote (expected 240)"
[ "$lines" -eq 320 ] && [ "$remote" -eq 240 ]
