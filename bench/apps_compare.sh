#!/usr/bin/env bash
# ardma-grep / ardma-find / ardma-cp beside GNU grep / find / cp and a download+upload, in one run.
#
#   bench/apps_compare.sh [RUNS]     (default 3; medians of whole-process wall times)
#
# Data lives in /dev/shm (tmpfs) so the local tools read memory too: 256 MiB of C headers
# (/usr/include repeated) and a tree of 65,000 small files (65 directories x 1,000, 0 to 2,093
# bytes). ardmad runs as its own process with 2 GiB. Prints one table; every ardma result is
# checked against the GNU tool's. ARDMA_BENCH_TRANSPORT=ucx: the tools reach ardmad over UCX
# (UCX_TLS, default shm,self) instead of TCP.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BUILD_DIR:-build}/bin  # scripts/build.sh builds there (BUILD_DIR, BUILD_TYPE honoured)
runs=${1:-3}
./scripts/build.sh ardmad ardma ardma_grep ardma_find ardma_cp >/dev/null
work=$(mktemp -d /dev/shm/ardma_apps.XXXXXX)
port_file=$work/port
"$bin"/ardmad --listen 127.0.0.1:0 --port-file "$port_file" --memory 2G --quiet &
ardmad_pid=$!
trap 'kill $ardmad_pid 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 50); do [[ -s $port_file ]] && break; sleep 0.1; done
server=$(cat "$port_file")
if [[ ${ARDMA_BENCH_TRANSPORT:-tcp} == ucx ]]; then
  server=ucx://$server
  export UCX_TLS=${UCX_TLS:-shm,self}
fi
export ARDMA_SERVER=$server

# shellcheck source=bench/shell_lib.sh
source bench/shell_lib.sh  # median_time
source bench/apps_data.sh
apps_data "$work"

upload=$(median_time "$bin/ardma-cp $work/text dfs:/text")
# Literal, -i and an alternation of strings, counted; and an alternation whose 821,588 lines are
# all printed (through a pipe: GNU grep stops at the first match when its output is /dev/null).
declare -A gnu_grep active_grep
for name in literal icase alternation printed; do
  case $name in
    literal) flags="-c 'static inline'" ;;
    icase) flags="-ci 'static inline'" ;;
    alternation) flags="-cE 'int|char'" ;;
    printed) flags="-E 'int|char'" ;;
  esac
  gnu_grep[$name]=$(median_time "LC_ALL=C grep $flags $work/text")
  active_grep[$name]=$(median_time "$bin/ardma-grep $flags dfs:/text")
  [[ $(eval "$bin/ardma-grep $flags dfs:/text" | md5sum) == $(eval "LC_ALL=C grep $flags $work/text" | md5sum) ]] ||
    { echo "grep $flags: outputs differ" >&2; exit 1; }
done
rdma_grep=$(median_time "$bin/ardma-grep --mode=rdma -c 'static inline' dfs:/text")
matches=$($bin/ardma-grep -c "static inline" dfs:/text)

start=$(date +%s.%N)
$bin/ardma-cp -r "$work/tree" dfs:/tree
tree_upload=$(awk -v a="$(date +%s.%N)" -v b="$start" 'BEGIN {print a - b}')
gnu_find=$(median_time "find $work/tree -name '*7*'")
active_find=$(median_time "$bin/ardma-find dfs:/tree -name '*7*'")
found=$($bin/ardma-find dfs:/tree -name '*7*' | wc -l)
[[ $found == $(find "$work/tree" -name '*7*' | wc -l) ]] || { echo "find counts differ" >&2; exit 1; }

server_cp=$(median_time "$bin/ardma-cp dfs:/text dfs:/copy")
gnu_cp=$(median_time "cp $work/text $work/copy")
# Trees: a fresh destination each run (cp -r into an existing directory nests the copy).
server_tree_cp=$(median_time "$bin/ardma-cp -r dfs:/tree dfs:/tree_\$RANDOM\$RANDOM")
gnu_tree_cp=$(median_time "cp -r $work/tree $work/tree_\$RANDOM\$RANDOM")
round_cp=$(median_time "$bin/ardma-cp dfs:/text $work/down && $bin/ardma-cp $work/down dfs:/copy2")

mbps() { awk -v t="$1" 'BEGIN {printf "%.0f", 256 / t}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
printf '\n%-46s %10s %12s\n' "command" "seconds" "MiB/s"
printf '%-46s %10.3f %12s\n' "ardma-cp upload, 256 MiB" "$upload" "$(mbps "$upload")"
for name in literal icase alternation printed; do
  printf '%-46s %10.3f %12s\n' "GNU grep ($name), 256 MiB in tmpfs" "${gnu_grep[$name]}" "$(mbps "${gnu_grep[$name]}")"
  printf '%-46s %10.3f %12s\n' "ardma-grep ($name, active), 256 MiB" "${active_grep[$name]}" "$(mbps "${active_grep[$name]}")"
done
printf '%-46s %10.3f %12s\n' "ardma-grep -c --mode=rdma, 256 MiB" "$rdma_grep" "$(mbps "$rdma_grep")"
printf '%-46s %10.3f %12s\n' "ardma-cp -r upload, 65,000 files" "$tree_upload" "$(awk -v t="$tree_upload" 'BEGIN {printf "%.0f files/s", 65000 / t}')"
printf '%-46s %10.3f %12s\n' "GNU find -name, 65,066 entries" "$gnu_find" "-"
printf '%-46s %10.3f %12s\n' "ardma-find -name (active), 65,066 entries" "$active_find" "-"
printf '%-46s %10.3f %12s\n' "ardma-cp DFS->DFS (on the server), 256 MiB" "$server_cp" "$(mbps "$server_cp")"
printf '%-46s %10.3f %12s\n' "ardma-cp download + upload, 256 MiB" "$round_cp" "$(mbps "$round_cp")"
printf '%-46s %10.3f %12s\n' "GNU cp, 256 MiB tmpfs -> tmpfs" "$gnu_cp" "$(mbps "$gnu_cp")"
printf '%-46s %10.3f %12s\n' "ardma-cp -r DFS->DFS, 65,000 files" "$server_tree_cp" "-"
printf '%-46s %10.3f %12s\n' "GNU cp -r, 65,000 files tmpfs -> tmpfs" "$gnu_tree_cp" "-"
echo
echo "grep matches: $matches; find matches: $found"
echo "ratios: ardma-grep/GNU grep time $(ratio "${active_grep[literal]}" "${gnu_grep[literal]}")x (literal)," \
     "$(ratio "${active_grep[icase]}" "${gnu_grep[icase]}")x (-i)," \
     "$(ratio "${active_grep[alternation]}" "${gnu_grep[alternation]}")x (alternation)," \
     "$(ratio "${active_grep[printed]}" "${gnu_grep[printed]}")x (alternation, every line printed)," \
     "rdma/active grep $(ratio "$rdma_grep" "${active_grep[literal]}")x," \
     "ardma-find/GNU find $(ratio "$active_find" "$gnu_find")x," \
     "download+upload / server cp $(ratio "$round_cp" "$server_cp")x," \
     "server cp / GNU cp $(ratio "$server_cp" "$gnu_cp")x (file), $(ratio "$server_tree_cp" "$gnu_tree_cp")x (tree)"
