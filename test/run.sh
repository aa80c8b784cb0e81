#!/usr/bin/env bash
# Runs every test suite, each of which prints a line "SUITE: N passed, N failed".
# A suite that exits non-zero without such a line (a crash) counts as one failure.
# Ends with the single line "N passed, N failed" summing all suites.
set -uo pipefail
cd "$(dirname "$0")/.."

total_pass=0
total_fail=0
run_suite() {
  local name=$1; shift
  local out rc line p f
  out=$(mktemp)
  echo "== $name"
  "$@" 2>&1 | tee "$out"
  rc=${PIPESTATUS[0]}
  line=$(grep -E '^[a-z0-9_-]+: [0-9]+ passed, [0-9]+ failed' "$out" | tail -n 1)
  if [ -n "$line" ]; then
    p=$(sed -E 's/^[^:]+: ([0-9]+) passed, ([0-9]+) failed.*/\1/' <<<"$line")
    f=$(sed -E 's/^[^:]+: ([0-9]+) passed, ([0-9]+) failed.*/\2/' <<<"$line")
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  else
    p=0; f=1
    echo "$name: suite exited $rc without a summary line"
  fi
  total_pass=$((total_pass + p))
  total_fail=$((total_fail + f))
  rm -f "$out"
}

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

run_suite unit build/asan/unit
if [ -x build/asan/integ ] && ls test/integ/*.c >/dev/null 2>&1; then
  TEST_SUITE=integ run_suite integ build/asan/integ
fi
# The fuzz targets' replays: the Makefile's list (make test passes it; run
# alone, the script reads it from the Makefile), so a new target is named once.
FUZZ_TARGETS=${FUZZ_TARGETS:-$(sed -n 's/^FUZZ_TARGETS := //p' Makefile)}
[ -n "$FUZZ_TARGETS" ] || { echo "run.sh: no FUZZ_TARGETS in the Makefile" >&2; exit 1; }
for t in $FUZZ_TARGETS; do
  FUZZ_NAME=fuzz-$t run_suite "fuzz-$t" build/asan/fuzz-$t fuzz/corpus/$t/*
done
for t in test/e2e/test_*.py; do
  [ -e "$t" ] || continue
  # a test may name its interpreter (Debian's python3 has python3-kubernetes)
  interp=$(head -n 1 "$t" | sed -n 's/^#!//p')
  run_suite "$(basename "$t" .py)" ${interp:-python3} "$t"
done

echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
