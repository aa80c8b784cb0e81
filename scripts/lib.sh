# shellcheck shell=bash
# Shared by scripts/run.sh and scripts/run-apiserver.sh (source it; bash).
# Everything listens on loopback. Every wait is bounded and fails with a line
# naming what did not come up and where its log is. Children are started in
# their own session (setsid) so that Ctrl-C reaches only the script, which
# then stops them in order with pl_stop.

# A free TCP port on 127.0.0.1.
pl_free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

pl_die() {
  echo "error: $*" >&2
  exit 1
}

# pl_stop_on_signals: Ctrl-C (INT) and TERM are how a user stops a running
# cluster on purpose, so they end the script with status 0 (its EXIT trap
# stops the children); any other way out keeps its own status.
pl_stop_on_signals() {
  trap 'exit 0' INT TERM
}

# pl_wait WHAT SECONDS PID LOG CMD...: runs CMD every 50 ms until it succeeds;
# fails when PID (may be "") exits first or SECONDS pass.
pl_wait() {
  local what=$1 secs=$2 pid=$3 log=$4
  shift 4
  local tries=$((secs * 20)) i
  for ((i = 0; i < tries; i++)); do
    "$@" >/dev/null 2>&1 && return 0
    if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
      echo "error: $what exited while starting; its log ($log) ends with:" >&2
      tail -n 20 "$log" >&2 2>/dev/null || true
      return 1
    fi
    sleep 0.05
  done
  echo "error: $what did not come up in ${secs}s; see $log" >&2
  return 1
}

# pl_sockets_fit DIR: whether DIR is short enough to hold the Unix-domain
# sockets made in it (a socket path holds at most 107 bytes; the names put
# there are short).
pl_sockets_fit() {
  [ "${#1}" -le 96 ]
}

# pl_start_redis DIR: a private redis-server (AOF, no RDB) in DIR, reached
# only through the Unix-domain socket DIR/redis.sock: no TCP port, so no other
# local user can read the store (Secrets included). The directory is made
# 0700 and redis-server runs under umask 077 (its AOF files are 0600). Sets
# PL_REDIS_PID and PL_REDIS_ADDR (unix:///path, what pelotond's --redis takes).
# REDIS_FSYNC is the AOF's fsync policy: "always" (the default: an
# acknowledged write is on disk) or "everysec" (faster; a power loss or a
# kernel crash can lose the last second or two of acknowledged writes, a
# crash of redis-server alone loses nothing). docs/store.md, Durability.
pl_start_redis() {
  local dir=$1 sock=$1/redis.sock
  PL_REDIS_FSYNC=${REDIS_FSYNC:-always}
  case $PL_REDIS_FSYNC in
    always | everysec) ;;
    *) pl_die "REDIS_FSYNC=$PL_REDIS_FSYNC: use always or everysec" ;;
  esac
  pl_sockets_fit "$dir" ||
    pl_die "$dir is too long a path for redis's Unix-domain socket (at most 96 characters)"
  command -v redis-server >/dev/null || pl_die "redis-server is not installed (make deps)"
  chmod 700 "$dir"
  (umask 077 && exec setsid redis-server --port 0 --unixsocket "$sock" --unixsocketperm 700 --save '' \
    --appendonly yes --appendfsync "$PL_REDIS_FSYNC" --dir "$dir" --daemonize no >"$dir/redis.log" 2>&1) &
  PL_REDIS_PID=$!
  PL_REDIS_ADDR=unix://$sock
  pl_wait "redis-server on $sock" 10 "$PL_REDIS_PID" "$dir/redis.log" redis-cli -s "$sock" ping
}

