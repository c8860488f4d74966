#!/usr/bin/env bash
# The Debian packages (ctest: debian_package), built with cpack from BUILD_DIR:
#   1. contents and control data of ardma, libardma-dev and python3-ardma; lintian without errors or warnings not overridden;
#   2. the binaries hardened, the active code stripped as built (the installed bytes are the hashed
#      bytes clients ship), man pages without anything of the build machine;
#   3. the unit: systemd-analyze verify, its exposure score, and every system call ardmad makes
#      (traced, serving TCP and UCX clients with isolated workers) allowed by its SystemCallFilter;
#   4. installed on this machine (root only: CI's container): the user, the state directory and the
#      conffile; ardmad started as the unit starts it, then a client with only the `exec`
#      permission puts and gets a DHT entry with the preloaded code (it LOADs nothing); `dpkg -r`
#      keeps configuration and heap, `dpkg -P` leaves nothing.
#   scripts/package_test.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
source_dir=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/ardma_package.XXXXXX)
chmod 755 "$work"
pids=()
installed_here=0
cleanup() {
  for p in "${pids[@]}"; do pkill -P "$p" 2>/dev/null; kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ "$installed_here" = 1 ]; then
    dpkg -P python3-ardma libardma-dev ardma >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "package test: $*" >&2; exit 1; }
wait_for_file() {  # FILE: until it is non-empty, at most 10 s
  for _ in $(seq 200); do [ -s "$1" ] && return 0; sleep 0.05; done
  fail "$1 never appeared"
}

# --- 1. Contents, control data, lintian ---------------------------------------------------------
(cd "$build" && cpack -G DEB -B "$work/out" >"$work/cpack.log" 2>&1) || {
  cat "$work/cpack.log"; exit 1; }
version=$(dpkg-parsechangelog -l "$source_dir/packaging/changelog" -S Version)
deb="$work/out/ardma_${version}_amd64.deb"
dev="$work/out/libardma-dev_${version}_amd64.deb"
py="$work/out/python3-ardma_${version}_amd64.deb"
[ -f "$deb" ] && [ -f "$dev" ] && [ -f "$py" ] ||
  { ls "$work/out"; fail "expected ardma, libardma-dev and python3-ardma $version"; }
list() { dpkg-deb -c "$1" | awk '{print $6}' | sed 's|^\./|/|'; }
list "$deb" >"$work/files"
list "$dev" >"$work/dev_files"
list "$py" >"$work/py_files"
expect() {  # LISTFILE PATH...: each PATH is in the package
  local listfile=$1; shift
  for f in "$@"; do grep -qx "$f" "$listfile" || fail "missing from $(basename "$listfile"): $f"; done
}
expect "$work/files" /usr/bin/ardmad /usr/bin/ardma /usr/bin/ardma-cp /usr/bin/ardma-grep \
  /usr/bin/ardma-find /usr/bin/ardma-mount /usr/bin/ardma-cc /usr/bin/ardma-ccd \
  /usr/bin/ardma-monitor /usr/bin/ardma-monitord /usr/bin/ardma-demo /usr/bin/ardma-bench \
  /usr/share/man/man1/ardma-mount.1.gz /usr/share/man/man1/ardma-cc.1.gz \
  /usr/share/man/man1/ardma-ccd.1.gz /usr/share/man/man1/ardma-bench.1.gz \
  /usr/share/man/man1/ardmad.1.gz /usr/share/man/man1/ardma.1.gz \
  /usr/lib/ardma/active/ardma_cc.so /usr/lib/ardma/active/ardma_dht.so \
  /usr/lib/systemd/system/ardmad.service /etc/ardma/ardmad.conf \
  /usr/share/ardma/grafana/ardmad.json /usr/share/bash-completion/completions/ardma \
  /usr/share/bash-completion/completions/ardma-grep /usr/share/doc/ardma/SECURITY.md \
  /usr/share/doc/ardma/copyright /usr/share/doc/ardma/changelog.Debian.gz
expect "$work/dev_files" /usr/lib/libardma_client.a /usr/lib/cmake/ardma/ardmaConfig.cmake \
  /usr/include/ardma/core/client/client.h /usr/share/java/ardma-active.jar \
  /usr/share/doc/libardma-dev/copyright /usr/share/doc/libardma-dev/changelog.Debian.gz
expect "$work/py_files" /usr/lib/python3/dist-packages/ardma/__init__.py \
  /usr/share/doc/python3-ardma/copyright
