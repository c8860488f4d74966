#!/usr/bin/env bash
# Checks scripts/perf-check.sh end to end: its refusals of bad arguments, then a real paired run
# of this very commit against itself (one round, two benchmarks), whose table must name both with
# their ratio and the geometric mean. Run by ctest (perf_check) with BUILD_DIR set to its build.
set -euo pipefail
cd "$(dirname "$0")/.."
fail() { echo "FAIL: $*" >&2; exit 1; }

out=$(scripts/perf-check.sh 2>&1) && fail "no BASE was accepted"
[[ $out == *"which commit is the base"* ]] || fail "no BASE: $out"
out=$(scripts/perf-check.sh no-such-commit-here 2>&1) && fail "a bad BASE was accepted"
[[ $out == *"is not a commit"* ]] || fail "bad BASE: $out"
out=$(scripts/perf-check.sh HEAD --rounds x 2>&1) && fail "--rounds x was accepted"
scripts/perf-check.sh --help | grep -q "scripts/perf-check.sh BASE" || fail "--help"

out=$(scripts/perf-check.sh HEAD --rounds 1 --min-time 0.01 \
  --filter '^BM_(Ping|PingUcx)/real_time/threads:1$' 2>&1) || fail "the run failed: $out"
echo "$out"
for name in 'BM_Ping/real_time/threads:1' 'BM_PingUcx/real_time/threads:1'; do
  grep -Eq "^$name +[0-9.]+[mun]?s +[0-9.]+[mun]?s +[0-9.]+$" <<<"$out" || fail "no row for $name"
done
grep -Eq '^geometric mean of B/A +[0-9.]+$' <<<"$out" || fail "no geometric mean"
git worktree list | grep -q ardma-perf-check && fail "the base's worktree was left behind"
echo "perf-check.sh: OK"
