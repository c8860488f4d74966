#!/usr/bin/env bash
# A 3-server ardma cluster's DHT PUT/GET against a 3-master Redis Cluster's SET/GET, on this
# machine, in one run (docs/BENCHMARKS.md, "Cluster").
#
#   bench/cluster_compare.sh [ROUNDS]      (default 3; ARDMAD_FLAGS adds flags to every ardmad,
#                                           e.g. ARDMAD_FLAGS="--io-threads 1")
#
# Redis: three redis-server with cluster-enabled yes (no replicas, no persistence), created with
# redis-cli --cluster create, driven by redis-benchmark --cluster. ardma: etcd and three ardmad
# with --cluster, the map made by `ardma cluster create`, driven by ardma-bench --server
# etcd://... (each connection bound to one member and drawing that member's keys, as
# redis-benchmark --cluster does), over TCP and over UCX shared memory (--ucx). Both drivers: an
# event-loop thread per server (redis-benchmark --cluster starts one per node unless told
# otherwise; ardma-bench on a cluster likewise), 50 connections in all, one request in flight
# each, 200,000 operations, 3-byte values, keys from 10,000. Rounds alternate. Prints ops/s per
# round, medians and the ratios ardma / Redis Cluster. Installs redis-server and redis-tools if
# missing.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/cluster_lib.sh
source bench/cluster_lib.sh
bin=${BUILD_DIR:-build}/bin
rounds=${1:-3}

ensure_redis
./scripts/build.sh ardmad ardma ardma_bench >/dev/null

work=$(mktemp -d)
pids=()
rows=$work/rows
trap 'kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
export UCX_TLS=${UCX_TLS:-shm,self}

# Redis Cluster, and the ardma cluster.
start_redis_cluster "$work" 3 0
# shellcheck disable=SC2086  # ARDMAD_FLAGS is a list of flags
start_ardma_cluster "$work" 3 ${ARDMAD_FLAGS:-}
"$bin"/ardma --server "$cluster" cluster create >/dev/null

median() { sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
shape=(-c 50 -n 200000 -d 3 -r 10000)
: >"$rows"
for r in $(seq "$rounds"); do
  redis-benchmark --cluster -h 127.0.0.1 -p "$redis_port" -t set,get "${shape[@]}" --csv \
    2>/dev/null | tr -d '"' |
    awk -F, -v r="$r" '$1=="SET"||$1=="GET" {print r, "redis-cluster", $1, $2}' >>"$rows"
  for transport in tcp ucx; do
    flag=""
    [ "$transport" = ucx ] && flag=--ucx
    # shellcheck disable=SC2086  # an empty flag is no argument
    "$bin"/ardma-bench --server "$cluster" $flag -t dht.put,dht.get "${shape[@]}" --csv |
      awk -F, -v r="$r" -v s="ardma-$transport" '$1=="dht.put" || $1=="dht.get" {
          print r, s, ($1 == "dht.get") ? "GET" : "SET", $8
        }' >>"$rows"
  done
done
printf '%-6s %-14s %-4s %12s\n' round system op ops/s
sort -k3,3 -k2,2 -k1,1n "$rows" | awk '{printf "%-6s %-14s %-4s %12.0f\n", $1, $2, $3, $4}'
med() { awk -v s="$1" -v op="$2" '$2==s && $3==op {print $4}' "$rows" | median; }
for op in GET SET; do
  t=$(med ardma-tcp $op) u=$(med ardma-ucx $op) c=$(med redis-cluster $op)
  awk -v op=$op -v t="$t" -v u="$u" -v c="$c" 'BEGIN {
    printf "median %s: Redis Cluster %.0f/s; ardma over TCP %.0f/s (ratio %.2f), over UCX %.0f/s (ratio %.2f)\n",
           op, c, t, t / c, u, u / c }'
done
