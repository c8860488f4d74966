#!/usr/bin/env bash
# Builds the wire-decoder fuzz target with clang + libFuzzer + ASan/UBSan and runs it.
#   scripts/fuzz.sh [SECONDS]     (default 60)
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
for p in clang libclang-rt-14-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$p"; }
done
out=${BUILD_DIR:-build}/fuzz
mkdir -p "$out/corpus"
clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -I. \
  core/wire/wire_fuzz.cc core/wire/frame.cc core/wire/messages.cc \
  $(pkg-config --cflags --libs absl_status absl_statusor absl_strings absl_str_format) \
  -o "$out/wire_fuzz"
"$out/wire_fuzz" -max_total_time="${1:-60}" -max_len=4096 "$out/corpus"