grep -q '^/usr/lib/python3/dist-packages/ardma/_ardma\.cpython-.*\.so$' "$work/py_files" ||
  fail "no extension module in python3-ardma"
# The split: nothing for developers in the runtime package, nothing run in the -dev package.
if grep -E '^/usr/include/|\.a$|/cmake/|/pkgconfig/' "$work/files"; then
  fail "development files in ardma"
fi
if grep -E '^/usr/bin/|^/usr/lib/ardma/|^/etc/' "$work/dev_files"; then
  fail "runtime files in libardma-dev"
fi
# Nothing of the tests or benchmarks, but the load generator ardma-bench.
if cat "$work/files" "$work/dev_files" | grep -E 'test|bench|/testing/' |
   grep -v -e '^/usr/include/ardma/.*_test_' -e 'ardma-bench'; then
  fail "test or benchmark files in the packages"
fi
field() { dpkg-deb -f "$1" "$2"; }
field "$deb" Depends | grep -q 'libucx0' || fail "ardma's Depends lacks libucx0"
field "$deb" Depends | grep -q 'adduser' || fail "ardma's Depends lacks adduser"
field "$deb" Recommends | grep -q 'fuse3' || fail "ardma's Recommends lacks fuse3"
field "$deb" Recommends | grep -q 'jre' || fail "ardma's Recommends lacks a JVM"
field "$dev" Depends | grep -qF "ardma (= $version)" || fail "libardma-dev does not depend on ardma"
for d in libabsl-dev libucx-dev libssl-dev libboost-dev; do
  field "$dev" Depends | grep -q "$d" || fail "libardma-dev's Depends lacks $d"
done
dpkg-deb -e "$deb" "$work/control"
grep -qx /etc/ardma/ardmad.conf "$work/control/conffiles" || fail "ardmad.conf is not a conffile"
for script in postinst prerm postrm; do sh -n "$work/control/$script"; done
lintian --fail-on error,warning "$deb" "$dev" "$py" >"$work/lintian" 2>&1 || {
  cat "$work/lintian"; fail "lintian found errors or warnings not overridden"; }
echo "lintian: clean (overrides: packaging/lintian/)"

# --- 2. Hardening, stripped active code, reproducible man pages ---------------------------------
dpkg -x "$deb" "$work/root"
# (Outputs go to a file before grep -q reads them: grep -q stopping early must not fail a pipe.)
for tool in "$work"/root/usr/bin/*; do
  name=$(basename "$tool")
  "$tool" --version >"$work/out.txt"
  grep -q "^$name (Active RDMA toolkit) " "$work/out.txt" || fail "$name --version failed"
  readelf -dlhSW "$tool" >"$work/elf.txt"
  grep -q 'FLAGS.*\bNOW\b' "$work/elf.txt" || fail "$name: not linked with -z now"
  grep -q GNU_RELRO "$work/elf.txt" || fail "$name: no RELRO segment"
  grep -q 'DYN (Position-Independent Executable' "$work/elf.txt" || fail "$name: not PIE"
  ! grep -q '\.symtab' "$work/elf.txt" || fail "$name: not stripped"
done
readelf --dyn-syms -W "$work/root/usr/bin/ardmad" >"$work/elf.txt"
grep -q '__[a-z]*_chk@' "$work/elf.txt" || fail "ardmad: no fortified calls (_FORTIFY_SOURCE)"
for so in "$work"/root/usr/lib/ardma/active/*.so; do
  cmp -s "$so" "$build/active/$(basename "$so")" || fail "$(basename "$so") differs from the build's"
  cp "$so" "$work/restripped.so"
  strip --remove-section=.comment --remove-section=.note --strip-unneeded "$work/restripped.so"
  cmp -s "$so" "$work/restripped.so" || fail "$(basename "$so"): stripping it again changes it"
done
for page in "$work"/root/usr/share/man/man1/*.gz; do
  zcat "$page" >"$work/page.txt"
  ! grep -q -E -e "\\b$(hostname):[0-9]+" -e "$build" "$work/page.txt" ||
    fail "$(basename "$page") names this machine's HOST:PID or the build directory"
done
release_month=$(date -u -d "@$(dpkg-parsechangelog -l "$source_dir/packaging/changelog" -S Timestamp)" \
                '+%B %Y')
zcat "$work/root/usr/share/man/man1/ardmad.1.gz" >"$work/page.txt"
grep -q "^\.TH .*\"$release_month\"" "$work/page.txt" ||
  fail "ardmad.1 is not dated by the changelog ($release_month)"

# --- 3. The unit ---------------------------------------------------------------------------------
unit="$work/root/usr/lib/systemd/system/ardmad.service"
systemd-analyze verify --man=no --recursive-errors=no --root="$work/root" "$unit"
exposure=$(systemd-analyze security --offline=yes "$unit" | sed -n 's/.*exposure level for .*: \([0-9.]*\).*/\1/p')
echo "systemd exposure: $exposure"
awk -v e="$exposure" 'BEGIN { exit !(e != "" && e <= 2.0) }' ||
  fail "exposure $exposure: above 2.0 (docs/PACKAGING.md)"
