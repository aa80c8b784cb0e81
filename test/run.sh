#!/usr/bin/env bash
# Runs every test suite, each of which prints a line "SUITE: N passed, N failed".
# A suite that exits non-zero without such a line (a crash) counts as one failure.
# Ends with the single line "N passed, N failed" summing all suites.
#
# Suites run TEST_JOBS at a time (default 2): the unit and integration tests,
# the fuzz targets' replays and the e2e suites. Each e2e suite starts its own
# services on free loopback ports in its own temporary folders, and spends
# most of its time waiting on them. A suite's output is printed whole when it
# ends, with the seconds it took. TEST_JOBS=1 runs them one by one, printing
# as they go. An e2e suite whose head has the line "# run.sh: alone" (it
# bounds wall-clock times) runs with nothing beside it: those run first, one
# by one, before the pool starts.
#
# The pool starts the longest suites first, so that both slots end together
# instead of one running a long suite alone at the end: a suite's length is
# its seconds in the last run here ($TEST_TIMES, default build/test-times,
# written at the end of every run), else in test/suite-times (a checked-in
# snapshot, for a fresh checkout), else 0 (after every known suite).
set -uo pipefail
cd "$(dirname "$0")/.."

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
jobs_max=${TEST_JOBS:-2}
[[ "$jobs_max" =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: TEST_JOBS must be a positive number" >&2; exit 2; }

total_pass=0
total_fail=0
failed=()
launched=0
accounted=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
t_start=$SECONDS

# account NAME OUTFILE RC SECONDS: adds the suite's summary line to the totals
account() {
  local name=$1 out=$2 rc=$3 secs=$4 line p f
  line=$(grep -E '^[a-z0-9_-]+: [0-9]+ passed, [0-9]+ failed' "$out" | tail -n 1)
  if [ -n "$line" ]; then
    p=$(sed -E 's/^[^:]+: ([0-9]+) passed, ([0-9]+) failed.*/\1/' <<<"$line")
    f=$(sed -E 's/^[^:]+: ([0-9]+) passed, ([0-9]+) failed.*/\2/' <<<"$line")
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  else
    p=0; f=1
    echo "$name: suite exited $rc without a summary line"
  fi
  echo "-- $name: ${secs} s"
  echo "$name $secs" >>"$work/times"
  total_pass=$((total_pass + p))
  total_fail=$((total_fail + f))
  accounted=$((accounted + 1))
  if [ "$f" -gt 0 ]; then failed+=("$name"); fi
}

# digest: each failed suite again, briefly, after every suite's output, so the
# end of a long log (all a CI page may show) still says what failed and why:
# its FAIL lines and what follows the first (a traceback), or its last lines
digest() {
  local name out first
  [ "${#failed[@]}" -gt 0 ] || return 0
  echo "-- failures (${#failed[@]} suites; each suite's whole output is above)"
  for name in "${failed[@]}"; do
    out=$work/$name.out # kept until the end
    echo "== failed: $name"
    grep -B 4 -E '^FAIL ' "$out" | head -n 40
    first=$(grep -n -m 1 -E '^FAIL ' "$out" | cut -d: -f1)
    if [ -n "$first" ]; then
      sed -n "$((first + 1)),$((first + 60))p" "$out"
    else
      tail -n 40 "$out"
    fi
  done
}

declare -A running_name=() running_t0=()
nrunning=0
# finish_one: waits for any running suite, prints its output and counts it
finish_one() {
  local pid rc name
  wait -n -p pid "${!running_name[@]}"
  rc=$?
  if [ -z "${pid:-}" ] || [ -z "${running_name[$pid]:-}" ]; then # cannot happen: every job is ours
    echo "run.sh: lost track of the running suites (wait: $rc)"
    total_fail=$((total_fail + 1))
    nrunning=0
    return
  fi
  name=${running_name[$pid]}
  echo "== $name"
  cat "$work/$name.out"
  account "$name" "$work/$name.out" "$rc" $((SECONDS - running_t0[$pid]))
  unset "running_name[$pid]" "running_t0[$pid]"
  nrunning=$((nrunning - 1))
}

# suite NAME CMD...: runs it, or starts it once fewer than TEST_JOBS run.
# With ALONE=1 it runs once every other suite has ended, and nothing runs
# beside it (a suite that bounds wall-clock times says so in its head).
suite() {
  local name=$1 t0 rc; shift
  launched=$((launched + 1))
  if [ "$jobs_max" -eq 1 ] || [ "${ALONE:-0}" = 1 ]; then
    while [ "$nrunning" -gt 0 ]; do finish_one; done
    t0=$SECONDS
    echo "== $name"
    "$@" 2>&1 </dev/null | tee "$work/$name.out"
    rc=${PIPESTATUS[0]}
    account "$name" "$work/$name.out" "$rc" $((SECONDS - t0))
    return
  fi
  while [ "$nrunning" -ge "$jobs_max" ]; do finish_one; done
  # a script's background job starts with SIGINT and SIGQUIT ignored: give
  # the suite the defaults it would have in the foreground
  env --default-signal=INT,QUIT "$@" >"$work/$name.out" 2>&1 </dev/null &
  running_name[$!]=$name
  running_t0[$!]=$SECONDS
  nrunning=$((nrunning + 1))
}

# launch NAME: runs the suite NAME (see suite) with its command
launch() {
  local name=$1 t interp
  case $name in
    integ) suite integ env TEST_SUITE=integ build/asan/integ ;;
    unit) suite unit build/asan/unit ;;
    fuzz-*) t=${name#fuzz-}; suite "$name" env FUZZ_NAME="$name" "build/asan/$name" fuzz/corpus/"$t"/* ;;
    *)
      t=test/e2e/$name.py
      # a test may name its interpreter (Debian's python3 has python3-kubernetes)
      interp=$(head -n 1 "$t" | sed -n 's/^#!//p')
      suite "$name" ${interp:-python3} "$t" ;;
  esac
}

