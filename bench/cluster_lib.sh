# What the cluster comparison scripts share (sourced by bench/cluster_compare.sh,
# bench/reshard_compare.sh and bench/cluster_scaling.sh).

ensure_redis() {  # installs redis-server and redis-tools if missing
  if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools >/dev/null
  fi
}

free_port() {  # below 55536: a Redis Cluster node also listens on its port + 10000
  python3 -c '
import socket
while True:
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    if port < 55536: print(port); break'
}

start_etcd() {  # start_etcd DIR: etcd on free ports with its data in DIR; sets etcd_port, etcd_pid
  etcd_port=$(free_port)
  local peer
  peer=$(free_port)
  /usr/bin/etcd --name bench --data-dir "$1" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" \
    --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$peer" \
    --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "bench=http://127.0.0.1:$peer" >"$1.log" 2>&1 &
  etcd_pid=$!
}
