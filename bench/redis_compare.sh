#!/usr/bin/env bash
# Active DHT PUT/GET vs Redis SET/GET, and vs the same as Redis Lua scripts (EVALSHA), with 50
# connections, on this machine, in one run.
#
#   bench/redis_compare.sh [ROUNDS]      (default 3; ARDMAD_FLAGS adds ardmad flags, e.g.
#                                         ARDMAD_FLAGS="--io-threads 1")
#
# Both servers run as their own processes on loopback with default settings (Redis without
# persistence), and both are driven the same way: one event-loop thread, 50 connections, one
# request in flight per connection, 200,000 operations, 3-byte values, keys drawn from 10,000
# (redis-benchmark -t set,get -c 50 -n 200000 -d 3 -r 10000, and ardma-bench with the same flags).
# Rounds alternate so drift in the machine's load hits both sides. Prints operations/s per round,
# the medians and the ratio ardma / Redis. Installs redis-server and redis-tools if missing.
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
redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --daemonize no \
  >/dev/null 2>&1 &
redis_pid=$!
port_file=$(mktemp)
# shellcheck disable=SC2086  # ARDMAD_FLAGS is a list of flags
"$bin"/ardmad --listen 127.0.0.1:0 --port-file "$port_file" --quiet ${ARDMAD_FLAGS:-} &
ardmad_pid=$!
trap 'kill $redis_pid $ardmad_pid 2>/dev/null || true; rm -f "$port_file" /tmp/ardma_redis_compare.$$' EXIT
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
for r in $(seq "$rounds"); do
  redis-benchmark -h 127.0.0.1 -p "$redis_port" -t set,get "${shape[@]}" --csv 2>/dev/null |
    tr -d '"' | awk -F, -v r="$r" '$1=="SET"||$1=="GET" {print r, "redis", $1, $2}' \
    >>/tmp/ardma_redis_compare.$$
  lua GET evalsha "$get_sha" 1 key:__rand_int__ | awk -v r="$r" '{print r, "lua", $1, $2}' \
    >>/tmp/ardma_redis_compare.$$
  lua SET evalsha "$set_sha" 1 key:__rand_int__ xxx | awk -v r="$r" '{print r, "lua", $1, $2}' \
    >>/tmp/ardma_redis_compare.$$
  "$bin"/ardma-bench --server "$ardmad_address" -t dht.put,dht.get "${shape[@]}" --csv |
    awk -F, -v r="$r" '$1=="dht.put" || $1=="dht.get" {
        print r, "ardma", ($1 == "dht.get") ? "GET" : "SET", $8   # ops_per_sec
      }' >>/tmp/ardma_redis_compare.$$
done
printf '%-6s %-6s %-4s %12s\n' round system op ops/s
sort -k3,3 -k2,2 -k1,1n /tmp/ardma_redis_compare.$$ | awk '{printf "%-6s %-6s %-4s %12.0f\n", $1, $2, $3, $4}'
for op in GET SET; do
  a=$(awk -v op=$op '$2=="ardma" && $3==op {print $4}' /tmp/ardma_redis_compare.$$ | median)
  b=$(awk -v op=$op '$2=="redis" && $3==op {print $4}' /tmp/ardma_redis_compare.$$ | median)
  l=$(awk -v op=$op '$2=="lua" && $3==op {print $4}' /tmp/ardma_redis_compare.$$ | median)
  awk -v op=$op -v a="$a" -v b="$b" -v l="$l" 'BEGIN {printf "median %s: ardma %.0f/s, redis %.0f/s (ratio %.2f), redis EVALSHA %.0f/s (ratio %.2f)\n", op, a, b, a / b, l, a / l}'
done
