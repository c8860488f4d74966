#!/usr/bin/env bash
# Active DHT GET/PUT vs Redis GET/SET with 50 connections, on this machine, in one run.
#
#   bench/redis_compare.sh [ROUNDS]      (default 3)
#
# Each round runs redis-benchmark (-t set,get -c 50 -d 3 -r 10000, its default workload shape)
# against a private redis-server on a free loopback port, then list_dht_bench's 50-connection
# active DHT benchmarks (3-byte values, 10,000 keys) against an in-process ardmad. Rounds
# alternate so drift in the machine's load hits both sides. Prints requests/s per round, the
# medians and the ratio ardma / redis. Installs redis-server and redis-tools if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}

if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools >/dev/null
fi
./scripts/build.sh list_dht_bench >/dev/null

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --daemonize no \
  >/dev/null 2>&1 &
redis_pid=$!
trap 'kill $redis_pid 2>/dev/null || true' EXIT
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done

median() { sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

: >/tmp/ardma_redis_compare.$$
for r in $(seq "$rounds"); do
  redis-benchmark -h 127.0.0.1 -p "$port" -t set,get -n 200000 -c 50 -d 3 -r 10000 --csv 2>/dev/null |
    tr -d '"' | awk -F, -v r="$r" '$1=="SET"||$1=="GET" {print r, "redis", $1, $2}' \
    >>/tmp/ardma_redis_compare.$$
  build/bin/list_dht_bench --benchmark_filter='BM_Dht(Get|Put)/rdma:0/value:3/real_time/threads:50' \
    --benchmark_min_time=2 --benchmark_format=csv 2>/dev/null |
    awk -F, -v r="$r" '/^"BM_Dht/ {
        op = ($1 ~ /Get/) ? "GET" : "SET";
        print r, "ardma", op, $7   # items_per_second
      }' >>/tmp/ardma_redis_compare.$$
done
printf '%-6s %-6s %-4s %12s\n' round system op requests/s
sort -k3,3 -k2,2 -k1,1n /tmp/ardma_redis_compare.$$ | awk '{printf "%-6s %-6s %-4s %12.0f\n", $1, $2, $3, $4}'
for op in GET SET; do
  a=$(awk -v op=$op '$2=="ardma" && $3==op {print $4}' /tmp/ardma_redis_compare.$$ | median)
  b=$(awk -v op=$op '$2=="redis" && $3==op {print $4}' /tmp/ardma_redis_compare.$$ | median)
  awk -v op=$op -v a="$a" -v b="$b" 'BEGIN {printf "median %s: ardma %.0f/s, redis %.0f/s, ratio %.2f\n", op, a, b, a / b}'
done
rm -f /tmp/ardma_redis_compare.$$
