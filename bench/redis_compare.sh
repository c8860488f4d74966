#!/usr/bin/env bash
# Active DHT PUT/GET vs Redis SET/GET, and vs the same as Redis Lua scripts (EVALSHA), with 50
# connections, on this machine, in one run: over TCP loopback on both sides, and over each
# system's fastest same-host path (ardmad over UCX shared memory, Redis over its Unix socket).
#
#   bench/redis_compare.sh [ROUNDS]      (default 3; ARDMAD_FLAGS adds ardmad flags, e.g.
#                                         ARDMAD_FLAGS="--io-threads 1")
#
# Both servers run as their own processes on loopback with default settings (Redis without
# persistence), and both are driven the same way: one event-loop thread, 50 connections, one
# request in flight per connection, 200,000 operations, 3-byte values, keys drawn from 10,000
# (redis-benchmark -t set,get -c 50 -n 200000 -d 3 -r 10000, and ardma-bench with the same flags).
# Rounds alternate so drift in the machine's load hits both sides. Prints operations/s per round,
# the medians and the ratios ardma / Redis. Installs redis-server and redis-tools if missing.
# The UCX row sets UCX_TLS=shm,self for both ends (override with UCX_TLS).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BUILD_DIR:-build}/bin  # scripts/build.sh builds there (BUILD_DIR, BUILD_TYPE honoured)
rounds=${1:-3}

if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools >/dev/null
fi
./scripts/build.sh ardmad ardma_bench >/dev/null

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
redis_port=$(free_port)
work=$(mktemp -d)
redis_socket=$work/redis.sock
redis-server --port "$redis_port" --bind 127.0.0.1 --unixsocket "$redis_socket" \
  --unixsocketperm 700 --save "" --appendonly no --daemonize no >/dev/null 2>&1 &
redis_pid=$!
port_file=$work/ardmad.port
export UCX_TLS=${UCX_TLS:-shm,self}
# shellcheck disable=SC2086  # ARDMAD_FLAGS is a list of flags
"$bin"/ardmad --listen 127.0.0.1:0 --port-file "$port_file" --quiet ${ARDMAD_FLAGS:-} &
ardmad_pid=$!
trap 'kill $redis_pid $ardmad_pid 2>/dev/null || true; rm -rf "$work" /tmp/ardma_redis_compare.$$' EXIT
for _ in $(seq 50); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.1; done
for _ in $(seq 50); do [[ -s $port_file ]] && break; sleep 0.1; done
ardmad_address=$(cat "$port_file")

median() { sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

shape=(-c 50 -n 200000 -d 3 -r 10000)
# Redis's own server-side code: the same GET and SET as Lua scripts, run with EVALSHA (the peer
# of shipping code to ardmad).
get_sha=$(redis-cli -p "$redis_port" SCRIPT LOAD "return redis.call('GET', KEYS[1])")
set_sha=$(redis-cli -p "$redis_port" SCRIPT LOAD "return redis.call('SET', KEYS[1], ARGV[1])")
lua() {  # lua OP ARGS...: one redis-benchmark run of a custom command, prints "OP ops/s"
  local op=$1
  shift
  redis-benchmark -h 127.0.0.1 -p "$redis_port" "${shape[@]}" --csv "$@" 2>/dev/null |
    tr -d '"' | awk -F, -v op="$op" 'NR == 2 {print op, $2}'
}
: >/tmp/ardma_redis_compare.$$
redis_run() {  # redis_run SYSTEM CONNECTION-FLAGS...: SET and GET, appended as rows
  local system=$1
  shift
  redis-benchmark "$@" -t set,get "${shape[@]}" --csv 2>/dev/null |
    tr -d '"' | awk -F, -v r="$r" -v s="$system" '$1=="SET"||$1=="GET" {print r, s, $1, $2}' \
    >>/tmp/ardma_redis_compare.$$
}
ardma_run() {  # ardma_run SYSTEM ADDRESS: dht.put and dht.get, appended as rows
  "$bin"/ardma-bench --server "$2" -t dht.put,dht.get "${shape[@]}" --csv |
    awk -F, -v r="$r" -v s="$1" '$1=="dht.put" || $1=="dht.get" {
        print r, s, ($1 == "dht.get") ? "GET" : "SET", $8   # ops_per_sec
      }' >>/tmp/ardma_redis_compare.$$
}
for r in $(seq "$rounds"); do
  redis_run redis -h 127.0.0.1 -p "$redis_port"
  redis_run redis-unix -s "$redis_socket"
  lua GET evalsha "$get_sha" 1 key:__rand_int__ | awk -v r="$r" '{print r, "lua", $1, $2}' \
    >>/tmp/ardma_redis_compare.$$
  lua SET evalsha "$set_sha" 1 key:__rand_int__ xxx | awk -v r="$r" '{print r, "lua", $1, $2}' \
    >>/tmp/ardma_redis_compare.$$
  ardma_run ardma "$ardmad_address"
  ardma_run ardma-ucx "ucx://$ardmad_address"
done
printf '%-6s %-10s %-4s %12s\n' round system op ops/s
sort -k3,3 -k2,2 -k1,1n /tmp/ardma_redis_compare.$$ | awk '{printf "%-6s %-10s %-4s %12.0f\n", $1, $2, $3, $4}'
med() {  # med SYSTEM OP: the median ops/s of that row
  awk -v s="$1" -v op="$2" '$2==s && $3==op {print $4}' /tmp/ardma_redis_compare.$$ | median
}
for op in GET SET; do
  a=$(med ardma $op) b=$(med redis $op) l=$(med lua $op) u=$(med ardma-ucx $op) x=$(med redis-unix $op)
  awk -v op=$op -v a="$a" -v b="$b" -v l="$l" 'BEGIN {printf "median %s over TCP: ardma %.0f/s, redis %.0f/s (ratio %.2f), redis EVALSHA %.0f/s (ratio %.2f)\n", op, a, b, a / b, l, a / l}'
  awk -v op=$op -v u="$u" -v x="$x" 'BEGIN {printf "median %s same-host: ardma over UCX %.0f/s, redis over its Unix socket %.0f/s (ratio %.2f)\n", op, u, x, u / x}'
done
