#!/usr/bin/env bash
# Scale-out of the DHT over 1, 2 and 3 ardmad members on this machine, and a model of N servers
# from measured per-request costs, checked against the runs (docs/BENCHMARKS.md, "Cluster").
#
#   bench/cluster_scaling.sh [REQUESTS]      (default 200000)
#
# For N = 1, 2, 3: etcd and N members (`ardmad --cluster --io-threads 1`), `ardma cluster create`,
# then one load generator per member (ardma-bench --server etcd://... --member ADDRESS -t dht.get:
# active mode, 50 / N connections, REQUESTS / N GETs of that member's keys, 3-byte values, 10,000
# keys, put first), member i and its load generator pinned together to core (i - 1) mod CORES
# with taskset. The aggregate is the sum of the generators' GET/s. The CPU seconds the servers
# and the generators used (from /proc/PID/stat and time) give the per-request costs: s = server
# CPU per GET, c = client CPU per GET. The model: a member and its generator are a closed loop
# that needs s + c of CPU per GET, loops on different cores do not interact, and loops on one
# core share it, so X(N) = min(N, CORES) / (s + c) — on N machines (or cores), N / (s + c).
# Printed: measured and modelled GET/s for N = 1..3 — the model from the N = 1 run's costs, and
# from each run's own — their ratios, and the model's projection to 8 members.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/cluster_lib.sh
source bench/cluster_lib.sh
bin=${BUILD_DIR:-build}/bin
requests=${1:-200000}
cores=$(nproc)
./scripts/build.sh ardmad ardma ardma_bench >/dev/null

cpu_seconds() {  # cpu_seconds PID...: utime + stime of the processes, in seconds
  local ticks=0 pid
  for pid in "$@"; do
    ticks=$((ticks + $(awk '{print $14 + $15}' "/proc/$pid/stat")))
  done
  echo "$ticks / $(getconf CLK_TCK)" | bc -l
}

work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
results=$work/results
: >"$results"
for n in 1 2 3; do
  start_etcd "$work/etcd$n"
  pids+=("$etcd_pid")
  cluster="etcd://127.0.0.1:$etcd_port/scale"
  for _ in $(seq 100); do
    "$bin"/ardma --server "$cluster" cluster status >/dev/null 2>&1 && break
    sleep 0.1
  done
  servers=()
  for i in $(seq "$n"); do
    taskset -c $(((i - 1) % cores)) "$bin"/ardmad --listen 127.0.0.1:0 --io-threads 1 \
      --port-file "$work/p$n.$i" --quiet --cluster "$cluster" &
    servers+=($!)
    pids+=($!)
    for _ in $(seq 100); do [ -s "$work/p$n.$i" ] && break; sleep 0.1; done
  done
  "$bin"/ardma --server "$cluster" cluster create >/dev/null
  common=(--server "$cluster" -d 3 -r 10000)
  "$bin"/ardma-bench "${common[@]}" -c 50 -t dht.put -n 20000 --csv >/dev/null
  before_servers=$(cpu_seconds "${servers[@]}")
  generators=()
  for i in $(seq "$n"); do
    taskset -c $(((i - 1) % cores)) /usr/bin/time -f '%U %S' -o "$work/client$n.$i" \
      "$bin"/ardma-bench "${common[@]}" --member "$(cat "$work/p$n.$i")" \
      -c $((50 / n)) -t dht.get -n $((requests / n)) --csv >"$work/get$n.$i" &
    generators+=($!)
  done
  wait "${generators[@]}"
  after_servers=$(cpu_seconds "${servers[@]}")
  ops=$(cat "$work"/get"$n".* | awk -F, '$1=="dht.get" {sum += $8} END {print sum}')
  client=$(cat "$work"/client"$n".* | awk '{sum += $1 + $2} END {print sum}')
  done_requests=$((requests / n * n))
  echo "$n $ops $(echo "($after_servers - $before_servers) / $done_requests" | bc -l) \
$(echo "$client / $done_requests" | bc -l)" >>"$results"
  kill "${servers[@]}" "$etcd_pid" 2>/dev/null || true
  wait "${servers[@]}" "$etcd_pid" 2>/dev/null || true
done
awk -v k="$cores" '
  function model(n, s, c) { return (n < k ? n : k) / (s + c) }
  NR == 1 { s = $3; c = $4 }
  { measured[$1] = $2; sc[$1] = $3; cc[$1] = $4 }
  END {
    printf "cores %d; per GET (N = 1): server %.2f us CPU, client %.2f us CPU\n", k, s * 1e6, c * 1e6
    printf "%-3s %12s %12s %8s %14s %8s %16s %16s\n", "N", "measured/s", "model/s", "ratio", "model(own)/s", "ratio", "server us/GET", "client us/GET"
    for (n = 1; n <= 3; n++) {
      m = model(n, s, c)
      own = model(n, sc[n], cc[n])
      printf "%-3d %12.0f %12.0f %8.2f %14.0f %8.2f %16.2f %16.2f\n", n, measured[n], m, measured[n] / m, own, measured[n] / own, sc[n] * 1e6, cc[n] * 1e6
    }
    printf "model with a core per member and its client (N = 1 costs):"
    for (n = 1; n <= 8; n++) printf " N=%d %.0f/s", n, n / (s + c)
    printf "\n"
  }' "$results"
