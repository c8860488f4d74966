#!/usr/bin/env bash
# One file system across a cluster (docs/dfs.md; docs/BENCHMARKS.md, "The DFS across a cluster"),
# in one run, medians of whole-process wall times:
#
#   bench/dfs_cluster_compare.sh [RUNS]     (default 3; run as root: sshd and an sshfs mount)
#
# Two clusters, of N = 1 and N = 3 members (ardmad --cluster, each with --io-threads 1, etcd on
# free ports, all on this machine), both up at once, the same data uploaded to each with
# ardma-cp -r, and every timing alternating between them:
#   grep   ardma-grep -rc 'unsigned long' over a 768 MiB tree (384 files of 2 MiB: the headers of
#          /usr/include over and over), checked against GNU grep -rc on the local copy;
#   find   ardma-find over a tree of 200,000 files (200 directories x 1,000 empty files: 200,201
#          entries with the root and the directories);
#   cp     (N = 3) ardma-cp of a 256 MiB file onto a file whose bytes are on another member
#          (`ardma fs stat` says which): the bytes go member to member; the client sends one
#          request and gets the copy's stat back.
# And the peer for grep: GNU grep -rc over the same tree on an sshfs mount of the local copy
# (sshd on loopback: one host), as a user would search a remote host's files.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/cluster_lib.sh
source bench/cluster_lib.sh
# shellcheck source=bench/shell_lib.sh
source bench/shell_lib.sh
bin=${BUILD_DIR:-build}/bin
runs=${1:-3}
./scripts/setup.sh >/dev/null
./scripts/build.sh ardmad ardma ardma_grep ardma_find ardma_cp >/dev/null
[[ $(id -u) == 0 ]] || { echo "dfs_cluster_compare.sh: run as root (sshd, sshfs)" >&2; exit 1; }

work=$(mktemp -d /dev/shm/ardma_dfs_cluster.XXXXXX)
mnt=$work/sshfs
mkdir -p "$mnt"
pids=()
cleanup() {
  fusermount3 -u "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [[ -f $work/authorized_keys.saved ]] && cp "$work/authorized_keys.saved" /root/.ssh/authorized_keys
  rm -rf "$work"
}
trap cleanup EXIT

echo "preparing a 768 MiB tree and a 200,000-entry tree in $work ..." >&2
find /usr/include -name '*.h' -type f -print0 | xargs -0 cat > "$work/headers"
while [[ $(stat -c %s "$work/chunk" 2>/dev/null || echo 0) -lt 2097152 ]]; do
  cat "$work/headers" >> "$work/chunk"
done
truncate -s 2097152 "$work/chunk"
for d in $(seq -w 0 11); do
  mkdir -p "$work/tree/d$d"
  for f in $(seq -w 0 31); do cp "$work/chunk" "$work/tree/d$d/f$f.h"; done
done
python3 - "$work/many" <<'PY'
import os, sys
root = sys.argv[1]
for d in range(200):
    os.makedirs(f"{root}/d{d:03d}")
    for f in range(1000):
        open(f"{root}/d{d:03d}/f{f:04d}", "w").close()
PY
head -c 268435456 /dev/urandom > "$work/big"

# What two cores give a scan on this machine: GNU grep over the local copy (/dev/shm), one process
# for the whole tree against three at once, a third of the directories each. The three members'
# scan cannot do better than this ratio.
scan_one=$(median_time "cd $work/tree && LC_ALL=C grep -rc 'unsigned long' .")
scan_three=$(median_time "cd $work/tree && { LC_ALL=C grep -rc 'unsigned long' d0[0-3] &
  LC_ALL=C grep -rc 'unsigned long' d0[4-7] & LC_ALL=C grep -rc 'unsigned long' d0[89] d1[01];
  wait; }")

# The peer: GNU grep over sshfs (one host, loopback).
start_sshfs "$work" "$work/tree" "$mnt"
pattern="'unsigned long'"
expected=$(cd "$work/tree" && LC_ALL=C grep -rc "unsigned long" . | sort | md5sum)
sshfs_grep=$(median_time "cd $mnt && LC_ALL=C grep -rc $pattern .")

