#!/usr/bin/env bash
# ardma-grep and ardma-find of two builds, paired on the same server and data: the check that a
# change to the tools costs nothing (issue "Tools parity II": within 1.05x).
#
#   bench/tools_ab.sh OLD_BIN_DIR [NEW_BIN_DIR] [PAIRS]
#
# OLD_BIN_DIR holds the old build's ardma-grep and ardma-find (e.g. a clone of the old commit
# built with scripts/build.sh: CLONE/build/bin); NEW_BIN_DIR defaults to build/bin. Each client
# ships its own active code to one ardmad (2 GiB) holding apps_compare.sh's data: 256 MiB of C
# headers and a tree of 65 x 1,000 small files. Commands run old, new, old, new... (PAIRS pairs,
# default 9); printed: each side's median wall seconds and the median of the pairs' new/old ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
old=${1:?usage: bench/tools_ab.sh OLD_BIN_DIR [NEW_BIN_DIR] [PAIRS]}
new=${2:-${BUILD_DIR:-build}/bin}
pairs=${3:-9}
work=$(mktemp -d /dev/shm/ardma_tools_ab.XXXXXX)
"$new"/ardmad --listen 127.0.0.1:0 --port-file "$work/port" --memory 2G --quiet &
ardmad_pid=$!
trap 'kill $ardmad_pid 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 50); do [[ -s $work/port ]] && break; sleep 0.1; done
export ARDMA_SERVER=$(cat "$work/port")

source bench/apps_data.sh
apps_data "$work"
"$new"/ardma-cp "$work/text" dfs:/text
"$new"/ardma-cp -r "$work/tree" dfs:/tree
rm -rf "$work/text" "$work/tree"

# Wall seconds of one run (output through a pipe, as a user's would be).
seconds() {
  local start end
  start=$(date +%s.%N)
  eval "$1" | cat >/dev/null
  end=$(date +%s.%N)
  awk -v a="$end" -v b="$start" 'BEGIN {print a - b}'
}
median() { sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

printf '| command | old s | new s | new/old (median of %d pairs) |\n|---|---:|---:|---:|\n' "$pairs"
for cmd in "ardma-grep -c 'static inline' dfs:/text" "ardma-grep -ci 'static inline' dfs:/text" \
           "ardma-grep -cE 'int|char' dfs:/text" "ardma-grep -E 'int|char' dfs:/text" \
           "ardma-find dfs:/tree -name '*7*'"; do
  want=$(eval "$new/$cmd" | md5sum)
  [[ $(eval "$old/$cmd" | md5sum) == "$want" ]] || { echo "outputs differ: $cmd" >&2; exit 1; }
  olds=() news=() ratios=()
  seconds "$old/$cmd" >/dev/null  # warm-up: each client's code shipped once
  seconds "$new/$cmd" >/dev/null
  for _ in $(seq "$pairs"); do
    a=$(seconds "$old/$cmd")
    b=$(seconds "$new/$cmd")
    olds+=("$a") news+=("$b") ratios+=("$(awk -v a="$a" -v b="$b" 'BEGIN {print b / a}')")
  done
  printf '| `%s` | %.3f | %.3f | %.3f |\n' "${cmd//|/\\|}" "$(printf '%s\n' "${olds[@]}" | median)" \
    "$(printf '%s\n' "${news[@]}" | median)" "$(printf '%s\n' "${ratios[@]}" | median)"
done
