#!/usr/bin/env bash
# Client-count scaling: throughput and p99 latency of DHT GET, lock acquire+release and DFS reads
# with 1..64 connections, active and RDMA mode, against one ardmad process, in one run.
#
#   bench/scaling.sh [REQUESTS]    (default 20000 per point; prints a Markdown table)
#
# ARDMA_BENCH_TRANSPORT=ucx: the connections are UCX (UCX_TLS, default shm,self) instead of TCP.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BUILD_DIR:-build}/bin  # scripts/build.sh builds there (BUILD_DIR, BUILD_TYPE honoured)
requests=${1:-20000}
./scripts/build.sh ardmad ardma_bench >/dev/null
port_file=$(mktemp)
"$bin"/ardmad --listen 127.0.0.1:0 --port-file "$port_file" --quiet &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -f "$port_file"' EXIT
for _ in $(seq 50); do [[ -s $port_file ]] && break; sleep 0.1; done
server=$(cat "$port_file")
if [[ ${ARDMA_BENCH_TRANSPORT:-tcp} == ucx ]]; then
  server=ucx://$server
  export UCX_TLS=${UCX_TLS:-shm,self}
fi
bench() { "$bin"/ardma-bench --server "$server" --csv "$@" | tail -n +2; }
echo "| test | mode | clients | ops/s | p50 ms | p99 ms | round trips/op |"
echo "|---|---|---:|---:|---:|---:|---:|"
bench -t dht.put -c 8 -n 10000 >/dev/null  # fill the table
for mode in active rdma; do
  for test in dht.get lock.acquire dfs.read; do
    for c in 1 2 4 8 16 32 64; do
      n=$requests
      [[ $mode == rdma ]] && n=$((requests / 4))
      bench -t "$test" --mode "$mode" -c "$c" -n "$n" -d 4096 |
        awk -F, '{printf "| %s | %s | %s | %.0f | %.3f | %.3f | %.2f |\n", $1, $2, $3, $8, $10, $12, $14}'
    done
  done
done
