#!/usr/bin/env bash
# The performance guard for a change to the request path: old and new built side by side and run
# in turn on this machine (never a timed test; a ratio within one run).
#
#   scripts/perf-check.sh BASE [--rounds N] [--filter REGEX] [--min-time SECONDS]
#
# Builds core_bench at BASE (a commit, branch or tag, in a temporary git worktree) and at the
# working tree (BUILD_DIR, default build), then runs bench/ab_compare.py on the two: A = BASE,
# B = the working tree, alternating A B A B ... for N rounds (default 5), with UCX over shared
# memory (UCX_TLS=shm,self unless UCX_TLS is set). It prints each benchmark's median for A and B,
# the ratio B/A and their geometric mean: below 1 the change is faster. The default set is the
# per-call cost of every op over TCP and over UCX, with UCX's own active-message round trip, get
# and atomic beside them (BM_UcxOwn*, where BASE has them), which show what the transport itself
# costs in the same run. docs/BENCHMARKS.md ("Performance II") says how to read a run.
set -euo pipefail

usage() {
  sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
}

base="" rounds=5 min_time=0.3
filter='^BM_(Ping|Read/8|Write/8|Cas|FetchAdd|ExecuteNoop|ReadBatch16|PingUcx|ReadUcx/8|WriteUcx/8|CasUcx|FetchAddUcx|ExecuteNoopUcx|ReadBatch16Ucx)/real_time/threads:1$|^BM_UcxOwn'
while (($#)); do
  case $1 in
    -h | --help) usage; exit 0 ;;
    --rounds) rounds=${2:?--rounds needs a number}; shift 2 ;;
    --filter) filter=${2:?--filter needs a regular expression}; shift 2 ;;
    --min-time) min_time=${2:?--min-time needs seconds}; shift 2 ;;
    -*) echo "perf-check.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *)
      if [[ -n $base ]]; then echo "perf-check.sh: one BASE only (see --help)" >&2; exit 2; fi
      base=$1; shift ;;
  esac
done
if [[ -z $base ]]; then
  echo "perf-check.sh: which commit is the base? (usage: scripts/perf-check.sh BASE)" >&2
  exit 2
fi
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "perf-check.sh: --rounds must be a positive number" >&2; exit 2; }

cd "$(dirname "$0")/.."
root=$PWD
commit=$(git rev-parse --verify --quiet "$base^{commit}") ||
  { echo "perf-check.sh: '$base' is not a commit of this repository" >&2; exit 2; }
build_dir=${BUILD_DIR:-build}
# The base is built as the working tree's build is (or BUILD_TYPE, default RelWithDebInfo).
build_type=${BUILD_TYPE:-$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$build_dir/CMakeCache.txt" 2>/dev/null)}
build_type=${build_type:-RelWithDebInfo}

work=$(mktemp -d "${TMPDIR:-/tmp}/ardma-perf-check.XXXXXX")
cleanup() {
  git -C "$root" worktree remove --force "$work/base" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
configure() {  # SOURCE BUILD
  cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE="$build_type" "${launcher[@]}" >/dev/null
}

echo "== building core_bench at $base (${commit:0:12}) and at the working tree ($build_type)" >&2
git worktree add --detach --quiet "$work/base" "$commit"
configure "$work/base" "$work/base/build"
cmake --build "$work/base/build" -j"$(nproc)" --target core_bench >/dev/null
[[ -f $build_dir/CMakeCache.txt ]] || configure "$root" "$build_dir"
cmake --build "$build_dir" -j"$(nproc)" --target core_bench >/dev/null

export UCX_TLS=${UCX_TLS:-shm,self}
echo "== A = $base, B = the working tree; UCX_TLS=$UCX_TLS; $rounds rounds" >&2
python3 bench/ab_compare.py "$work/base/build/bin/core_bench" "$build_dir/bin/core_bench" \
  --rounds "$rounds" --min-time "$min_time" --filter "$filter"
