#!/usr/bin/env bash
# Moving a quarter of the slots, with their keys, to a fourth server: ardma's `cluster add`
# against Redis Cluster's `redis-cli --cluster reshard`, the same keys and slots, on this machine,
# in one run (docs/BENCHMARKS.md, "Cluster").
#
#   bench/reshard_compare.sh [KEYS]      (default 1000000)
#
# Redis: four masters (cluster-enabled, no replicas, no persistence), the slots over the first
# three (redis-cli --cluster create needs three), the fourth added empty (add-node); KEYS keys
# "key:<i>" with 3-byte values loaded through redis-cli --pipe to their masters; then 4096 slots
# from the first three to the fourth with redis-cli --cluster reshard (its default pipeline of 10
# keys per MIGRATE), timed. ardma: four members of an etcd-kept cluster, the map over the first
# three, the same KEYS keys put in bulk, then `ardma cluster add` of the fourth (4096 slots), timed
# (bench/cluster_bench.cc, BM_ReshardAdd). Prints both times and the ratio ardma / Redis. Installs redis-server and
# redis-tools if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/cluster_lib.sh
source bench/cluster_lib.sh
keys=${1:-1000000}
bin=${BUILD_DIR:-build}/bin

ensure_redis
./scripts/build.sh ardmad ardma cluster_bench >/dev/null

work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
ports=()
for i in 1 2 3 4; do
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
redis-cli --cluster create "127.0.0.1:${ports[0]}" "127.0.0.1:${ports[1]}" \
  "127.0.0.1:${ports[2]}" --cluster-replicas 0 --cluster-yes >/dev/null
redis-cli --cluster add-node "127.0.0.1:${ports[3]}" "127.0.0.1:${ports[0]}" >/dev/null
for _ in $(seq 100); do
  redis-cli --cluster check "127.0.0.1:${ports[0]}" >/dev/null 2>&1 && break
  sleep 0.2
done
# Load: each key to its master (CLUSTER KEYSLOT decides; one pipe per master).
node_id() { redis-cli -p "$1" cluster myid; }
id1=$(node_id "${ports[0]}")
id2=$(node_id "${ports[1]}")
id3=$(node_id "${ports[2]}")
id4=$(node_id "${ports[3]}")
python3 - "$keys" "${ports[0]}" "${ports[1]}" "${ports[2]}" "$work" <<'EOF'
import subprocess, sys
keys, ports, work = int(sys.argv[1]), sys.argv[2:5], sys.argv[5]
def crc16(data):
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) & 0xffff if crc & 0x8000 else (crc << 1) & 0xffff
    return crc
# redis-cli --cluster create over three: 0-5460, 5461-10922, 10923-16383
files = {p: open(f"{work}/load{n}", "wb") for n, p in enumerate(ports)}
for i in range(keys):
    k = f"key:{i}".encode()
    slot = crc16(k) % 16384
    port = ports[0] if slot <= 5460 else ports[1] if slot <= 10922 else ports[2]
    files[port].write(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$3\r\nxxx\r\n" % (len(k), k))
for port, f in files.items():
    f.close()
    with open(f.name, "rb") as data:
        subprocess.run(["redis-cli", "-p", port, "--pipe"], stdin=data, check=True,
                       stdout=subprocess.DEVNULL)
EOF
loaded=$(( $(redis-cli -p "${ports[0]}" dbsize) + $(redis-cli -p "${ports[1]}" dbsize) +
  $(redis-cli -p "${ports[2]}" dbsize) ))
for _ in $(seq 100); do  # every node knows the added one and says the cluster is ok
  known=0
  for port in "${ports[@]}"; do
    if [ "$(redis-cli -p "$port" cluster nodes | wc -l)" -eq 4 ] &&
      redis-cli -p "$port" cluster info | tr -d '\r' | grep -qx cluster_state:ok; then
      known=$((known + 1))
    fi
  done
  [ "$known" -eq 4 ] && break
  sleep 0.2
done
start=$(date +%s.%N)
redis-cli --cluster reshard "127.0.0.1:${ports[0]}" --cluster-from "$id1,$id2,$id3" \
  --cluster-to "$id4" --cluster-slots 4096 --cluster-yes >"$work/reshard.log" || { tail -5 "$work/reshard.log"; exit 1; }
end=$(date +%s.%N)
redis_s=$(echo "$end - $start" | bc -l)
redis_moved=$(redis-cli -p "${ports[3]}" dbsize)
kill "${pids[@]}" 2>/dev/null || true
wait 2>/dev/null || true
pids=()

ardma_out=$(ARDMA_BENCH_RESHARD_KEYS=$keys "$bin"/cluster_bench --benchmark_filter=BM_ReshardAdd \
  --benchmark_format=csv 2>/dev/null | grep '^"BM_ReshardAdd')
# name,iterations,real_time,cpu_time,time_unit,...,keys,keys_moved,slots_moved
ardma_s=$(echo "$ardma_out" | cut -d, -f3)
ardma_moved=$(echo "$ardma_out" | awk -F, '{print $(NF-1)}')
printf 'keys %d (Redis loaded %d)\n' "$keys" "$loaded"
printf 'redis-cli --cluster reshard: %.2f s for 4096 slots, %d keys moved\n' "$redis_s" "$redis_moved"
printf 'ardma cluster add:           %.2f s for 4096 slots, %s keys moved\n' "$ardma_s" "$ardma_moved"
printf 'ratio ardma / Redis: %.3f\n' "$(echo "$ardma_s / $redis_s" | bc -l)"
