#!/usr/bin/env bash
# The lock service beside the common Redis lock recipe, on this machine, in one run.
#
#   bench/lock_compare.sh [extra lock_bench flags]
#
# Starts a private redis-server (no persistence) on a free loopback port and runs
# build/bin/lock_bench with ARDMA_BENCH_REDIS pointing at it: uncontended acquire+release latency
# (active, RDMA, Redis SET NX PX + Lua-checked DEL) and contended throughput, wait percentiles and
# fairness with 2..32 clients for all three. Installs redis-server if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BUILD_DIR:-build}/bin  # scripts/build.sh builds there (BUILD_DIR, BUILD_TYPE honoured)
if ! command -v redis-server >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools >/dev/null
fi
./scripts/build.sh lock_bench >/dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --daemonize no \
  >/dev/null 2>&1 &
redis_pid=$!
trap 'kill $redis_pid 2>/dev/null || true' EXIT
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
ARDMA_BENCH_REDIS=127.0.0.1:$port "$bin"/lock_bench "$@" 2>&1 | grep -v '^I '