# What SystemCallFilter allows: the unit's groups expanded, less its ~ groups.
expand() {  # a filter entry (@set or a call): its system calls, one a line
  case "$1" in
    @*) systemd-analyze syscall-filter --no-pager "$1" | sed 1d |
          sed -e 's/^ *//' -e '/^#/d' -e '/^$/d' | while read -r entry; do expand "$entry"; done ;;
    *) echo "$1" ;;
  esac
}
allowed="" denied=""
while read -r line; do
  for set in ${line#SystemCallFilter=}; do
    case "$set" in ~*) denied+=" ${set#\~}" ;; *) allowed+=" $set" ;; esac
  done
done < <(grep '^SystemCallFilter=' "$unit")
for s in $allowed; do expand "$s"; done | sort -u >"$work/allowed"
for s in $denied; do expand "$s"; done | sort -u >"$work/denied"
comm -23 "$work/allowed" "$work/denied" >"$work/filter"
# ardmad traced while it serves: TCP and UCX (shared memory) clients, DHT puts and gets in isolated
# workers (their sandbox and seccomp set-up included), an admin LOAD (the trial process).
# Not as root: the unit's ardmad runs as its own user (as root, ardmad would drop its workers to
# nobody, with calls the unit never needs).
as_user=() client_as=()
if [ "$(id -u)" = 0 ]; then
  as_user=(-u nobody)
  client_as=(setpriv --reuid=nobody --regid=nogroup --clear-groups)  # UCX's shared memory: one user
fi
install -d -m 0777 "$work/traced"
strace -f -qq -c -U name -o "$work/trace" "${as_user[@]}" "$build/bin/ardmad" \
  --listen 127.0.0.1:0 --memory 64M --memory-file "$work/traced/heap" --isolate all --ucx on \
  --port-file "$work/traced/port" 2>"$work/trace_log" &
pids+=($!)
wait_for_file "$work/traced/port"
"$build/bin/ardma" --server "$(cat "$work/traced/port")" dht put traced k1 v1 >/dev/null
"$build/bin/ardma" --server "$(cat "$work/traced/port")" dht get traced k1 | grep -q v1
UCX_TLS=shm,self "${client_as[@]}" "$build/bin/ardma-bench" --server "ucx://$(cat "$work/traced/port")" \
  -n 200 -c 2 -t dht.put,dht.get >/dev/null
# ardmad's own shutdown is traced too: SIGTERM to it (strace then ends with it).
kill "$(pgrep -P "${pids[-1]}" -x ardmad)"; wait "${pids[-1]}" || true
unset 'pids[-1]'
awk 'NR > 2 && $1 !~ /^-/ && $1 != "total" { print $1 }' "$work/trace" | sort -u >"$work/called"
[ "$(wc -l <"$work/called")" -gt 30 ] || { tail "$work/trace_log"; fail "the trace is too short"; }
if comm -23 "$work/called" "$work/filter" | grep .; then
  fail "ardmad makes the system calls above, which the unit's SystemCallFilter refuses"
fi

# --- 4. Installed on this machine ----------------------------------------------------------------
if [ "$(id -u)" != 0 ]; then
  echo "package: contents, lintian and unit checked; installing needs root: skipped"
  exit 77
fi
if dpkg-query -W -f='${Status}' ardma 2>/dev/null | grep -q installed; then
  fail "ardma is already installed here; this test installs and purges its own build: dpkg -P it"
