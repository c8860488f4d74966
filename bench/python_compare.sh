#!/usr/bin/env bash
# The Python client against redis-py (docs/python.md, docs/BENCHMARKS.md): ardmad over UCX shared
# memory and redis-server over its Unix socket, each started here with default settings (Redis
# without persistence), then bench/python_bench.py with Debian's python3.
#
#   bench/python_compare.sh [ROUNDS]     (default 5)
#
# Installs redis-server and python3-redis if missing; builds ardmad and the Python package.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
rounds=${1:-5}
if ! command -v redis-server >/dev/null || ! /usr/bin/python3 -c 'import redis' 2>/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server python3-redis >/dev/null
fi
./scripts/build.sh ardmad ardma_python >/dev/null
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
redis-server --port 0 --unixsocket "$work/redis.sock" --unixsocketperm 700 --save "" \
  --appendonly no --daemonize no >/dev/null 2>&1 &
pids+=($!)
export UCX_TLS=${UCX_TLS:-shm,self}
"$build/bin/ardmad" --listen 127.0.0.1:0 --port-file "$work/port" --quiet &
pids+=($!)
for _ in $(seq 200); do [ -s "$work/port" ] && [ -S "$work/redis.sock" ] && break; sleep 0.05; done
PYTHONPATH="$build/python" /usr/bin/python3 bench/python_bench.py "ucx://$(cat "$work/port")" \
  "$work/redis.sock" --rounds "$rounds"
