#!/usr/bin/env bash
# `make soak`: pelotond (every role) and kubelet-sim under valgrind
# --leak-check=full through a short load, then a clean stop (SIGTERM), and
# each one's leak summary. Not part of `make test` (valgrind runs the daemons
# some 20-50x slower). Exits 1 when valgrind found a definite leak or an
# error (an invalid read or write, a use of an uninitialised value), 0
# otherwise; the full reports stay in the printed directory.
#
# Environment: SOAK_PODS (150) pods created in rounds of 10 (each runs 1 s and
# is deleted when done), SOAK_JOBS (6) Peloton Jobs (BATCH, 3 instances),
# NODES (3). Uses the release binaries (bin/, -O2 -g: valgrind needs no
# ASan build) and a private redis-server on loopback; everything it starts
# is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

SOAK_PODS=${SOAK_PODS:-150}
SOAK_JOBS=${SOAK_JOBS:-6}
NODES=${NODES:-3}
for v in SOAK_PODS SOAK_JOBS NODES; do
  [[ "${!v}" =~ ^[0-9]+$ ]] || pl_die "$v must be a number"
done
for b in bin/pelotond bin/kubelet-sim; do
  [ -x "$b" ] || pl_die "$b is missing: run make build"
done
if ! command -v valgrind >/dev/null; then
  # not in scripts/deps.sh: only this script needs it
  [ "$(id -u)" = 0 ] || pl_die "valgrind is not installed (apt-get install valgrind)"
  apt-get install -y -qq valgrind >/dev/null || pl_die "apt-get install valgrind failed"
fi

DIR=$(mktemp -d /tmp/peloton-soak.XXXXXX)
RD_PID="" PD_PID="" KS_PID=""
cleanup() {
  trap '' INT TERM
  pl_stop kubelet-sim "$KS_PID" 120
  pl_stop pelotond "$PD_PID" 120
  pl_stop redis-server "$RD_PID"
}
trap cleanup EXIT
pl_stop_on_signals

VG=(valgrind --leak-check=full "--show-leak-kinds=definite,indirect" --errors-for-leak-kinds=definite
  --num-callers=30 --error-exitcode=99 --trace-children=no)

pl_start_redis "$DIR"
RD_PID=$PL_REDIS_PID
setsid "${VG[@]}" --log-file="$DIR/valgrind-pelotond.txt" bin/pelotond --redis="$PL_REDIS_ADDR" --port=0 \
  --port-file="$DIR/port" --crds=crds --insecure-allow-anonymous --roles=all >"$DIR/pelotond.log" 2>&1 &
PD_PID=$!
pl_wait "pelotond under valgrind" 180 "$PD_PID" "$DIR/pelotond.log" test -s "$DIR/port"
SERVER=http://127.0.0.1:$(awk '{print $1; exit}' "$DIR/port")
pl_wait "pelotond's /healthz" 180 "$PD_PID" "$DIR/pelotond.log" pl_http_ok "$SERVER/healthz"
pl_write_kubeconfig "$DIR/kubeconfig" "$SERVER"
setsid "${VG[@]}" --log-file="$DIR/valgrind-kubelet-sim.txt" bin/kubelet-sim --kubeconfig="$DIR/kubeconfig" \
  --nodes="$NODES" --cpu=8 --memory=32Gi >"$DIR/kubelet-sim.log" 2>&1 &
KS_PID=$!
pl_wait "kubelet-sim under valgrind" 180 "$KS_PID" "$DIR/kubelet-sim.log" grep -q "nodes registered" "$DIR/kubelet-sim.log"

echo "soak: $SOAK_PODS pods and $SOAK_JOBS BATCH Jobs through pelotond and kubelet-sim under valgrind ($DIR)"
t0=$SECONDS
SERVER=$SERVER SOAK_PODS=$SOAK_PODS SOAK_JOBS=$SOAK_JOBS python3 - <<'PY'
import json, os, time, urllib.error, urllib.request
S, NP, NJ = os.environ["SERVER"], int(os.environ["SOAK_PODS"]), int(os.environ["SOAK_JOBS"])

