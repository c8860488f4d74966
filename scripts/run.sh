#!/usr/bin/env bash
# The main job: builds, starts ardmad on 127.0.0.1:15712 with its default settings, and runs a short
# demo against it. On a terminal the server then keeps running until Ctrl-C; otherwise (scripts,
# CI) it is stopped after the demo. ARDMA_LISTEN overrides the address.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh ardmad ardma ardma_demo

listen=${ARDMA_LISTEN:-127.0.0.1:15712}
bin=${BUILD_DIR:-build}/bin
port_file=$(mktemp)
rm -f "$port_file"

"$bin/ardmad" --listen "$listen" --port-file "$port_file" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -f "$port_file"' EXIT

for _ in $(seq 100); do
  [ -s "$port_file" ] && break
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "run.sh: ardmad failed to start (is $listen already in use?)" >&2
    exit 1
  fi
  sleep 0.1
done
[ -s "$port_file" ] || { echo "run.sh: ardmad did not start listening" >&2; exit 1; }
address=$(cat "$port_file")

echo
"$bin/ardma-demo" --server "$address"
echo
"$bin/ardma" --server "$address" stats | grep -E '^(requests\.(read|execute|load)|active\.reads|execute\.inline|heap\.allocated) '

if [ -t 0 ]; then
  echo
  echo "ardmad is serving on $address (try: $bin/ardma --server $address ping). Ctrl-C stops it."
  wait "$pid"
fi
