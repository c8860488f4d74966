#!/usr/bin/env bash
# The compile farm (ardma-cc + ardma-ccd) beside distcc (distccd on loopback, the same number of
# slaves) and a local build, in one run: the rdistcc paper's evaluation (its Table 2: what the master
# spends per remote job).
#
#   bench/cc_compare.sh [RUNS]     (default 2; each run builds every variant once, in turn)
#
# The code base is this project's own C++ (TARGETS, default the server library and the DHT, lock
# and DFS libraries with everything they need: about 60 translation units with Abseil and Asio
# headers), configured three times with CMake's Unix Makefiles and built with make -jJOBS from
# clean: plain c++; CMAKE_CXX_COMPILER_LAUNCHER=distcc; CMAKE_CXX_COMPILER_LAUNCHER=ardma-cc.
# Slaves: SLAVES ardma-ccd with one slot each over ucx:// (one-sided transfers through shared
# memory and CMA), and distccd --jobs SLAVES. Everything runs on this machine, so wall times
# include the slaves' compiles on the same cores.
#
# Reported per variant: wall time (median of the runs), the master's CPU per compile job — every
# compile command runs under /usr/bin/time, so this is exactly what each job costs the master: the
# wrapper and its preprocessing (for the local build, the whole compile), plus for ardma-cc
# ardmad's own CPU during the build divided by the jobs, since it runs on the master — and the
# bytes the master copies per job (loopback traffic: distcc sends each source and receives each
# object through sockets; plus, for ardma-cc, the object copied out of tmpfs).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/farm_lib.sh
source bench/farm_lib.sh
root=$(pwd)
bin=$root/${BUILD_DIR:-build}/bin
runs=${1:-2}
jobs=${JOBS:-4}
slaves=${SLAVES:-2}
targets=${TARGETS:-"server ardma_dht_library ardma_lock_library ardma_dfs_library"}
./scripts/setup.sh >/dev/null
./scripts/build.sh ardmad ardma_cc ardma_ccd ardma >/dev/null

farm_workspace ardma_cc_cmp

# Three build trees of the same sources (no ccache: every compile must happen).
# Every compile runs under /usr/bin/time, which appends "user sys" to $work/jobs.
configure() {
  local dir=$1 wrapper=$2
  cmake -S "$root" -B "$work/$dir" -G "Unix Makefiles" -DCMAKE_BUILD_TYPE=Release \
    -DARDMA_BUILD_TESTS=OFF -DARDMA_BUILD_BENCHMARKS=OFF \
    "-DCMAKE_CXX_COMPILER_LAUNCHER=/usr/bin/time;-a;-o;$work/jobs;-f;%U %S${wrapper:+;$wrapper}" \
    >/dev/null
}
configure local ""
configure distcc distcc
configure ardma "$bin/ardma-cc"

# The farms: ardmad with its slaves, and distccd with as many.
start_farms

lo_bytes() { awk '$1 == "lo:" { printf "%.0f\n", $2 + $10 }' /proc/net/dev; }
hz=$(getconf CLK_TCK)

# One build from clean: "wall jobs job_cpu_s lo_bytes server_cpu_s log_copied"
build() {
  local variant=$1
  make -C "$work/$variant" clean >/dev/null
  rm -f "$work/cc.log" "$work/jobs"
  local lo0 srv0 lo1 srv1
  lo0=$(lo_bytes)
  srv0=$(cpu_ticks "$ardmad_pid")
  ARDMA_CC_LOG=$work/cc.log /usr/bin/time -f "%e" -o "$work/time" \
    make -C "$work/$variant" -j"$jobs" $targets >/dev/null 2>"$work/$variant.err" ||
    { echo "cc_compare.sh: the $variant build failed:" >&2; tail -20 "$work/$variant.err" >&2; exit 1; }
  lo1=$(lo_bytes)
  srv1=$(cpu_ticks "$ardmad_pid")
  local n cpu copied=0
  n=$(wc -l <"$work/jobs")
  cpu=$(awk '{ s += $1 + $2 } END { print s }' "$work/jobs")
  if [[ -f $work/cc.log ]]; then
    copied=$(awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^copied=/) { sub("copied=", "", $i); s += $i } } END { print s + 0 }' "$work/cc.log")
    # the rdistcc paper's Table 2 for ardma-cc: the master's CPU per job, split
    awk '/^remote / { for (i = 1; i <= NF; i++) { if ($i ~ /^self_cpu_us=/) { sub("self_cpu_us=", "", $i); self += $i }
                                                 if ($i ~ /^cpp_cpu_us=/) { sub("cpp_cpu_us=", "", $i); cpp += $i } } n++ }
         END { if (n) printf "  ardma-cc per remote job: preprocessing %.1f ms, the rest of ardma-cc %.1f ms (%d jobs)\n", cpp / n / 1000, self / n / 1000, n }' \
      "$work/cc.log" >&2
  fi
  local wall server_cpu=0
  wall=$(cat "$work/time")
  if [[ $variant == ardma ]]; then
    server_cpu=$(calc "($srv1 - $srv0) / $hz")
    cp "$work/cc.log" "$work/cc.ardma.log"
  fi
  echo "$wall $n $cpu $((lo1 - lo0)) $server_cpu $copied"
}

declare -A walls cpus bytes counts
order=(local distcc ardma)
for r in $(seq "$runs"); do
  for v in "${order[@]}"; do
    read -r wall n cpu lo srv copied < <(build "$v")
    walls[$v]+="$wall "
    cpus[$v]+="$(calc "($cpu + $srv) / $n") "
    bytes[$v]+="$(calc "($lo + $copied) / $n") "
    counts[$v]=$n
    echo "run $r $v: wall ${wall}s, $n compiles: their CPU ${cpu}s + server ${srv}s, loopback $lo B, copied out of tmpfs $copied B" >&2
  done
  order=("${order[@]:1}" "${order[0]}")  # rotate: no variant always goes first
done
# How the farm's builds went: every compile remote?
remote=$(grep -c '^remote ' "$work/cc.ardma.log" || true)
fell_back=$(grep -c 'compiling locally' "$work/ardma.err" || true)
distcc_local=$(grep -c 'failed to distribute\|running locally' "$work/distcc.log" 2>/dev/null || true)

printf '\n%-8s %10s %12s %16s %18s\n' variant "wall (s)" "vs distcc" "master CPU/job" "master bytes/job"
dw=$(echo "${walls[distcc]}" | median)
dc=$(echo "${cpus[distcc]}" | median)
for v in local distcc ardma; do
  w=$(echo "${walls[$v]}" | median)
  c=$(echo "${cpus[$v]}" | median)
  b=$(echo "${bytes[$v]}" | median)
  printf '%-8s %10.1f %11.2fx %14.1f ms %16.0f B   (CPU %.2fx distcc)\n' "$v" "$w" \
    "$(calc "$w / $dw")" "$(calc "1000 * $c")" "$b" "$(calc "$c / $dc")"
done
echo "compiles per build: ${counts[ardma]}; the last ardma build: $remote on the farm, $fell_back fell back; distcc fallbacks in its log: $distcc_local"
