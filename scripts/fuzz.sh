#!/usr/bin/env bash
# Builds the libFuzzer targets with clang + ASan/UBSan and runs them:
#   wire_fuzz     the protocol decoders (core/wire/wire_fuzz.cc)
#   handler_fuzz  the request handler over an in-memory connection (core/server/handler_fuzz.cc),
#                 seeded with valid frames of every op (HandlerFuzzSeeds)
#   load_fuzz     native code bytes through the LOAD path: ELF check, sandboxed trial, dlopen
#                 (core/active/load_fuzz.cc), seeded with two of the project's built libraries
#
#   scripts/fuzz.sh [-t SECONDS | -n RUNS] [wire|handler|load|all]    (default: -t 60 all)
# Corpora are kept in $BUILD_DIR/fuzz/<target>-corpus; a crash leaves its input in $BUILD_DIR/fuzz.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=(-max_total_time=60)
while getopts "t:n:h" opt; do
  case "$opt" in
    t) limit=(-max_total_time="$OPTARG") ;;
    n) limit=(-runs="$OPTARG") ;;
    *) sed -n '2,10p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
which=${1:-all}
case "$which" in wire | handler | load | all) ;; *) echo "fuzz.sh: unknown target '$which'" >&2; exit 2 ;; esac

./scripts/setup.sh
for p in clang libclang-rt-14-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$p"; }
done
out=$(realpath -m "${BUILD_DIR:-build}/fuzz")
mkdir -p "$out"

if [[ $which == wire || $which == all ]]; then
  clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -I. \
    core/wire/wire_fuzz.cc core/wire/frame.cc core/wire/messages.cc core/slots.cc \
    $(pkg-config --cflags --libs absl_status absl_statusor absl_strings absl_str_format absl_cord) \
    -o "$out/wire_fuzz"
  mkdir -p "$out/wire-corpus"
  (cd "$out" && ./wire_fuzz "${limit[@]}" -max_len=4096 wire-corpus)
fi
if [[ $which != wire ]]; then
  # The handler and the loader link the server's libraries: a CMake build under clang, instrumented.
  cmake -S . -B "$out/cmake" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DARDMA_FUZZ=ON \
    -DARDMA_BUILD_TESTS=OFF -DARDMA_BUILD_BENCHMARKS=OFF -DARDMA_PYTHON=OFF \
    -DARDMA_HARDENING=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined" \
    > "$out/cmake.log"
fi
if [[ $which == handler || $which == all ]]; then
  cmake --build "$out/cmake" --target handler_fuzz -j "${JOBS:-2}"
  mkdir -p "$out/handler-corpus" "$out/handler-seeds"
  # detect_leaks=0: the fuzz world (heap, registry) lives for the whole run by design.
  (cd "$out" && ARDMA_FUZZ_SEEDS="$out/handler-seeds" ASAN_OPTIONS=detect_leaks=0 \
    ./cmake/core/server/handler_fuzz "${limit[@]}" -max_len=65536 -print_final_stats=1 \
    handler-corpus handler-seeds)
fi
if [[ $which == load || $which == all ]]; then
  cmake --build "$out/cmake" --target load_fuzz -j "${JOBS:-2}"
  # Seeds: real libraries from the normal (uninstrumented) build.
  ./scripts/build.sh ardma_test2_library_module ardma_hijack_library_module >/dev/null
  mkdir -p "$out/load-corpus" "$out/load-seeds"
  cp "${BUILD_DIR:-build}"/active/ardma_test2.so "${BUILD_DIR:-build}"/active/ardma_hijack.so \
    "$out/load-seeds/"
  # Each input that passes the ELF check costs a trial process: a few hundred runs a minute.
  (cd "$out" && ASAN_OPTIONS=detect_leaks=0 ./cmake/core/active/load_fuzz "${limit[@]}" \
    -max_len=65536 -timeout=30 -print_final_stats=1 load-corpus load-seeds)
fi