def call(method, path, body=None):
    req = urllib.request.Request(S + path, method=method, data=json.dumps(body).encode() if body else None,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, {}

def wait(check, secs, what):
    end = time.monotonic() + secs
    while time.monotonic() < end:
        if check():
            return
        time.sleep(0.5)
    raise SystemExit(f"soak: {what} not done in {secs} s")

ANN = {"kubelet-sim.peloton.io/run-seconds": "1"}
POD = "/api/v1/namespaces/default/pods"
JOB = "/apis/peloton.io/v1alpha1/namespaces/default/jobs"
code, _ = call("POST", "/apis/peloton.io/v1alpha1/resourcepools", {"apiVersion": "peloton.io/v1alpha1",
               "kind": "ResourcePool", "metadata": {"name": "soak"},
               "spec": {"resources": [{"kind": "cpu", "reservation": "8", "limit": "16", "share": 1}]}})
assert code == 201, code
for j in range(NJ):
    code, _ = call("POST", JOB, {"apiVersion": "peloton.io/v1alpha1", "kind": "Job", "metadata": {"name": f"soak-{j}"},
                   "spec": {"type": "BATCH", "resourcePool": "soak", "instanceCount": 3,
                            "template": {"metadata": {"annotations": ANN}, "spec": {"containers": [
                                {"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}]}}}})
    assert code == 201, code
for r in range(0, NP, 10):
    names = [f"soak-p{i}" for i in range(r, min(r + 10, NP))]
    for n in names:
        code, _ = call("POST", POD, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": n, "annotations": ANN,
                       "labels": {"peloton.io/resource-pool": "soak"}}, "spec": {"restartPolicy": "Never",
                       "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}]}})
        assert code == 201, (n, code)
    def done():
        return all(call("GET", f"{POD}/{n}")[1].get("status", {}).get("phase") == "Succeeded" for n in names)
    wait(done, 120, f"pods {names[0]}..{names[-1]}")
    for n in names:
        call("DELETE", f"{POD}/{n}")
def jobs_done():
    items = call("GET", JOB)[1].get("items", [])
    return len(items) == NJ and all(j.get("status", {}).get("state") == "SUCCEEDED" for j in items)
wait(jobs_done, 180, "the Jobs")
for j in range(NJ):
    call("DELETE", f"{JOB}/soak-{j}")
print(f"soak: {NP} pods and {NJ} Jobs done")
PY
echo "soak: load done in $((SECONDS - t0)) s; stopping (SIGTERM)"
rc=0
for who in kubelet-sim pelotond; do
  pid=$KS_PID
  [ "$who" = pelotond ] && pid=$PD_PID
  kill -TERM "$pid"
  st=0
  for ((i = 0; i < 2400; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  wait "$pid" || st=$?
  [ "$who" = pelotond ] && PD_PID="" || KS_PID=""
  log=$DIR/valgrind-$who.txt
  echo "== $who (exit $st): $log"
  sed -n '/HEAP SUMMARY/,/ERROR SUMMARY/p' "$log" | grep -v '^==[0-9]*== *$' | grep -Ev 'For (lists|counts) of' |
    sed 's/^==[0-9]*== /  /' | grep -E 'in use at exit|total heap usage|lost:|reachable:|suppressed:|no leaks|SUMMARY' || true
  grep -q "definitely lost: [1-9]" "$log" && rc=1
  grep -q "ERROR SUMMARY: [1-9]" "$log" && rc=1
  [ "$st" = 0 ] || rc=1
done
if [ "$rc" = 0 ]; then
  echo "soak: no definite leak, no error"
  rm -rf "$DIR"
else
  echo "soak: leaks or errors (or an unclean exit): reports in $DIR"
  trap - EXIT
  cleanup
fi
exit "$rc"
