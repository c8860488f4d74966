#!/usr/bin/env bash
# ardma-mount beside tmpfs (the local floor) and sshfs over loopback (a network file system through
# the same FUSE layer: the fair peer on one machine), in one run: the Active RDMA paper's evaluation list.
#
#   bench/mount_compare.sh [RUNS]     (default 3; medians of whole-process wall times; needs root)
#
# Phases of the Modified Andrew Benchmark on a copy of /usr/include/linux (mkdir the tree, copy
# the files in, stat every file, read every byte, compile 40 C files with make -j2), sequential
# write and read of 256 MiB (dd, 1 MiB blocks, page cache dropped before reading), and grep -r
# on the mount against ardma-grep shipping the pattern to the server. ardmad runs as its own
# process (2 GiB); sshd runs on a free loopback port with a throwaway key.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/shell_lib.sh
source bench/shell_lib.sh
bin=${BUILD_DIR:-build}/bin
runs=${1:-3}
./scripts/setup.sh >/dev/null
./scripts/build.sh ardmad ardma_mount ardma_grep >/dev/null
[[ $(id -u) == 0 ]] || { echo "mount_compare.sh: run as root (FUSE mounts, sshd)" >&2; exit 1; }

work=$(mktemp -d /dev/shm/ardma_mount_cmp.XXXXXX)
mnt_ardma=$work/ardma mnt_rdma=$work/ardma_rdma mnt_sshfs=$work/sshfs
export_dir=$work/export local_dir=$work/local
mkdir -p "$mnt_ardma" "$mnt_rdma" "$mnt_sshfs" "$export_dir" "$local_dir"
pids=()
cleanup() {
  fusermount3 -u "$mnt_ardma" 2>/dev/null || umount -l "$mnt_ardma" 2>/dev/null || true
  fusermount3 -u "$mnt_rdma" 2>/dev/null || umount -l "$mnt_rdma" 2>/dev/null || true
  fusermount3 -u "$mnt_sshfs" 2>/dev/null || umount -l "$mnt_sshfs" 2>/dev/null || true
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# ardmad and the mount.
"$bin"/ardmad --listen 127.0.0.1:0 --port-file "$work/port" --memory 2G --quiet &
pids+=($!)
for _ in $(seq 50); do [[ -s $work/port ]] && break; sleep 0.1; done
server=$(cat "$work/port")
# The default mount (active mode: one EXECUTE per request, over TCP) and one in RDMA mode over
# UCX (shared memory here): file data read and written one-sidedly.
"$bin"/ardma-mount -f --server "$server" "$mnt_ardma" &
pids+=($!)
"$bin"/ardma-mount -f --mode=rdma --server "ucx://$server" "$mnt_rdma" &
pids+=($!)

# sshd on loopback, a key for root, and the sshfs mount of $export_dir.
trap 'cp "$work/authorized_keys.saved" /root/.ssh/authorized_keys 2>/dev/null || true; cleanup' EXIT
start_sshfs "$work" "$export_dir" "$mnt_sshfs"
for _ in $(seq 100); do
  mountpoint -q "$mnt_ardma" && mountpoint -q "$mnt_rdma" && mountpoint -q "$mnt_sshfs" && break
  sleep 0.1
done
mountpoint -q "$mnt_ardma" && mountpoint -q "$mnt_rdma" && mountpoint -q "$mnt_sshfs" ||
  { echo "mounts failed" >&2; exit 1; }

# The workload: /usr/include/linux and 40 C files that include real headers.
src=$work/src
cp -r /usr/include/linux "$src"
mkdir -p "$work/prog"
for i in $(seq 1 40); do
  printf '#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <linux/fs.h>\nint f%d(int x) { char b[64]; snprintf(b, sizeof b, "%%d", x); return (int)strlen(b) + %d; }\n' "$i" "$i" > "$work/prog/f$i.c"
done
{ printf 'int main(void) { return 0; }\n'; } > "$work/prog/main.c"
{ printf 'OBJS = main.o'; for i in $(seq 1 40); do printf ' f%d.o' "$i"; done
  printf '\nprog: $(OBJS)\n\tcc -o prog $(OBJS)\n%%.o: %%.c\n\tcc -O1 -c $< -o $@\n'; } > "$work/prog/Makefile"
dirs=$(cd "$src" && find . -type d | sort)

median() { sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
now() { date +%s.%N; }
declare -A result
# Runs phase $2 on file system $1 (a directory) $runs times from a fresh tree; records medians.
run_phases() {
  local root=$1 name=$2
  declare -A times
  for r in $(seq "$runs"); do
    rm -rf "${root:?}/tree" "$root/prog" "$root/seq"
    sync
    local t0 t1
    t0=$(now); (cd "$root" && mkdir tree && cd tree && echo "$dirs" | xargs mkdir -p); t1=$(now)
    times[mkdir]+="$(awk -v a="$t1" -v b="$t0" 'BEGIN {print a-b}') "
    t0=$(now); (cd "$src" && find . -type f -print0 | xargs -0 -I{} cp {} "$root/tree/{}"); t1=$(now)
    times[copy]+="$(awk -v a="$t1" -v b="$t0" 'BEGIN {print a-b}') "
    t0=$(now); find "$root/tree" -type f -printf '%s %m\n' > /dev/null; t1=$(now)
    times[stat]+="$(awk -v a="$t1" -v b="$t0" 'BEGIN {print a-b}') "
    t0=$(now); find "$root/tree" -type f -print0 | xargs -0 cat | wc -c > /dev/null; t1=$(now)
    times[read]+="$(awk -v a="$t1" -v b="$t0" 'BEGIN {print a-b}') "
    cp -r "$work/prog" "$root/prog"
    t0=$(now); make -s -j2 -C "$root/prog" > /dev/null; t1=$(now)
    times[compile]+="$(awk -v a="$t1" -v b="$t0" 'BEGIN {print a-b}') "
    t0=$(now); dd if=/dev/zero of="$root/seq" bs=1M count=256 status=none conv=fsync; t1=$(now)
    times[write]+="$(awk -v a="$t1" -v b="$t0" 'BEGIN {print a-b}') "
    sync; echo 3 > /proc/sys/vm/drop_caches
    t0=$(now); dd if="$root/seq" of=/dev/null bs=1M status=none; t1=$(now)
    times[seqread]+="$(awk -v a="$t1" -v b="$t0" 'BEGIN {print a-b}') "
  done
  for phase in mkdir copy stat read compile write seqread; do
    result[$name.$phase]=$(echo "${times[$phase]}" | tr ' ' '\n' | grep -v '^$' | median)
  done
  [[ -x $root/prog/prog ]] || { echo "$name: the program did not build" >&2; exit 1; }
  diff -r "$src" "$root/tree" > /dev/null || { echo "$name: the copied tree differs" >&2; exit 1; }
}

echo "running $runs rounds on tmpfs, ardma-mount and sshfs ..." >&2
run_phases "$local_dir" tmpfs
run_phases "$mnt_ardma" ardma
run_phases "$mnt_rdma" rdma
run_phases "$mnt_sshfs" sshfs

# grep -r through the mount vs ardma-grep shipping the pattern (same tree, same output).
grep_times=() ship_times=()
for _ in $(seq "$runs"); do
  t0=$(now); LC_ALL=C grep -rc ioctl "$mnt_ardma/tree" | cat > /dev/null; t1=$(now)
  grep_times+=("$(awk -v a="$t1" -v b="$t0" 'BEGIN {print a-b}')")
  t0=$(now); "$bin"/ardma-grep --server "$server" -rc ioctl dfs:/tree | cat > /dev/null; t1=$(now)
  ship_times+=("$(awk -v a="$t1" -v b="$t0" 'BEGIN {print a-b}')")
done
grep_mount=$(printf '%s\n' "${grep_times[@]}" | median)
grep_ship=$(printf '%s\n' "${ship_times[@]}" | median)
[[ $(LC_ALL=C grep -rc ioctl "$mnt_ardma/tree" | sed "s|$mnt_ardma/||" | sort | md5sum) == \
   $("$bin"/ardma-grep --server "$server" -rc ioctl dfs:/tree | sed 's|dfs:/||' | sort | md5sum) ]] ||
  { echo "grep outputs differ" >&2; exit 1; }

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
files=$(cd "$src" && find . -type f | wc -l)
printf '\n%-24s %9s %9s %9s %9s %12s %12s\n' "phase ($files files)" "tmpfs s" "ardma s" "rdma s" \
  "sshfs s" "ardma/sshfs" "rdma/sshfs"
for phase in mkdir copy stat read compile write seqread; do
  printf '%-24s %9.3f %9.3f %9.3f %9.3f %12s %12s\n' "$phase" "${result[tmpfs.$phase]}" \
    "${result[ardma.$phase]}" "${result[rdma.$phase]}" "${result[sshfs.$phase]}" \
    "$(ratio "${result[ardma.$phase]}" "${result[sshfs.$phase]}")" \
    "$(ratio "${result[rdma.$phase]}" "${result[sshfs.$phase]}")"
done
echo "(ardma: the default mount, active mode over TCP; rdma: --mode=rdma --server ucx://)"
mbps() { awk -v t="$1" 'BEGIN {printf "%.0f", 256 / t}'; }
echo
for phase in write seqread; do
  echo "sequential $phase MiB/s: tmpfs $(mbps "${result[tmpfs.$phase]}"), ardma $(mbps "${result[ardma.$phase]}")," \
       "rdma $(mbps "${result[rdma.$phase]}"), sshfs $(mbps "${result[sshfs.$phase]}")"
done
echo "grep -rc ioctl on the mount: $grep_mount s; ardma-grep -rc (shipped): $grep_ship s; ratio $(ratio "$grep_mount" "$grep_ship")x"
