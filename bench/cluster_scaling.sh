#!/usr/bin/env bash
# Scale-out of the DHT over 1, 2 and 3 ardmad members on this machine, and a model of N servers
# from measured per-request costs, checked against the runs (docs/BENCHMARKS.md, "Cluster").
#
#   bench/cluster_scaling.sh [REQUESTS]      (default 200000)
#
# For N = 1, 2, 3: etcd and N members (`ardmad --cluster`, each pinned with taskset to core
# i mod CORES), `ardma cluster create`, then ardma-bench --server etcd://... -t dht.get (active
# mode, 50 connections, 3-byte values, 10,000 keys; put first) pinned to the last core. Each run's
# aggregate GET/s and the CPU seconds the servers and the client used (from /proc/PID/stat) give
# the per-request costs: s = server CPU per request, c = client CPU per request. The model: with
# N servers and K cores, throughput = min(N / s, 1 / c, K / (s + c)) — each server is one event
# loop of its own, the client one thread, and all share the machine's cores. Printed: measured
# and modelled GET/s for N = 1..3 — the model from the N = 1 run's costs, and from each run's
# own — and their ratios.
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
  bench=(taskset -c $((cores - 1)) "$bin"/ardma-bench --server "$cluster" -c 50 -d 3 -r 10000)
  "${bench[@]}" -t dht.put -n 20000 --csv >/dev/null
  before_servers=$(cpu_seconds "${servers[@]}")
  /usr/bin/time -f '%U %S' -o "$work/client$n" "${bench[@]}" -t dht.get -n "$requests" --csv \
    >"$work/get$n"
  after_servers=$(cpu_seconds "${servers[@]}")
  ops=$(awk -F, '$1=="dht.get" {print $8}' "$work/get$n")
  client=$(awk '{print $1 + $2}' "$work/client$n")
  echo "$n $ops $(echo "($after_servers - $before_servers) / $requests" | bc -l) \
$(echo "$client / $requests" | bc -l)" >>"$results"
  kill "${servers[@]}" "$etcd_pid" 2>/dev/null || true
  wait "${servers[@]}" "$etcd_pid" 2>/dev/null || true
done
awk -v k="$cores" '
  NR == 1 { s = $3; c = $4 }
  { measured[$1] = $2; sc[$1] = $3; cc[$1] = $4 }
  END {
    printf "cores %d; per GET (N = 1): server %.2f us CPU, client %.2f us CPU\n", k, s * 1e6, c * 1e6
    printf "%-3s %12s %12s %8s %14s %8s %16s %16s\n", "N", "measured/s", "model/s", "ratio", "model(own)/s", "ratio", "server us/GET", "client us/GET"
    for (n = 1; n <= 3; n++) {
      model = n / s
      if (1 / c < model) model = 1 / c
      if (k / (s + c) < model) model = k / (s + c)
      own = n / sc[n]
      if (1 / cc[n] < own) own = 1 / cc[n]
      if (k / (sc[n] + cc[n]) < own) own = k / (sc[n] + cc[n])
      printf "%-3d %12.0f %12.0f %8.2f %14.0f %8.2f %16.2f %16.2f\n", n, measured[n], model, measured[n] / model, own, measured[n] / own, sc[n] * 1e6, cc[n] * 1e6
    }
  }' "$results"
