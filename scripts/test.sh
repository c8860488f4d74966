#!/usr/bin/env bash
# Builds everything and runs every test (unit, integration, binaries) with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
cd "${BUILD_DIR:-build}"
ctest --output-on-failure -j "${JOBS:-2}" --timeout 300
