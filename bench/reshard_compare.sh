#!/usr/bin/env bash
# Moving a third of the slots, with their keys, to a third server: ardma's `cluster add` against
# Redis Cluster's `redis-cli --cluster reshard`, the same keys and slots, on this machine, in one
# run (docs/BENCHMARKS.md, "Cluster").
#
#   bench/reshard_compare.sh [KEYS]      (default 1000000)
#
# Redis: three masters (cluster-enabled, no replicas, no persistence), the slots over the first
# two (redis-cli --cluster create), the third added empty (add-node); KEYS keys "key:<i>" with
# 3-byte values loaded through redis-cli --pipe to their masters; then 5461 slots from the first two
# to the third with redis-cli --cluster reshard (its default pipeline of 10 keys per MIGRATE), timed.
# ardma: three members of an etcd-kept cluster, the map over the first two, the same KEYS keys put
# in bulk, then `ardma cluster add` of the third (5461 slots), timed (bench/cluster_bench.cc,
# BM_ReshardAdd). Prints both times and the ratio ardma / Redis. Installs redis-server and
# redis-tools if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
keys=${1:-1000000}
bin=${BUILD_DIR:-build}/bin

if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools >/dev/null
fi
./scripts/build.sh ardmad ardma cluster_bench >/dev/null

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
ports=()
for i in 1 2 3; do
  port=$(free_port)
  mkdir -p "$work/r$i"
  (cd "$work/r$i" && exec redis-server --port "$port" --bind 127.0.0.1 --cluster-enabled yes \
    --cluster-config-file nodes.conf --save "" --appendonly no >/dev/null 2>&1) &
  pids+=($!)
  ports+=("$port")
done
for port in "${ports[@]}"; do
  for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
done
redis-cli --cluster create "127.0.0.1:${ports[0]}" "127.0.0.1:${ports[1]}" --cluster-replicas 0 \
  --cluster-yes >/dev/null
redis-cli --cluster add-node "127.0.0.1:${ports[2]}" "127.0.0.1:${ports[0]}" >/dev/null
for _ in $(seq 100); do
  redis-cli --cluster check "127.0.0.1:${ports[0]}" >/dev/null 2>&1 && break
  sleep 0.2
done
# Load: each key to its master (CLUSTER KEYSLOT decides; one pipe per master).
node_id() { redis-cli -p "$1" cluster myid; }
id1=$(node_id "${ports[0]}")
id2=$(node_id "${ports[1]}")
id3=$(node_id "${ports[2]}")
python3 - "$keys" "${ports[0]}" "${ports[1]}" "$work" <<'EOF'
import subprocess, sys
keys, p1, p2, work = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
def crc16(data):
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) & 0xffff if crc & 0x8000 else (crc << 1) & 0xffff
    return crc
# the first master owns 0-8191, the second 8192-16383 (redis-cli --cluster create over two)
files = {p1: open(f"{work}/load1", "wb"), p2: open(f"{work}/load2", "wb")}
for i in range(keys):
    k = f"key:{i}".encode()
    port = p1 if crc16(k) % 16384 < 8192 else p2
    files[port].write(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$3\r\nxxx\r\n" % (len(k), k))
for port, f in files.items():
    f.close()
    with open(f.name, "rb") as data:
        subprocess.run(["redis-cli", "-p", port, "--pipe"], stdin=data, check=True,
                       stdout=subprocess.DEVNULL)
EOF
loaded=$(( $(redis-cli -p "${ports[0]}" dbsize) + $(redis-cli -p "${ports[1]}" dbsize) ))
start=$(date +%s.%N)
redis-cli --cluster reshard "127.0.0.1:${ports[0]}" --cluster-from "$id1,$id2" --cluster-to "$id3" \
  --cluster-slots 5461 --cluster-yes >/dev/null
end=$(date +%s.%N)
redis_s=$(echo "$end - $start" | bc -l)
redis_moved=$(redis-cli -p "${ports[2]}" dbsize)
kill "${pids[@]}" 2>/dev/null || true
wait 2>/dev/null || true
pids=()

ardma_out=$(ARDMA_BENCH_RESHARD_KEYS=$keys "$bin"/cluster_bench --benchmark_filter=BM_ReshardAdd \
  --benchmark_format=csv 2>/dev/null | grep '^"BM_ReshardAdd')
# name,iterations,real_time,cpu_time,time_unit,...,keys,keys_moved,slots_moved
ardma_s=$(echo "$ardma_out" | cut -d, -f3)
ardma_moved=$(echo "$ardma_out" | awk -F, '{print $(NF-1)}')
printf 'keys %d (Redis loaded %d)\n' "$keys" "$loaded"
printf 'redis-cli --cluster reshard: %.2f s for 5461 slots, %d keys moved\n' "$redis_s" "$redis_moved"
printf 'ardma cluster add:           %.2f s for 5461 slots, %s keys moved\n' "$ardma_s" "$ardma_moved"
printf 'ratio ardma / Redis: %.3f\n' "$(echo "$ardma_s / $redis_s" | bc -l)"
