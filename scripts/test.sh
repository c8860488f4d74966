#!/usr/bin/env bash
# Builds everything and runs every test (unit, integration, binaries) with ctest, then the 60 s
# soak on its own, then the three fuzz targets (wire decoders, request handler, LOAD of native
# code) with sanitizers for FUZZ_SECONDS each (default 60; 0 skips them).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
# The unit and integration tests, in parallel; then the soak (label `soak`) alone.
(cd "${BUILD_DIR:-build}" && ctest --output-on-failure -j "${JOBS:-2}" --timeout 300 -LE soak)
(cd "${BUILD_DIR:-build}" && ctest --output-on-failure --timeout 300 -L soak)
if [ "${FUZZ_SECONDS:-60}" != 0 ]; then
  ./scripts/fuzz.sh -t "${FUZZ_SECONDS:-60}" all
fi
