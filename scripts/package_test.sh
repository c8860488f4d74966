#!/usr/bin/env bash
# The Debian package (ctest: debian_package): builds it with cpack from BUILD_DIR, checks its file
# list and control data, extracts it into an empty root (dpkg -x) and runs the tools from there,
# and verifies the systemd unit against that root (systemd-analyze verify).
#   scripts/package_test.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
work=$(mktemp -d /tmp/ardma_package.XXXXXX)
trap 'rm -rf "$work"' EXIT

(cd "$build" && cpack -G DEB -B "$work/out" >"$work/cpack.log" 2>&1) || {
  cat "$work/cpack.log"; exit 1; }
deb=$(ls "$work"/out/ardma_*_amd64.deb)
dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|' >"$work/files"
missing=0
for f in /usr/bin/ardmad /usr/bin/ardma /usr/bin/ardma-cp /usr/bin/ardma-grep /usr/bin/ardma-find \
         /usr/bin/ardma-mount /usr/share/man/man1/ardma-mount.1.gz \
         /usr/bin/ardma-cc /usr/bin/ardma-ccd /usr/share/man/man1/ardma-cc.1.gz \
         /usr/share/man/man1/ardma-ccd.1.gz /usr/lib/ardma/active/ardma_cc.so \
         /usr/bin/ardma-monitor /usr/bin/ardma-monitord /usr/bin/ardma-demo \
         /usr/lib/systemd/system/ardmad.service /usr/share/ardma/ardmad.conf \
         /usr/share/ardma/grafana/ardmad.json /usr/share/bash-completion/completions/ardma \
         /usr/share/bash-completion/completions/ardma-grep \
         /usr/share/man/man1/ardmad.1.gz /usr/share/man/man1/ardma.1.gz \
         /usr/share/doc/ardma/SECURITY.md /usr/lib/ardma/active/ardma_dht.so \
         /usr/lib/libardma_client.a /usr/lib/cmake/ardma/ardmaConfig.cmake \
         /usr/include/ardma/core/client/client.h /usr/share/java/ardma-active.jar; do
  grep -qx "$f" "$work/files" || { echo "missing from the package: $f"; missing=1; }
done
# Nothing of the tests or benchmarks.
if grep -E 'test|bench|/testing/' "$work/files" | grep -v '^/usr/include/ardma/.*_test_' ; then
  echo "test or benchmark files in the package"; missing=1
fi
[ "$missing" = 0 ]
dpkg-deb -f "$deb" Depends | grep -q 'libucx0' || { echo "Depends lacks libucx0"; exit 1; }
dpkg-deb -e "$deb" "$work/control"
sh -n "$work/control/postinst"

dpkg -x "$deb" "$work/root"
for tool in ardmad ardma ardma-cp ardma-grep ardma-find ardma-mount ardma-cc ardma-ccd; do
  "$work/root/usr/bin/$tool" --version | grep -q "^$tool (Active RDMA toolkit) " ||
    { echo "$tool --version failed from the extracted package"; exit 1; }
done
grep -q '^preload /usr/lib/ardma/active' "$work/root/usr/share/ardma/ardmad.conf" ||
  grep -q '^preload /usr/lib/.*/ardma/active' "$work/root/usr/share/ardma/ardmad.conf"
systemd-analyze verify --man=no --recursive-errors=no --root="$work/root" \
  "$work/root/usr/lib/systemd/system/ardmad.service"
# The packaged configuration is one ardmad accepts: run it with the file, on a free port.
sed -e 's|^listen .*|listen 127.0.0.1:0|' -e "s|^memory-file .*|memory-file $work/heap|" \
    -e 's|^memory .*|memory 16M|' -e "s|^preload .*|preload $work/root/usr/lib/ardma/active|" \
    "$work/root/usr/share/ardma/ardmad.conf" >"$work/ardmad.conf"
"$work/root/usr/bin/ardmad" --config "$work/ardmad.conf" --port-file "$work/port" 2>"$work/log" &
pid=$!
for _ in $(seq 200); do [ -s "$work/port" ] && break; sleep 0.05; done
"$work/root/usr/bin/ardma" --server "$(cat "$work/port")" ping 1 >/dev/null
kill "$pid"; wait "$pid"
grep -q "preloaded .*ardma_dht.so" "$work/log" || { cat "$work/log"; exit 1; }
echo "package: $(basename "$deb"), $(wc -l <"$work/files") entries, installs and runs"
