# Shared by bench/cc_compare.sh and bench/kernel_compare.sh (sourced): the two compile farms on
# this machine, and the helpers both scripts' tables use.
#
# farm_workspace NAME: a work directory ($work, in /tmp) and a staging directory ($stage, in
# /dev/shm) for this run, removed at exit together with every process in `pids`.
farm_workspace() {
  work=$(mktemp -d "/tmp/$1.XXXXXX")
  chmod 755 "$work"  # distccd, started as root, runs as its own user
  stage=/dev/shm/$1.$$
  mkdir -p "$stage"
  pids=()
  trap farm_cleanup EXIT
}
farm_cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work" "$stage"
}

# start_farms: ardmad (staging in $stage) with $slaves ardma-ccd of one slot each over ucx://, and
# distccd --jobs $slaves on a free loopback port; their pids are appended to the array `pids`,
# ardmad's is $ardmad_pid, and what ardma-cc and distcc read is exported. Needs bin, work, stage,
# slaves and pids.
start_farms() {
  "$bin"/ardmad --listen 127.0.0.1:0 --port-file "$work/port" --register-dir "$stage" --quiet &
  ardmad_pid=$!
  pids+=($ardmad_pid)
  for _ in $(seq 50); do [[ -s $work/port ]] && break; sleep 0.1; done
  local server
  server=ucx://$(cat "$work/port")
  for i in $(seq "$slaves"); do
    "$bin"/ardma-ccd --server "$server" --slots 1 --name "slave$i" --tmpdir "$stage" 2>/dev/null &
    pids+=($!)
  done
  touch "$work/distccd.log"
  chmod 666 "$work/distccd.log"  # distccd, started as root, runs as its own user
  local dport
  dport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  distccd --no-detach --daemon --allow 127.0.0.1 --listen 127.0.0.1 --port "$dport" \
    --jobs "$slaves" --log-file "$work/distccd.log" &
  pids+=($!)
  sleep 0.5
  export DISTCC_HOSTS="127.0.0.1:$dport/$slaves" DISTCC_DIR=$work/distcc DISTCC_LOG=$work/distcc.log
  export ARDMA_SERVER=$server ARDMA_CC_DIR=$stage
}

calc() { awk "BEGIN { print $* }"; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
