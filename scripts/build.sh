#!/usr/bin/env bash
# Installs missing dependencies, configures (once) and builds. Extra arguments are build targets.
#   scripts/build.sh                 # everything
#   scripts/build.sh ardmad server_test
# BUILD_DIR (default: build) and BUILD_TYPE (default: RelWithDebInfo) may be set; WERROR=ON
# makes every compiler warning an error (CI sets it).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh

build_dir=${BUILD_DIR:-build}
if [ ! -f "$build_dir/build.ninja" ]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" \
    -DARDMA_WERROR="${WERROR:-OFF}"
elif [ -n "${WERROR:-}" ]; then
  cmake -S . -B "$build_dir" -DARDMA_WERROR="$WERROR" >/dev/null
fi
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "$build_dir" -j "${JOBS:-2}" "${targets[@]}"