# pl_start_redis_sentinel DIR N: a primary, N replicas and three Sentinels
# (quorum 2), each a redis-server in its own folder under DIR with its own
# log, on free TCP ports of 127.0.0.1 (replication and the Sentinels speak
# TCP: unlike the single private redis, a local user can reach these ports;
# there is no password). AOF fsync as in pl_start_redis. Sets PL_REDIS_PIDS
# (all of them, the Sentinels first, so stopping them in order stops the
# Sentinels before the servers), PL_SENTINELS (host:port,... for pelotond's
# --redis-sentinel), PL_REDIS_PRIMARY (host:port) and PL_REDIS_MASTER_NAME.
pl_start_redis_sentinel() {
  local dir=$1 n=$2 i d port primary_port s conf
  PL_REDIS_FSYNC=${REDIS_FSYNC:-always}
  case $PL_REDIS_FSYNC in
    always | everysec) ;;
    *) pl_die "REDIS_FSYNC=$PL_REDIS_FSYNC: use always or everysec" ;;
  esac
  command -v redis-server >/dev/null || pl_die "redis-server is not installed (make deps)"
  chmod 700 "$dir"
  PL_REDIS_MASTER_NAME=peloton
  local servers=() sentinels=() ports=()
  for ((i = 0; i <= n; i++)); do
    d=$dir/redis-$i
    mkdir -p "$d"
    port=$(pl_free_port)
    local replica=()
    if [ "$i" = 0 ]; then
      primary_port=$port
    else
      # the first replica is the Sentinels' choice (lowest replica-priority)
      replica=(--replicaof 127.0.0.1 "$primary_port" --replica-priority "$((i * 10))")
    fi
    (umask 077 && exec setsid redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly yes \
      --appendfsync "$PL_REDIS_FSYNC" --dir "$d" --daemonize no "${replica[@]}" >"$d/redis.log" 2>&1) &
    servers+=($!)
    ports+=("$port")
    pl_wait "redis-server $i on 127.0.0.1:$port" 10 "$!" "$d/redis.log" redis-cli -p "$port" ping
  done
  for ((i = 1; i <= n; i++)); do
    pl_wait "replica $i in sync" 30 "" "$dir/redis-$i/redis.log" pl_replica_up "${ports[$i]}"
  done
  PL_SENTINELS=""
  for s in 1 2 3; do
    d=$dir/sentinel-$s
    mkdir -p "$d"
    port=$(pl_free_port)
    conf=$d/sentinel.conf
    cat >"$conf" <<SC
port $port
bind 127.0.0.1
dir $d
sentinel monitor $PL_REDIS_MASTER_NAME 127.0.0.1 $primary_port 2
sentinel down-after-milliseconds $PL_REDIS_MASTER_NAME ${SENTINEL_DOWN_MS:-5000}
sentinel failover-timeout $PL_REDIS_MASTER_NAME 30000
sentinel parallel-syncs $PL_REDIS_MASTER_NAME 1
SC
    (umask 077 && exec setsid redis-server "$conf" --sentinel >"$d/sentinel.log" 2>&1) &
    sentinels+=($!)
    pl_wait "sentinel $s on 127.0.0.1:$port" 10 "$!" "$d/sentinel.log" redis-cli -p "$port" ping
    PL_SENTINELS=${PL_SENTINELS:+$PL_SENTINELS,}127.0.0.1:$port
  done
  PL_REDIS_PIDS="${sentinels[*]} ${servers[*]}"
  PL_REDIS_PRIMARY=127.0.0.1:$primary_port
}

# pl_replica_up PORT: the replica on 127.0.0.1:PORT is linked to its primary.
pl_replica_up() {
  redis-cli -p "$1" info replication | grep -q '^master_link_status:up'
}

# pl_redis_reachable HOST:PORT
pl_redis_reachable() {
  redis-cli -h "${1%:*}" -p "${1##*:}" ping 2>/dev/null | grep -q PONG
}

# pl_write_kubeconfig FILE SERVER [TOKEN [CA_FILE]]
pl_write_kubeconfig() {
  local file=$1 server=$2 token=${3:-} ca=${4:-} cluster user
  cluster="server: \"$server\""
  [ -n "$ca" ] && cluster="$cluster, certificate-authority-data: $(base64 -w0 "$ca")"
  user="{}"
  [ -n "$token" ] && user="{token: $token}"
  cat >"$file" <<KC
apiVersion: v1
kind: Config
clusters: [{name: peloton, cluster: {$cluster}}]
users: [{name: local, user: $user}]
contexts: [{name: peloton, context: {cluster: peloton, user: local}}]
current-context: peloton
KC
}

# pl_http_ok URL: the URL answers 200.
pl_http_ok() {
  curl -fsS -m 2 -o /dev/null "$1"
}

# pl_stop NAME PID [SECONDS]: SIGTERM, wait up to SECONDS (10), then SIGKILL;
# reaps the child. Quiet when PID is empty or already gone.
pl_stop() {
  local name=$1 pid=$2 secs=${3:-10} i
  [ -n "$pid" ] || return 0
  if kill -TERM "$pid" 2>/dev/null; then
    for ((i = 0; i < secs * 20; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    if kill -0 "$pid" 2>/dev/null; then
      echo "warning: $name (pid $pid) did not stop in ${secs}s; killing it" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  wait "$pid" 2>/dev/null || true
}
