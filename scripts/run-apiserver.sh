#!/usr/bin/env bash
# Starts a private redis-server and pelotond (the apiserver role) on loopback,
# writes a kubeconfig, prints how to use it, and stops both on Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=$(mktemp -d /tmp/peloton-run.XXXXXX)
API_PORT=${API_PORT:-6080}
TLS_PORT=${TLS_PORT:-6443}
TOKEN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
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

echo "$TOKEN" >"$DIR/token"
bin/pelotond --port="$API_PORT" --tls-port="$TLS_PORT" --tls-dir="$DIR/tls" --token-file="$DIR/token" \
  --redis="127.0.0.1:$REDIS_PORT" &
PD_PID=$!
cat >"$DIR/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters: [{name: peloton, cluster: {server: "http://127.0.0.1:$API_PORT"}}]
users: [{name: local, user: {}}]
contexts: [{name: peloton, context: {cluster: peloton, user: local}}]
current-context: peloton
KC
for _ in $(seq 100); do [ -s "$DIR/tls/apiserver.crt" ] && break; sleep 0.05; done
cat >"$DIR/kubeconfig-tls" <<KC
apiVersion: v1
kind: Config
clusters: [{name: peloton, cluster: {server: "https://127.0.0.1:$TLS_PORT", certificate-authority-data: $(base64 -w0 "$DIR/tls/apiserver.crt")}}]
users: [{name: admin, user: {token: $TOKEN}}]
contexts: [{name: peloton, context: {cluster: peloton, user: admin}}]
current-context: peloton
KC
echo
echo "Peloton-C API server: http://127.0.0.1:$API_PORT (local, no auth) and https://127.0.0.1:$TLS_PORT"
echo "(HTTP/2, token), redis on 127.0.0.1:$REDIS_PORT. Try:"
echo "  export KUBECONFIG=$DIR/kubeconfig        # or $DIR/kubeconfig-tls"
echo "  kubectl get namespaces"
echo "  kubectl apply -f examples/pools.yaml && kubectl get rp"
echo "Ctrl-C stops both."
wait "$PD_PID"
