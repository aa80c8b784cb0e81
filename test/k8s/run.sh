#!/usr/bin/env bash
# make test-k8s: every test/k8s/test_*.py on a real Kubernetes 1.20 control
# plane (each file starts its own, see k8sreal.py), then the scheduling-rate
# benchmark (bench/bench_k8s_sched.py, one round) unless K8S_BENCH=0.
# Ends with one line "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
pass=0 fail=0
for t in test/k8s/test_*.py; do
  echo "== $t"
  out=$(mktemp)
  /usr/bin/python3 "$t" 2>&1 </dev/null | tee "$out"
  rc=${PIPESTATUS[0]}
  line=$(grep -E '^[a-z0-9_-]+: [0-9]+ passed, [0-9]+ failed' "$out" | tail -n 1)
  rm -f "$out"
  if [ -n "$line" ]; then
    p=$(sed -E 's/^[^:]+: ([0-9]+) passed.*/\1/' <<<"$line")
    f=$(sed -E 's/^[^:]+: [0-9]+ passed, ([0-9]+) failed.*/\1/' <<<"$line")
    [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
  else
    echo "$t: exited $rc without a summary line"
    p=0 f=1
  fi
  pass=$((pass + p)) fail=$((fail + f))
done
if [ "${K8S_BENCH:-1}" != 0 ]; then
  echo "== bench/bench_k8s_sched.py"
  K8S_BENCH_ROUNDS=${K8S_BENCH_ROUNDS:-1} /usr/bin/python3 bench/bench_k8s_sched.py </dev/null || fail=$((fail + 1))
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