declare -A address
for n in 1 3; do
  start_etcd "$work/etcd$n"
  pids+=("$etcd_pid")
  cluster="etcd://127.0.0.1:$etcd_port/dfs$n"
  address[$n]=$cluster
  for _ in $(seq 100); do
    "$bin"/ardma --server "$cluster" cluster status >/dev/null 2>&1 && break
    sleep 0.1
  done
  for i in $(seq "$n"); do
    "$bin"/ardmad --listen 127.0.0.1:0 --io-threads 1 --memory $((n == 1 ? 3072 : 2048))M \
      --port-file "$work/p$n.$i" --quiet --cluster "$cluster" &
    pids+=($!)
    for _ in $(seq 100); do [[ -s $work/p$n.$i ]] && break; sleep 0.1; done
  done
  "$bin"/ardma --server "$cluster" cluster create >/dev/null
  export ARDMA_SERVER=$cluster
  "$bin"/ardma-cp -r "$work/tree" dfs:/tree
  "$bin"/ardma-cp -r "$work/many" dfs:/many
  got=$("$bin"/ardma-grep -rc "unsigned long" dfs:/tree | sed 's|^dfs:/tree|.|' | sort | md5sum)
  [[ $got == "$expected" ]] || { echo "N=$n: ardma-grep's counts differ from GNU grep's" >&2; exit 1; }
  [[ $("$bin"/ardma-find dfs:/many | wc -l) == 200201 ]] ||
    { echo "N=$n: ardma-find did not list 200,201 entries" >&2; exit 1; }
  unset ARDMA_SERVER
done

# Both clusters stay up; each measurement alternates between them, so the machine's slow and
# fast moments fall on both alike.
declare -A grep_times find_times
for _ in $(seq "$runs"); do
  for n in 1 3; do
    grep_times[$n]+=" $(runs=1 median_time "ARDMA_SERVER=${address[$n]} $bin/ardma-grep -rc $pattern dfs:/tree")"
    find_times[$n]+=" $(runs=1 median_time "ARDMA_SERVER=${address[$n]} $bin/ardma-find dfs:/many")"
  done
done
median() { tr ' ' '\n' <<<"$1" | grep . | sort -g |
  awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
declare -A grep_time find_time
for n in 1 3; do
  grep_time[$n]=$(median "${grep_times[$n]}")
  find_time[$n]=$(median "${find_times[$n]}")
done

export ARDMA_SERVER=${address[3]}
"$bin"/ardma-cp "$work/big" dfs:/big
src_member=$("$bin"/ardma fs stat /big | awk '/bytes on member/ {print $4}')
k=0
while :; do
  "$bin"/ardma fs put /dev/null "/copy$k"
  [[ $("$bin"/ardma fs stat "/copy$k" | awk '/bytes on member/ {print $4}') != "$src_member" ]] &&
    break
  k=$((k + 1))
done
# The first copy touches the destination member's heap pages for the first time (page faults:
# most of its time on this VM); the copies after it write over memory in use.
cp_cold=$( { /usr/bin/time -f %e "$bin"/ardma-cp dfs:/big "dfs:/copy$k"; } 2>&1 )
cp_time=$(median_time "$bin/ardma-cp dfs:/big dfs:/copy$k")
cmp <("$bin"/ardma fs cat "/copy$k") "$work/big" || { echo "the copy differs from the file" >&2; exit 1; }
dst_member=$("$bin"/ardma fs stat "/copy$k" | awk '/bytes on member/ {print $4}')
unset ARDMA_SERVER

printf '%-44s %10s %10s %8s\n' "operation (median of $runs)" "1 member" "3 members" "3 / 1"
printf '%-44s %9.3fs %9.3fs %8.2f\n' "ardma-grep -rc over 768 MiB (384 files)" \
  "${grep_time[1]}" "${grep_time[3]}" "$(echo "${grep_time[3]} / ${grep_time[1]}" | bc -l)"
printf '%-44s %9.3fs %9.3fs %8.2f\n' "  GNU grep -rc, local copy: 1 / 3 processes" \
  "$scan_one" "$scan_three" "$(echo "$scan_three / $scan_one" | bc -l)"
printf '%-44s %9.3fs %9.3fs %8.2f\n' "ardma-find over 200,201 entries" \
  "${find_time[1]}" "${find_time[3]}" "$(echo "${find_time[3]} / ${find_time[1]}" | bc -l)"
printf '%-44s %9.3fs  (3 members / sshfs: %.2f)\n' "GNU grep -rc on an sshfs mount of one host" \
  "$sshfs_grep" "$(echo "${grep_time[3]} / $sshfs_grep" | bc -l)"
printf '%-44s %9.3fs  = %.2f GiB/s (%s -> %s; through the client: one request)\n' \
  "ardma-cp of a 256 MiB file across members" "$cp_time" \
  "$(echo "0.25 / $cp_time" | bc -l)" "$src_member" "$dst_member"
printf '%-44s %9.3fs  = %.2f GiB/s\n' "  the first copy (fresh destination memory)" "$cp_cold" \
  "$(echo "0.25 / $cp_cold" | bc -l)"
