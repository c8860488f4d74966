#!/usr/bin/env bash
# The installed package, used as a user's project would (ctest: package_consumer): installs the
# build into a temporary prefix, configures and builds examples/consumer against it with
# find_package(ardma) and examples/pkgconfig with pkg-config, starts the installed ardmad and runs
# them against it.
#   scripts/consumer_test.sh BUILD_DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$1" && pwd)
work=$(mktemp -d /tmp/ardma_consumer.XXXXXX)
server_pid=
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

cmake --install "$build" --prefix "$work/prefix" >/dev/null
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$root/examples/consumer" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$work/prefix" "${launcher[@]}" >/dev/null
cmake --build "$work/build" >/dev/null

# Every installed library target can be linked: its dependencies' targets are found by the package.
mkdir -p "$work/all_targets"
{
  echo 'cmake_minimum_required(VERSION 3.25)'
  echo 'project(all_targets LANGUAGES CXX)'
  echo 'find_package(ardma CONFIG REQUIRED)'
  echo 'add_library(all_targets INTERFACE)'
  echo 'get_property(targets DIRECTORY PROPERTY IMPORTED_TARGETS)'
  echo 'list(FILTER targets INCLUDE REGEX "^ardma::")'
  echo 'target_link_libraries(all_targets INTERFACE ${targets})'
  echo 'add_executable(probe probe.cc)'
  echo 'target_link_libraries(probe PRIVATE all_targets)'
} >"$work/all_targets/CMakeLists.txt"
echo 'int main() {}' >"$work/all_targets/probe.cc"
cmake -S "$work/all_targets" -B "$work/all_targets/build" -DCMAKE_PREFIX_PATH="$work/prefix" \
  >"$work/all_targets.log" 2>&1 || { cat "$work/all_targets.log"; exit 1; }

# Every header a user includes compiles on its own, with nothing but the package's flags.
for h in core/client/client.h core/client/invoke.h core/status_macros.h core/active/function_table.h \
         services/dht/dht_client.h services/list/list_client.h services/lock/lock_client.h \
         services/dfs/dfs_client.h services/monitor/monitor_client.h core/server/server.h; do
  echo "#include \"$h\"" | ${CXX:-c++} -std=c++20 -fsyntax-only -x c++ \
    -I"$work/prefix/include/ardma" - || { echo "$h does not compile on its own"; exit 1; }
done

# The same package through pkg-config, for builds without CMake.
export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
flags=$(pkg-config --cflags --libs --static ardma-dht_client)
${CXX:-c++} -O1 "$root/examples/pkgconfig/dht_hello.cc" $flags -o "$work/dht_hello"

"$work/prefix/bin/ardmad" --listen 127.0.0.1:0 --port-file "$work/port" --memory 64M --quiet &
server_pid=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.05; done
first=$("$work/build/consumer" "$(cat "$work/port")")
second=$("$work/build/consumer" "$(cat "$work/port")")
expected_first=$'dht: alice -> token-1\nlock: held \'report\' with token 1\ncounter: 5'
expected_second=$'dht: alice -> token-1\nlock: held \'report\' with token 2\ncounter: 10'
hello=$("$work/dht_hello" "$(cat "$work/port")")
[ "$hello" = "hello -> world" ] || { echo "dht_hello printed: $hello"; exit 1; }
if [ "$first" != "$expected_first" ] || [ "$second" != "$expected_second" ]; then
  echo "unexpected output:"; echo "$first"; echo "$second"
  exit 1
fi
# The services' shipped code is installed for --preload, and the package names where.
ls "$work/prefix/lib/ardma/active/ardma_dht.so" >/dev/null
echo "package consumer: built against the install tree and ran"
