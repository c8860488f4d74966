#!/usr/bin/env bash
# The compile farm on the Linux kernel (issue 37): Debian's linux-source-6.1, configured with
# tinyconfig (CONFIG=defconfig for the larger one), built from clean three ways in one run —
# `make -jJOBS` locally, with CC="distcc gcc" (distccd on loopback, --jobs SLAVES) and with
# CC="ardma-cc gcc" (ardmad staging in /dev/shm, SLAVES ardma-ccd with one slot each over ucx://)
# — and the objects of the three builds compared.
#
#   bench/kernel_compare.sh [RUNS]     (default 1; each run builds every variant once, in turn)
#
# Reported per variant: wall time (median of the runs); the master's CPU per compile job (every
# compile of a .c or .S file runs under /usr/bin/time through a wrapper, so this is what each job
# costs the master: for the local build the whole compile, for the farms the wrapper and its
# preprocessing — plus, for ardma-cc, ardmad's CPU during the build divided by the jobs); and how
# many objects are byte-identical to the local build's. Everything runs on this machine, so the
# slaves' compiles share its cores. The three builds are out-of-tree (make O=DIR) of one source
# tree, with KBUILD_BUILD_TIMESTAMP/USER/HOST fixed, so paths and stamps do not differ between
# them.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/farm_lib.sh
source bench/farm_lib.sh
root=$(pwd)
bin=$root/${BUILD_DIR:-build}/bin
runs=${1:-1}
jobs=${JOBS:-4}
slaves=${SLAVES:-2}
config=${CONFIG:-tinyconfig}
./scripts/setup.sh >/dev/null
# The kernel's own build needs these beside the project's packages.
missing=()
for p in linux-source-6.1 flex bison bc libelf-dev libssl-dev xz-utils distcc; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
./scripts/build.sh ardmad ardma_cc ardma_ccd >/dev/null

farm_workspace ardma_kernel_cmp

tarball=$(ls /usr/src/linux-source-6.1*.tar.xz | head -1)
echo "kernel_compare.sh: unpacking $tarball" >&2
tar -xJf "$tarball" -C "$work"
src=$(ls -d "$work"/linux-source-6.1*/ | head -1)

# The compilers make runs: gcc, optionally through a farm's wrapper, timed when it compiles a
# file (not for the build's probes of compiler options, which run through /dev/null).
for variant in local distcc ardma; do
  case $variant in
    local) wrap="" ;;
    distcc) wrap="distcc" ;;
    ardma) wrap="$bin/ardma-cc" ;;
  esac
  cat >"$work/cc-$variant" <<EOF
#!/bin/sh
for a in "\$@"; do
  case \$a in
    *.c|*.S) exec /usr/bin/time -a -o "$work/jobs" -f "%U %S" $wrap gcc "\$@" ;;
  esac
done
exec $wrap gcc "\$@"
EOF
  chmod +x "$work/cc-$variant"
done
export KBUILD_BUILD_TIMESTAMP="2026-01-01 00:00:00" KBUILD_BUILD_USER=ardma KBUILD_BUILD_HOST=bench
for variant in local distcc ardma; do
  make -s -C "$src" O="$work/$variant" CC="$work/cc-$variant" "$config" >/dev/null
done

# The farms: ardmad with its slaves, and distccd with as many.
start_farms

hz=$(getconf CLK_TCK)

# One build from clean: "wall jobs job_cpu_s server_cpu_s"
build() {
  local variant=$1
  make -s -C "$src" O="$work/$variant" CC="$work/cc-$variant" clean >/dev/null
  rm -f "$work/cc.log" "$work/jobs"
  local srv0 srv1
  srv0=$(cpu_ticks "$ardmad_pid")
  ARDMA_CC_LOG=$work/cc.log /usr/bin/time -f "%e" -o "$work/time" \
    make -s -C "$src" O="$work/$variant" CC="$work/cc-$variant" -j"$jobs" vmlinux \
    >/dev/null 2>"$work/$variant.err" ||
    { echo "kernel_compare.sh: the $variant build failed:" >&2; tail -20 "$work/$variant.err" >&2; exit 1; }
  srv1=$(cpu_ticks "$ardmad_pid")
  local n cpu server_cpu=0
  n=$(wc -l <"$work/jobs")
  cpu=$(awk '{ s += $1 + $2 } END { print s }' "$work/jobs")
  if [[ $variant == ardma ]]; then
    server_cpu=$(calc "($srv1 - $srv0) / $hz")
    cp "$work/cc.log" "$work/cc.ardma.log"
  fi
  echo "$(cat "$work/time") $n $cpu $server_cpu"
}

declare -A walls cpus counts
order=(local distcc ardma)
for r in $(seq "$runs"); do
  for v in "${order[@]}"; do
    read -r wall n cpu srv < <(build "$v")
    walls[$v]+="$wall "
    cpus[$v]+="$(calc "($cpu + $srv) / $n") "
    counts[$v]=$n
    echo "run $r $v: wall ${wall}s, $n compiles: their CPU ${cpu}s + server ${srv}s" >&2
  done
  order=("${order[@]:1}" "${order[0]}")
done

# Objects against the local build's: byte-identical, or not (and which).
same() {
  local variant=$1 total=0 equal=0
  while IFS= read -r -d '' o; do
    total=$((total + 1))
    if cmp -s "$o" "$work/$variant/${o#"$work"/local/}"; then
      equal=$((equal + 1))
    else
      echo "  $variant: ${o#"$work"/local/} differs from the local build's" >&2
    fi
  done < <(find "$work/local" -name '*.o' -print0)
  echo "$equal/$total"
}
remote=$(grep -c '^remote ' "$work/cc.ardma.log" || true)
local_here=$(grep -c '^local ' "$work/cc.ardma.log" || true)

printf '\nLinux %s (%s), make -j%s, %s slaves\n' "$(basename "$src")" "$config" "$jobs" "$slaves"
printf '%-8s %10s %12s %16s %24s\n' variant "wall (s)" "vs distcc" "master CPU/job" "objects = local build's"
dw=$(echo "${walls[distcc]}" | median)
dc=$(echo "${cpus[distcc]}" | median)
for v in local distcc ardma; do
  w=$(echo "${walls[$v]}" | median)
  c=$(echo "${cpus[$v]}" | median)
  printf '%-8s %10.1f %11.2fx %14.1f ms %24s   (CPU %.2fx distcc)\n' "$v" "$w" \
    "$(calc "$w / $dw")" "$(calc "1000 * $c")" "$([[ $v == local ]] && echo - || same "$v")" \
    "$(calc "$c / $dc")"
done
echo "compiles per build: ${counts[ardma]}; the last ardma-cc build: $remote on the farm, $local_here here (the reasons: ARDMA_CC_LOG)"
grep '^local ' "$work/cc.ardma.log" | sed 's/^local //' | sort | uniq -c | sort -rn | head -5 >&2 || true
