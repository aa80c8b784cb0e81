#!/usr/bin/env bash
# shellcheck disable=SC2317  # functions run from traps and pl_wait
# `make run`: a whole Peloton-C on loopback. Starts a private redis-server
# (unless PELOTON_REDIS=host:port names one), pelotond with all its roles and
# kubelet-sim with a small fleet, writes a kubeconfig, prints how to use it,
# and on Ctrl-C (or TERM) stops kubelet-sim, pelotond and redis in that order.
#
# Environment: NODES (4) simulated nodes; PELOTON_REDIS host:port of a redis
# to use; REDIS_FSYNC always (default) or everysec for the private redis; API_PORT (0 = any free port); ROLES (pelotond's --roles, default all);
# MESOS_AGENTS (0) simulated Mesos agents: mesos-master-sim starts too and
# pelotond gets --mesos-master (docs/mesos.md); REDIS_REPLICAS (0) N > 0: instead of the
# single private redis, a primary, N replicas and three Sentinels on loopback TCP
# ports, pelotond given --redis-sentinel and --redis-wait-replicas=1 (docs/operations.md);
# PELOTOND_ARGS / KSIM_ARGS extra flags; PELOTON_STATE_DIR to keep the state
# (redis data, logs, kubeconfig) in a directory of your choice (kept on exit).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

NODES=${NODES:-4}
MESOS_AGENTS=${MESOS_AGENTS:-0}
[[ "$MESOS_AGENTS" =~ ^[0-9]+$ ]] || pl_die "MESOS_AGENTS must be a number"
API_PORT=${API_PORT:-0}
REDIS_REPLICAS=${REDIS_REPLICAS:-0}
if ! [[ "$REDIS_REPLICAS" =~ ^[0-9]+$ ]] || [ "$REDIS_REPLICAS" -gt 8 ]; then
  pl_die "REDIS_REPLICAS must be a number from 0 to 8"
fi
for b in bin/pelotond bin/kubelet-sim; do
  [ -x "$b" ] || pl_die "$b is missing: run make build"
done
command -v curl >/dev/null || pl_die "curl is not installed (make deps)"

if [ -n "${PELOTON_STATE_DIR:-}" ]; then
  DIR=$PELOTON_STATE_DIR
  mkdir -p "$DIR"
  KEEP_DIR=1
else
  DIR=$(mktemp -d /tmp/peloton-run.XXXXXX)
  KEEP_DIR=0
fi
RD_PIDS="" RD_PID="" PD_PID="" KS_PID="" MS_PID="" STOPPING=0

cleanup() {
  local rc=$?
  [ "$STOPPING" = 1 ] && return
  STOPPING=1
  trap '' INT TERM PIPE # a reader of our output may be gone (make run | tee, Ctrl-C)
  [ -n "$KS_PID$PD_PID$RD_PID$RD_PIDS$MS_PID" ] && echo "stopping..." >&2
  pl_stop kubelet-sim "$KS_PID"
  pl_stop pelotond "$PD_PID"
  pl_stop mesos-master-sim "$MS_PID"
  pl_stop redis-server "$RD_PID"
  for p in $RD_PIDS; do pl_stop redis-server/sentinel "$p"; done
  if [ "$rc" != 0 ]; then
    echo "logs kept in $DIR" >&2
  elif [ "$KEEP_DIR" = 0 ]; then
    rm -rf "$DIR"
  fi
  exit "$rc"
}
trap cleanup EXIT
pl_stop_on_signals

# ---- redis
# pelotond reaches a private redis through its Unix-domain socket only (no
# TCP port: the store holds Secrets), and its controllers reach the API
# server through pelotond's socket (the same protocols, without the TCP/IP
# stack's cost per message; skipped when DIR is too long a path for one).
# kubelet-sim and kubectl come over TCP, as Kubelets and users would from
# other hosts.
REDIS_ARGS=()
if [ -n "${PELOTON_REDIS:-}" ]; then
  REDIS=$PELOTON_REDIS
  pl_redis_reachable "$REDIS" || pl_die "PELOTON_REDIS=$REDIS does not answer PING"
elif [ "$REDIS_REPLICAS" -gt 0 ]; then
  # a Sentinel-managed Redis: pelotond asks the Sentinels for the primary and
  # acknowledges a write once a replica holds it (docs/operations.md)
  pl_start_redis_sentinel "$DIR" "$REDIS_REPLICAS"
  RD_PIDS=$PL_REDIS_PIDS
  REDIS=$PL_REDIS_PRIMARY
  REDIS_ARGS=(--redis-sentinel="$PL_SENTINELS" --redis-master-name="$PL_REDIS_MASTER_NAME" --redis-wait-replicas=1)
else
  pl_start_redis "$DIR"
  RD_PID=$PL_REDIS_PID
  REDIS=$PL_REDIS_ADDR
