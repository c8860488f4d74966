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

# Redis Cluster: three masters, three replicas.
redis_nodes=()
for i in 1 2 3 4 5 6; do
  port=$(free_port)
  mkdir -p "$work/redis$i"
  (cd "$work/redis$i" && exec redis-server --port "$port" --bind 127.0.0.1 --cluster-enabled yes \
    --cluster-config-file nodes.conf --save "" --appendonly no >/dev/null 2>&1) &
  pids+=($!)
  redis_nodes+=("127.0.0.1:$port")
  for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
done
redis-cli --cluster create "${redis_nodes[@]}" --cluster-replicas 1 --cluster-yes >/dev/null
redis_port=${redis_nodes[0]#127.0.0.1:}
for _ in $(seq 100); do
  [ "$(redis-cli -p "$redis_port" cluster info | tr -d '\r' | grep cluster_state)" = \
    "cluster_state:ok" ] && break
  sleep 0.1
done
masters=$(redis-cli -p "$redis_port" cluster nodes | awk '$3 ~ /master/ {split($2, a, "@"); print a[1]}' |
  paste -sd,)

# The ardma cluster.
start_etcd "$work/etcd"
pids+=("$etcd_pid")
cluster="etcd://127.0.0.1:$etcd_port/bench"
for _ in $(seq 100); do
  "$bin"/ardma --server "$cluster" cluster status >/dev/null 2>&1 && break
  sleep 0.1
done
for i in 1 2 3; do
  "$bin"/ardmad --listen 127.0.0.1:0 --port-file "$work/ardmad$i.port" --quiet \
    --cluster "$cluster" &
  pids+=($!)
  for _ in $(seq 100); do [ -s "$work/ardmad$i.port" ] && break; sleep 0.1; done
done
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