fi
installed_here=1
dpkg -i "$deb" "$dev" "$py" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg -i failed"; }
getent passwd ardma >/dev/null || fail "postinst made no ardma user"
[ "$(stat -c '%U %a' /var/lib/ardma)" = "ardma 700" ] || fail "/var/lib/ardma: $(stat -c '%U %a' /var/lib/ardma)"
dpkg-query -W -f='${Conffiles}' ardma | grep -q /etc/ardma/ardmad.conf ||
  fail "dpkg does not list ardmad.conf as a conffile"
# An auth file as SECURITY.md says: an admin, and an application with only `exec`.
install -m 0600 -o ardma -g ardma /dev/null /etc/ardma/auth
printf 'admin %s all\napp %s exec\n' "$(openssl rand -hex 32)" "$(openssl rand -hex 32)" >/etc/ardma/auth
grep '^app ' /etc/ardma/auth | cut -d' ' -f1,2 >"$work/app_auth"
chmod 0600 "$work/app_auth"
# ardmad as the unit starts it: its ExecStart, as its User, with a free port and the auth file.
user=$(sed -n 's/^User=//p' /usr/lib/systemd/system/ardmad.service)
exec_start=$(sed -n 's/^ExecStart=//p' /usr/lib/systemd/system/ardmad.service)
install -d -o "$user" "$work/run"
# shellcheck disable=SC2086  # ExecStart is a command line
setpriv --reuid="$user" --regid="$user" --init-groups $exec_start --listen 127.0.0.1:0 \
  --auth-file /etc/ardma/auth --port-file "$work/run/port" 2>"$work/daemon_log" &
pids+=($!)
wait_for_file "$work/run/port"
server=$(cat "$work/run/port")
[ "$(ps -o user= -p "$(pgrep -f -n "^/usr/bin/ardmad --config /etc/ardma/ardmad.conf")")" = "$user" ] ||
  fail "ardmad does not run as $user"
/usr/bin/ardma --server "$server" --auth-file "$work/app_auth" dht put packaged key value >/dev/null ||
  { cat "$work/daemon_log"; fail "an exec-only client could not put (is the preloaded code what it ships?)"; }
[ "$(/usr/bin/ardma --server "$server" --auth-file "$work/app_auth" dht get packaged key)" = value ] ||
  fail "the exec-only client's get did not return its put"
# (A client without `load` cannot have shipped code: the put ran the preloaded, stripped code.)
# Debian's python3 imports the installed package (from anywhere) and reads what the CLI put.
(cd / && ARDMA_AUTH_FILE="$work/app_auth" /usr/bin/python3 -c '
import sys, ardma
assert ardma.__file__.startswith("/usr/lib/python3/dist-packages/"), ardma.__file__
assert ardma.Dht(ardma.Client(sys.argv[1])).get("packaged", b"key") == b"value"
' "$server") || fail "the installed python3-ardma could not read the DHT"
grep -q "preloaded .*ardma_dht.so" "$work/daemon_log" || { cat "$work/daemon_log"; fail "no preload"; }
[ -s /var/lib/ardma/heap ] || fail "no heap in /var/lib/ardma"
kill "${pids[-1]}"; wait "${pids[-1]}" || true
unset 'pids[-1]'

dpkg -r python3-ardma libardma-dev ardma >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg -r failed"; }
[ ! -e /usr/bin/ardmad ] || fail "dpkg -r left /usr/bin/ardmad"
[ -f /etc/ardma/ardmad.conf ] && [ -d /var/lib/ardma ] || fail "dpkg -r removed configuration or heap"
dpkg -P python3-ardma libardma-dev ardma >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg -P failed"; }
installed_here=0
for p in ardma libardma-dev python3-ardma; do
  if dpkg-query -W "$p" >/dev/null 2>&1; then fail "dpkg still knows $p after -P"; fi
done
for gone in /etc/ardma /var/lib/ardma; do [ ! -e "$gone" ] || fail "dpkg -P left $gone"; done
! getent passwd ardma >/dev/null || fail "dpkg -P left the ardma user"
! getent group ardma >/dev/null || fail "dpkg -P left the ardma group"
while read -r f; do
  [ -d "$f" ] || [ ! -e "$f" ] || fail "dpkg -P left $f"
done < <(cat "$work/files" "$work/dev_files" "$work/py_files")
echo "package: $(basename "$deb") ($(wc -l <"$work/files") entries), $(basename "$dev")" \
     "($(wc -l <"$work/dev_files")), $(basename "$py") ($(wc -l <"$work/py_files")):" \
     "lintian-clean, installed, served, purged"
