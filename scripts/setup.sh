#!/usr/bin/env bash
# Installs every Debian package the build, the tests and the benchmarks need, when missing.
# Safe to run repeatedly; does nothing when everything is present.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config
  git                     # also /usr/share/perl5 (its Perl modules): a real tree for the golden tests
  python3                 # scripts/check_structure.py (a test), bench/report.py
  python3-prometheus-client  # scripts/metrics_probe.py parses ardmad --metrics (a test)
  prometheus              # promtool check metrics lints ardmad --metrics (a test)
  libboost-dev            # Boost.Asio (header-only in 1.74)
  libabsl-dev             # Abseil: Status, Mutex, flags, strings
  libre2-dev              # RE2 (grep)
  libpcre2-dev            # PCRE2 (grep -P)
  libfuse3-dev fuse3      # ardma-mount (FUSE low-level API; fusermount3)
  rsync                   # mount_test runs rsync -a on the mount
  sshfs openssh-server    # bench/mount_compare.sh: sshfs over loopback, the mount's peer
  distcc time             # bench/cc_compare.sh: distcc/distccd, the compile farm's peer; /usr/bin/time
  libssl-dev              # OpenSSL: SHA-256 of shipped code, HMAC authentication, TLS
  openssl                 # the tests make their TLS certificates with it
  help2man dpkg-dev       # man pages from --help; the Debian package (cpack, dpkg-shlibdeps)
  systemd                 # systemd-analyze verify checks the packaged unit (a test)
  lintian adduser         # the packages are lintian-clean; installing them creates a user (a test)
  strace                  # the unit's SystemCallFilter holds what ardmad calls (a test)
  libucx-dev ucx-utils    # the UCX transport (one-sided RDMA; shared memory, CMA, TCP, verbs)
  libgtest-dev libgmock-dev googletest
  libbenchmark-dev
  openjdk-17-jdk-headless # embedded JVM for jvm active code
  tzdata                  # /usr/share/zoneinfo: a real tree full of symbolic links (cp_golden_test)
  etcd-server etcd-client # the cluster's membership and slot map (the tests start a real etcd)
  curl                    # the metrics test fetches /metrics for promtool
  nlohmann-json3-dev      # JSON for that gateway (header-only)
  libseccomp-dev          # the system-call allow-list of isolated workers (--isolate)
  python3-dev pybind11-dev python3-pybind11  # the Python package ardma (python/)
  python3-pytest python3-setuptools python3-wheel python3-venv python3-pip  # tests; pip install
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
