#!/usr/bin/env bash
# shellcheck disable=SC2317  # functions run from traps and pl_wait
# Starts a private redis-server and pelotond (the apiserver role) on loopback,
# writes a kubeconfig, prints how to use it, and stops both on Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
DIR=$(mktemp -d /tmp/peloton-run.XXXXXX)
API_PORT=${API_PORT:-6080}
TLS_PORT=${TLS_PORT:-6443}
TOKEN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
RD_PID="" PD_PID="" STOPPING=0

cleanup() {
  local rc=$?
  [ "$STOPPING" = 1 ] && return
  STOPPING=1
  trap '' INT TERM PIPE # a reader of our output may be gone (Ctrl-C)
  pl_stop pelotond "$PD_PID"
  pl_stop redis-server "$RD_PID"
  rm -rf "$DIR"
  exit "$rc"
}
trap cleanup EXIT
pl_stop_on_signals

pl_start_redis "$DIR"
RD_PID=$PL_REDIS_PID

echo "$TOKEN" >"$DIR/token"
setsid bin/pelotond --roles=apiserver --port="$API_PORT" --tls-port="$TLS_PORT" --tls-dir="$DIR/tls" \
  --token-file="$DIR/token" --redis="$PL_REDIS_ADDR" &
PD_PID=$!
pl_wait "pelotond's TLS certificate" 10 "$PD_PID" "the terminal" test -s "$DIR/tls/apiserver.crt"
pl_write_kubeconfig "$DIR/kubeconfig" "https://127.0.0.1:$TLS_PORT" "$TOKEN" "$DIR/tls/apiserver.crt"
pl_wait "pelotond at http://127.0.0.1:$API_PORT" 10 "$PD_PID" "the terminal" \
  pl_http_ok "http://127.0.0.1:$API_PORT/healthz"
echo
echo "Peloton-C API server: https://127.0.0.1:$TLS_PORT (HTTP/2) and http://127.0.0.1:$API_PORT, both with"
echo "the token in $DIR/token (kubectl sends tokens over TLS only), redis on $PL_REDIS_ADDR"
echo "(AOF fsync $PL_REDIS_FSYNC). Try:"
echo "  export KUBECONFIG=$DIR/kubeconfig"
echo "  kubectl get namespaces"
echo "  kubectl apply -f examples/pools.yaml && kubectl get rp"
echo "Web UI: http://127.0.0.1:$API_PORT/ui/ (it asks for the token; docs/ui.md)"
echo "Ctrl-C stops both."
set +e
wait "$PD_PID"
rc=$?
echo "pelotond exited (status $rc)" >&2
exit "$rc"
