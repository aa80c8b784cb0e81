#!/usr/bin/env bash
# Starts a private redis-server and pelotond (the apiserver role) on loopback,
# writes a kubeconfig, prints how to use it, and stops both on Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=$(mktemp -d /tmp/peloton-run.XXXXXX)
API_PORT=${API_PORT:-6080}
REDIS_PORT=${REDIS_PORT:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')}

cleanup() {
  [ -n "${PD_PID:-}" ] && kill "$PD_PID" 2>/dev/null && wait "$PD_PID" 2>/dev/null || true
  [ -n "${RD_PID:-}" ] && kill "$RD_PID" 2>/dev/null && wait "$RD_PID" 2>/dev/null || true
  rm -rf "$DIR"
}
trap cleanup EXIT INT TERM

redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly yes --dir "$DIR" \
  --daemonize no >"$DIR/redis.log" 2>&1 &
RD_PID=$!
for _ in $(seq 100); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.05; done

bin/pelotond --port="$API_PORT" --redis="127.0.0.1:$REDIS_PORT" &
PD_PID=$!
cat >"$DIR/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters: [{name: peloton, cluster: {server: "http://127.0.0.1:$API_PORT"}}]
users: [{name: local, user: {}}]
contexts: [{name: peloton, context: {cluster: peloton, user: local}}]
current-context: peloton
KC
echo
echo "Peloton-C API server on http://127.0.0.1:$API_PORT (redis on 127.0.0.1:$REDIS_PORT). Try:"
echo "  export KUBECONFIG=$DIR/kubeconfig"
echo "  kubectl get namespaces"
echo "Ctrl-C stops both."
wait "$PD_PID"