fi
API_UNIX=()
pl_sockets_fit "$DIR" && API_UNIX=(--unix-socket="$DIR/api.sock")

# ---- mesos-master-sim (MESOS_AGENTS=N): a simulated Mesos master and agents
MESOS_ARGS=()
if [ "$MESOS_AGENTS" -gt 0 ]; then
  setsid bin/mesos-master-sim --port=0 --agents="$MESOS_AGENTS" --agent-cpus=8 --agent-mem=32768 \
    >"$DIR/mesos-master-sim.out" 2>"$DIR/mesos-master-sim.log" &
  MS_PID=$!
  pl_wait "mesos-master-sim" 30 "$MS_PID" "$DIR/mesos-master-sim.log" grep -q "listening port=" "$DIR/mesos-master-sim.out"
  MS_PORT=$(sed -n 's/.*listening port=\([0-9]*\).*/\1/p' "$DIR/mesos-master-sim.out")
  MESOS_ARGS=(--mesos-master="http://127.0.0.1:$MS_PORT")
fi

# ---- pelotond
rm -f "$DIR/port"
# shellcheck disable=SC2086
# --insecure-allow-anonymous: a local development cluster, its kubeconfig
# without credentials (docs/security.md; PELOTOND_ARGS=--token-file=F and
# a kubeconfig with its token for a closed one)
setsid bin/pelotond --redis="$REDIS" --port="$API_PORT" --port-file="$DIR/port" --crds=crds \
  --insecure-allow-anonymous "${API_UNIX[@]}" "${REDIS_ARGS[@]}" "${MESOS_ARGS[@]}" ${ROLES:+--roles=$ROLES} ${PELOTOND_ARGS:-} >"$DIR/pelotond.log" 2>&1 &
PD_PID=$!
pl_wait "pelotond (port file)" 30 "$PD_PID" "$DIR/pelotond.log" test -s "$DIR/port"
PORT=$(awk '{print $1; exit}' "$DIR/port")
SERVER=http://127.0.0.1:$PORT
pl_wait "pelotond at $SERVER/healthz" 30 "$PD_PID" "$DIR/pelotond.log" pl_http_ok "$SERVER/healthz"
pl_write_kubeconfig "$DIR/kubeconfig" "$SERVER"

# ---- kubelet-sim
# shellcheck disable=SC2086
setsid bin/kubelet-sim --kubeconfig="$DIR/kubeconfig" --nodes="$NODES" --cpu=8 --memory=32Gi \
  ${KSIM_ARGS:-} >"$DIR/kubelet-sim.log" 2>&1 &
KS_PID=$!
nodes_registered() {
  [ "$(curl -fsS -m 2 "$SERVER/api/v1/nodes" |
    python3 -c 'import json,sys; print(len(json.load(sys.stdin)["items"]))')" -ge "$((NODES + MESOS_AGENTS))" ]
}
pl_wait "kubelet-sim ($NODES nodes) and $MESOS_AGENTS Mesos agents" 60 "$KS_PID" "$DIR/kubelet-sim.log" nodes_registered
FLEET="$NODES simulated nodes"
[ "$MESOS_AGENTS" -gt 0 ] && FLEET="$FLEET and $MESOS_AGENTS Mesos agents (mesos-master-sim at http://127.0.0.1:$MS_PORT)"

REDIS_SAYS="redis $REDIS
(AOF fsync ${PL_REDIS_FSYNC:-of your redis})"
[ "$REDIS_REPLICAS" -gt 0 ] && [ -z "${PELOTON_REDIS:-}" ] && REDIS_SAYS="redis primary $REDIS with $REDIS_REPLICAS
replicas and 3 Sentinels at $PL_SENTINELS (master name $PL_REDIS_MASTER_NAME; AOF fsync $PL_REDIS_FSYNC)"
cat <<EOF

Peloton-C is running: API server $SERVER (local, no auth), $REDIS_SAYS, $FLEET. Logs and state: $DIR
Try:
  export KUBECONFIG=$DIR/kubeconfig
  kubectl get nodes
  kubectl apply -f examples/pools.yaml && kubectl get rp
Web UI: $SERVER/ui/ (docs/ui.md)
Ctrl-C stops kubelet-sim, pelotond${MS_PID:+, mesos-master-sim} and redis${RD_PIDS:+ (servers and Sentinels)}.
EOF

# Until Ctrl-C, or until one of them exits on its own (with replicas, a
# redis-server may be stopped on purpose: the Sentinels fail over).
set +e
wait -n $KS_PID $PD_PID $RD_PID $MS_PID
rc=$?
for p in "$KS_PID:kubelet-sim" "$PD_PID:pelotond" "$RD_PID:redis-server" "$MS_PID:mesos-master-sim"; do
  pid=${p%%:*}
  if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
    echo "error: ${p#*:} exited (status $rc); see $DIR" >&2
    break
  fi
done
exit 1
