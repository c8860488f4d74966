#!/usr/bin/env bash
# The Python package as a user installs it (ctest: python_pip_install): a fresh venv of Debian's
# python3 (--system-site-packages: setuptools and pybind11 come from Debian), then
# `pip install --no-build-isolation --no-index ./python` (no network) against this build installed
# as a toolkit, then `import ardma` and a call to a running ardmad from the venv.
#   scripts/python_install_test.sh BUILD_DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$1" && pwd)
work=$(mktemp -d /tmp/ardma_pip.XXXXXX)
server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null; fi
  rm -rf "$work" "$root/python/build" "$root/python/ardma.egg-info"
}
trap cleanup EXIT

cmake --install "$build" --prefix "$work/prefix" >/dev/null
/usr/bin/python3 -m venv --system-site-packages "$work/venv"
ARDMA_CMAKE_ARGS="-DCMAKE_PREFIX_PATH=$work/prefix" PIP_NO_INDEX=1 \
  "$work/venv/bin/pip" install -v --no-build-isolation --no-index "$root/python" >"$work/pip.log" 2>&1 ||
  { cat "$work/pip.log"; echo "pip install failed"; exit 1; }
grep -q "ardma: building the toolkit's libraries" "$work/pip.log" &&
  { echo "pip built the tree's libraries instead of using the installed toolkit"; exit 1; }

"$build/bin/ardmad" --listen 127.0.0.1:0 --port-file "$work/port" --memory 16M --quiet &
server_pid=$!
for _ in $(seq 200); do [ -s "$work/port" ] && break; sleep 0.05; done
cd "$work"  # not the source tree: the venv's installed package is what imports
"$work/venv/bin/python" - "$(cat "$work/port")" <<'PY'
import sys
import ardma
assert ardma.__file__.startswith(sys.prefix), ardma.__file__
client = ardma.Client(sys.argv[1])
dht = ardma.Dht(client)
dht.put("pip", b"k", b"v")
assert dht.get("pip", b"k") == b"v"
print("venv: ardma", ardma.__version__, "from", ardma.__file__)
PY
