#!/usr/bin/env bash
# Replicated writes: a 3-server ardma cluster with one replica per primary against a Redis
# Cluster of 3 masters with one replica each, on this machine, in one run (docs/BENCHMARKS.md,
# "Replicated DHT writes").
#
#   bench/replicated_compare.sh [ROUNDS]      (default 3)
#
# Redis: six redis-server with cluster-enabled yes (no persistence), redis-cli --cluster create
# --cluster-replicas 1; each write is SET then WAIT 1 0 on the key's master (acknowledged once a
# replica has it). ardma: etcd and three ardmad --cluster, `ardma cluster create --replicas 1`;
# each write a DHT PUT through a Cluster client (acknowledged once the replica applied it). Both
# driven by bench/cluster_bench (BM_RedisSetWait, BM_ReplicatedPut): 16 threads, one request in
# flight each, 3-byte values, keys from 10,000, over TCP. Rounds alternate. Prints ops/s per round,
# the medians and the ratio ardma / Redis (the issue's target: >= 1.5). Installs redis-server and
# redis-tools if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/cluster_lib.sh
source bench/cluster_lib.sh
bin=${BUILD_DIR:-build}/bin
rounds=${1:-3}

ensure_redis
./scripts/build.sh ardmad ardma cluster_bench >/dev/null

work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT

# Redis Cluster: three masters, three replicas; and the ardma cluster.
start_redis_cluster "$work" 6 1
masters=$(redis-cli -p "$redis_port" cluster nodes |
  awk '$3 ~ /master/ {split($2, a, "@"); print a[1]}' | paste -sd,)
start_ardma_cluster "$work" 3
"$bin"/ardma --server "$cluster" cluster create --replicas 1 >/dev/null

median() { sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
rows=$work/rows
: >"$rows"
run() {  # run BENCHMARK NAME: one round's ops/s
  ARDMA_BENCH_CLUSTER=$cluster ARDMA_BENCH_REDIS=$masters "$bin"/cluster_bench \
    --benchmark_filter="^$1/" --benchmark_min_time=3 --benchmark_format=csv 2>/dev/null |
    grep "^\"$1/" | awk -F, '{print $7}' | head -1  # items_per_second
}
for r in $(seq "$rounds"); do
  echo "$r redis-cluster $(run BM_RedisSetWait)" >>"$rows"
  echo "$r ardma $(run BM_ReplicatedPut)" >>"$rows"
done
printf '%-6s %-14s %12s\n' round system writes/s
awk '{printf "%-6s %-14s %12.0f\n", $1, $2, $3}' "$rows"
r=$(awk '$2=="redis-cluster" {print $3}' "$rows" | median)
a=$(awk '$2=="ardma" {print $3}' "$rows" | median)
awk -v r="$r" -v a="$a" 'BEGIN {
  printf "median: Redis Cluster SET+WAIT 1 0 %.0f/s; ardma replicated PUT %.0f/s; ratio %.2f\n",
         r, a, a / r }'