names=()
alone=()
# TEST_E2E_GREP=WORD runs only the e2e suites whose file has WORD (no unit,
# integ or fuzz suites): .ci/run's second run, with the machine's kubectl,
# runs the suites that drive kubectl, the rest having run in the fresh root
only=${TEST_E2E_GREP:-}
if [ -z "$only" ]; then
  if [ -x build/asan/integ ] && ls test/integ/*.c >/dev/null 2>&1; then names+=(integ); fi
  names+=(unit)
fi
for t in test/e2e/test_*.py; do
  [ -e "$t" ] || continue
  if [ -n "$only" ] && ! grep -q -F -- "$only" "$t"; then continue; fi
  if head -n 15 "$t" | grep -q '^# run.sh: alone'; then
    alone+=("$(basename "$t" .py)")
  else
    names+=("$(basename "$t" .py)")
  fi
done
# The fuzz targets' replays: the Makefile's list (make test passes it; run
# alone, the script reads it from the Makefile), so a new target is named once.
FUZZ_TARGETS=${FUZZ_TARGETS:-$(sed -n 's/^FUZZ_TARGETS := //p' Makefile)}
[ -n "$FUZZ_TARGETS" ] || { echo "run.sh: no FUZZ_TARGETS in the Makefile" >&2; exit 1; }
[ -n "$only" ] || for t in $FUZZ_TARGETS; do names+=("fuzz-$t"); done

for name in "${alone[@]}"; do ALONE=1 launch "$name"; done
# the pool, longest first (sort -s keeps the order above among equals)
times_file=${TEST_TIMES:-build/test-times}
declare -A est=()
for f in test/suite-times "$times_file"; do # the last run's seconds win over the snapshot's
  [ -r "$f" ] || continue
  while read -r n s _; do [[ "$s" =~ ^[0-9]+$ ]] && est[$n]=$s; done <"$f"
done
while read -r _ name; do
  launch "$name"
done < <(for n in "${names[@]}"; do echo "${est[$n]:-0} $n"; done | sort -s -k1,1nr)
while [ "$nrunning" -gt 0 ]; do finish_one; done

# a runner that lost a suite (a bug here) must not pass quietly
if [ "$accounted" -ne "$launched" ]; then
  echo "run.sh: $launched suites started but $accounted accounted for"
  total_fail=$((total_fail + 1))
fi
digest
echo "-- all suites: $((SECONDS - t_start)) s"
# the next run's order
if [ -d "$(dirname "$times_file")" ]; then
  { [ -r "$times_file" ] && cat "$times_file"; cat "$work/times"; } 2>/dev/null |
    awk '{ t[$1] = $2 } END { for (n in t) print n, t[n] }' | sort >"$work/times.new" &&
    mv "$work/times.new" "$times_file"
fi
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
