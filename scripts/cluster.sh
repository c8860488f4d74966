#!/usr/bin/env bash
# A cluster on this host in one command (docs/cluster.md): builds, starts etcd and N ardmad members
# (default 3) on free ports in a temporary directory, creates the slot map and runs a short demo:
# keys put and read through the cluster, a member killed (its keys UNAVAILABLE, the others still
# served) and restarted from its memory file (its keys back). On a terminal the cluster then keeps
# running until Ctrl-C; otherwise (scripts, CI) everything is stopped and removed after the demo.
#   scripts/cluster.sh [N]
# With ARDMA_BIN_DIR set (the tests do) it uses the binaries there and builds nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-3}
if ! [[ "$n" =~ ^[1-9][0-9]*$ ]] || [ "$n" -lt 2 ] || [ "$n" -gt 16 ]; then
  echo "usage: scripts/cluster.sh [N]   (N members, 2 to 16; default 3)" >&2
  exit 2
fi
if [ -n "${ARDMA_BIN_DIR:-}" ]; then
  bin=$ARDMA_BIN_DIR
else
  ./scripts/build.sh ardmad ardma
  bin=$(cd "${BUILD_DIR:-build}/bin" && pwd)
fi
dir=$(mktemp -d /tmp/ardma-cluster.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT

# etcd cannot bind port 0: try random free-looking ports until one pair works.
etcd_port=""
for _ in 1 2 3 4 5; do
  port=$((20000 + RANDOM % 30000))
  /usr/bin/etcd --name local --data-dir "$dir/etcd" \
    --listen-client-urls "http://127.0.0.1:$port" --advertise-client-urls "http://127.0.0.1:$port" \
    --listen-peer-urls "http://127.0.0.1:$((port + 1))" \
    --initial-advertise-peer-urls "http://127.0.0.1:$((port + 1))" \
    --initial-cluster "local=http://127.0.0.1:$((port + 1))" >"$dir/etcd.log" 2>&1 &
  etcd_pid=$!
  for _ in $(seq 50); do
    if "$bin/ardma" --server "etcd://127.0.0.1:$port/demo" cluster status >/dev/null 2>&1; then
      etcd_port=$port
      break
    fi
    kill -0 "$etcd_pid" 2>/dev/null || break
    sleep 0.1
  done
  if [ -n "$etcd_port" ]; then
    pids+=("$etcd_pid")
    break
  fi
  kill "$etcd_pid" 2>/dev/null || true
  wait "$etcd_pid" 2>/dev/null || true
  rm -rf "$dir/etcd"
done
[ -n "$etcd_port" ] || { echo "cluster.sh: etcd did not start (see $dir/etcd.log)" >&2; exit 1; }
cluster="etcd://127.0.0.1:$etcd_port/demo"
ardma() { "$bin/ardma" --server "$cluster" "$@"; }

member_pid=()
start_member() {  # start_member I: member I, its memory file kept in $dir
  rm -f "$dir/port$1"
  "$bin/ardmad" --listen 127.0.0.1:0 --port-file "$dir/port$1" --quiet --memory 64M \
    --memory-file "$dir/heap$1" --cluster "$cluster" --cluster-ttl 2s &
  member_pid[$1]=$!
  pids+=("${member_pid[$1]}")
  for _ in $(seq 100); do
    [ -s "$dir/port$1" ] && return 0
    kill -0 "${member_pid[$1]}" 2>/dev/null || break
    sleep 0.1
  done
  echo "cluster.sh: member $1 did not start" >&2
  exit 1
}
for i in $(seq "$n"); do start_member "$i"; done

echo "== etcd at 127.0.0.1:$etcd_port, $n members; the slot map:"
ardma cluster create
ardma cluster status
echo
echo "== 20 keys through the cluster (each to its slot's server):"
for k in $(seq 20); do ardma dht put users "user$k" "value$k" >/dev/null; done
echo "size: $(ardma dht size users)   user7 -> $(ardma dht get users user7)"
ardma list push jobs build test deploy >/dev/null
echo "list jobs: $(ardma list range jobs | tr '\n' ' ')"
echo
echo "== member 2 killed (SIGKILL); once its lease runs out (2 s) its slots are DOWN:"
kill -9 "${member_pid[2]}"
wait "${member_pid[2]}" 2>/dev/null || true
for _ in $(seq 100); do
  ardma cluster status >/dev/null 2>&1 || break
  sleep 0.1
done
ardma cluster status | grep -E 'DOWN' || true
served=0
unavailable=""
for k in $(seq 20); do
  if out=$(ardma dht get users "user$k" 2>&1); then
    served=$((served + 1))
  else
    unavailable=$out
  fi
done
echo "served $served of 20 keys; the others fail at once: $unavailable"
echo
echo "== member 2 restarted from its memory file:"
start_member 2
back=0
for _ in $(seq 50); do
  back=0
  for k in $(seq 20); do
    [ "$(ardma dht get users "user$k" 2>/dev/null)" = "value$k" ] && back=$((back + 1))
  done
  [ "$back" -eq 20 ] && break
  sleep 0.1
done
echo "served $back of 20 keys, every value intact"
[ "$back" -eq 20 ] || exit 1

if [ -t 0 ]; then
  echo
  echo "The cluster is running: $bin/ardma --server $cluster cluster status. Ctrl-C stops it."
  wait
fi
