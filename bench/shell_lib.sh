# What the comparison scripts share (sourced): timing whole commands, and an sshfs mount over
# loopback as the network file system to compare with.

# median_time COMMAND: its wall seconds, the median of $runs runs. The output goes through a
# pipe (GNU grep stops at the first match when its output is /dev/null).
median_time() {
  local times=()
  for _ in $(seq "$runs"); do
    local start end
    start=$(date +%s.%N)
    eval "$1" | cat >/dev/null
    end=$(date +%s.%N)
    times+=("$(awk -v a="$end" -v b="$start" 'BEGIN {print a - b}')")
  done
  printf '%s\n' "${times[@]}" | sort -g |
    awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'
}

# start_sshfs WORK DIR MOUNTPOINT: sshd on a free loopback port with throwaway keys in WORK (a key
# for root added to /root/.ssh/authorized_keys, the file saved first as
# WORK/authorized_keys.saved: put it back on exit), and DIR mounted at MOUNTPOINT with sshfs.
# Appends sshd's pid to the caller's `pids`.
start_sshfs() {
  local work=$1 dir=$2 mountpoint=$3 port
  ssh-keygen -q -t ed25519 -N '' -f "$work/key"
  ssh-keygen -q -t ed25519 -N '' -f "$work/host_key"
  mkdir -p /root/.ssh /run/sshd
  chmod 700 /root/.ssh
  touch /root/.ssh/authorized_keys
  cp /root/.ssh/authorized_keys "$work/authorized_keys.saved"
  cat "$work/key.pub" >> /root/.ssh/authorized_keys
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  /usr/sbin/sshd -D -p "$port" -h "$work/host_key" -o ListenAddress=127.0.0.1 \
    -o PermitRootLogin=prohibit-password -o PidFile="$work/sshd.pid" &
  pids+=($!)
  for _ in $(seq 100); do
    sshfs -p "$port" -o IdentityFile="$work/key" -o StrictHostKeyChecking=no \
      -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR "root@127.0.0.1:$dir" "$mountpoint" \
      2>/dev/null && return 0
    sleep 0.1
  done
  echo "the sshfs mount of $dir failed" >&2
  return 1
}
