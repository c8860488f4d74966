# What the cluster comparison scripts share (sourced by bench/cluster_compare.sh,
# bench/reshard_compare.sh, bench/replicated_compare.sh and bench/cluster_scaling.sh).

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

# start_redis_cluster DIR NODES REPLICAS: NODES redis-server with cluster-enabled yes (no
# persistence) in DIR/redisI, made one cluster with REPLICAS replicas per master, waited for until
# its state is ok. Sets redis_nodes (host:port each) and redis_port (the first's); adds to pids.
start_redis_cluster() {
  local dir=$1 nodes=$2 replicas=$3 i port
  redis_nodes=()
  for i in $(seq "$nodes"); do
    port=$(free_port)
    mkdir -p "$dir/redis$i"
    (cd "$dir/redis$i" && exec redis-server --port "$port" --bind 127.0.0.1 --cluster-enabled yes \
      --cluster-config-file nodes.conf --save "" --appendonly no >/dev/null 2>&1) &
    pids+=($!)
    redis_nodes+=("127.0.0.1:$port")
    for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  done
  redis-cli --cluster create "${redis_nodes[@]}" --cluster-replicas "$replicas" --cluster-yes \
    >/dev/null
  redis_port=${redis_nodes[0]#127.0.0.1:}
  for _ in $(seq 100); do
    [ "$(redis-cli -p "$redis_port" cluster info | tr -d '\r' | grep cluster_state)" = \
      "cluster_state:ok" ] && break
    sleep 0.1
  done
}

# start_ardma_cluster DIR N [ARDMAD FLAGS...]: etcd and N $bin/ardmad --cluster members in DIR, each
# waited for until it listens. Sets cluster (etcd://.../bench); adds to pids. The map is the
# caller's to create.
start_ardma_cluster() {
  local dir=$1 n=$2 i
  shift 2
  start_etcd "$dir/etcd"
  pids+=("$etcd_pid")
  cluster="etcd://127.0.0.1:$etcd_port/bench"
  for _ in $(seq 100); do
    "$bin"/ardma --server "$cluster" cluster status >/dev/null 2>&1 && break
    sleep 0.1
  done
  for i in $(seq "$n"); do
    "$bin"/ardmad --listen 127.0.0.1:0 --port-file "$dir/ardmad$i.port" --quiet \
      --cluster "$cluster" "$@" &
    pids+=($!)
    for _ in $(seq 100); do [ -s "$dir/ardmad$i.port" ] && break; sleep 0.1; done
  done
}
