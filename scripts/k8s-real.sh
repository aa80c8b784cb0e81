#!/usr/bin/env bash
# shellcheck disable=SC2317  # functions run from traps and pl_wait
# A real Kubernetes 1.20 control plane for the extender's tests (issue #17):
# kube-apiserver, kube-scheduler and kubectl built from Debian's own
# `kubernetes` source package, etcd from Debian's etcd-server.
#
#   scripts/k8s-real.sh build         build the binaries into the cache (once)
#   scripts/k8s-real.sh bindir        print the folder holding the binaries
#   scripts/k8s-real.sh up DIR [EXT]  start etcd + kube-apiserver (+ kube-scheduler
#                                     configured with the extender at URL EXT)
#                                     on loopback, state and logs in DIR;
#                                     writes DIR/env (ports, pids, kubeconfig)
#   scripts/k8s-real.sh down DIR      stop what `up DIR` started
#
# The cache is $K8S_REAL_CACHE (default ~/.cache/peloton-k8s), outside the
# repository; binaries are looked for in $K8S_BIN_DIR (default CACHE/bin), so
# binaries built elsewhere can be used with K8S_BIN_DIR=...
#
# Facts this relies on (checked on Debian bookworm, see docs/extender.md):
# - bookworm's source package kubernetes 1.20.5+really1.20.2-1.1+deb12u1 is
#   upstream v1.20.2 (Debian builds only kubernetes-client from it; the server
#   commands are still in the source). Build-Depends: golang-go (1.19 in
#   bookworm), jq, rsync, bash-completion, debhelper.
# - the vendored github.com/modern-go/reflect2 v1.0.1 crashes at run time with
#   Go >= 1.18 (it reads runtime internals that changed); it is replaced with
#   Debian's golang-github-modern-go-reflect2-dev (1.0.2), which handles them.
# - kube-scheduler 1.20 never calls an extender's preempt verb: its framework is
#   built without the extenders (fixed upstream in kubernetes#103030 by passing
#   them with frameworkruntime.WithExtenders). kube-scheduler-preempt is built
#   beside the plain one with that one line added.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

CACHE=${K8S_REAL_CACHE:-$HOME/.cache/peloton-k8s}
BIN=${K8S_BIN_DIR:-$CACHE/bin}
SRCPKG=kubernetes
SRCDIR_GLOB="kubernetes-1.20*"
BINS="kube-apiserver kube-scheduler kube-scheduler-preempt kubectl"

have_bins() {
  local b
  for b in $BINS; do [ -x "$BIN/$b" ] || return 1; done
}

# deb-src for the running suite, in a file of our own (the stock one has
# only `deb` lines).
enable_deb_src() {
  if apt-get source --print-uris -qq "$SRCPKG" >/dev/null 2>&1; then
    return 0
  fi
  local suite
  suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
  cat >/etc/apt/sources.list.d/peloton-k8s-src.sources <<EOF
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $suite
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  apt-get update -qq
}

build() {
  if have_bins; then
    echo "k8s-real: binaries present in $BIN"
    return 0
  fi
  [ "$(id -u)" = 0 ] || pl_die "k8s-real build: needs root for apt-get (or set K8S_BIN_DIR)"
  local t0=$SECONDS
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    golang-go golang-github-modern-go-reflect2-dev etcd-server rsync jq dpkg-dev \
    build-essential >/dev/null
  enable_deb_src
  mkdir -p "$CACHE/src" "$BIN"
  local src
  src=$(find "$CACHE/src" -maxdepth 1 -type d -name "$SRCDIR_GLOB" | head -n 1)
  if [ -z "$src" ]; then
    # as root, apt-get only warns that its _apt sandbox cannot write here
    (cd "$CACHE/src" && apt-get source -qq "$SRCPKG") 2>&1 | { grep -v '^W: Download is performed unsandboxed' || true; }
    src=$(find "$CACHE/src" -maxdepth 1 -type d -name "$SRCDIR_GLOB" | head -n 1)
    [ -n "$src" ] || pl_die "k8s-real build: apt-get source $SRCPKG gave no $SRCDIR_GLOB"
  fi
  echo "k8s-real: building in $src (go: $(go version))"

  local r2=/usr/share/gocode/src/github.com/modern-go/reflect2
  [ -d "$r2" ] || pl_die "k8s-real build: $r2 missing (golang-github-modern-go-reflect2-dev)"
  rm -rf "$src/vendor/github.com/modern-go/reflect2"
  cp -r "$r2" "$src/vendor/github.com/modern-go/reflect2"

  # As debian/rules does it: GOPATH with k8s.io/kubernetes -> the tree, then
  # the upstream Makefile (which generates the missing openapi code first).
  (
    cd "$src"
    export GOPATH="$src/.go" CGO_ENABLED=0 HOME="$CACHE/home"
    mkdir -p .go/src/k8s.io "$HOME"
    [ -L .go/src/k8s.io/kubernetes ] || ln -s ../../.. .go/src/k8s.io/kubernetes
    nice -n 10 make WHAT="cmd/kube-apiserver cmd/kube-scheduler cmd/kubectl"
    cp _output/bin/kube-apiserver _output/bin/kube-scheduler _output/bin/kubectl "$BIN/"

    # kubernetes#103030: give the scheduling framework the extenders so that
    # preemption calls their preempt verb. Built, copied, then undone.
    local f=pkg/scheduler/factory.go
    cp "$f" "$f.orig"
    sed -i 's|^\(\t*\)frameworkruntime.WithPodNominator(nominator),$|&\n\1frameworkruntime.WithExtenders(extenders),|' "$f"
    grep -q 'frameworkruntime.WithExtenders(extenders)' "$f" || {
      mv "$f.orig" "$f"
      pl_die "k8s-real build: could not apply the kubernetes#103030 line to $f"
    }
    nice -n 10 make WHAT=cmd/kube-scheduler || { mv "$f.orig" "$f"; exit 1; }
    cp _output/bin/kube-scheduler "$BIN/kube-scheduler-preempt"
    mv "$f.orig" "$f"
  )
  have_bins || pl_die "k8s-real build: binaries missing in $BIN after the build"
  echo "k8s-real: built $BINS into $BIN in $((SECONDS - t0))s"
  "$BIN/kube-apiserver" --version
}

need_bins() {
  have_bins || pl_die "k8s-real: no binaries in $BIN (run: scripts/k8s-real.sh build, or set K8S_BIN_DIR)"
  command -v etcd >/dev/null || pl_die "k8s-real: etcd is not installed (apt-get install etcd-server)"
}

# The serving certificate: a CA of our own and a certificate for 127.0.0.1
# signed by it (clients get the CA in their kubeconfig).
make_certs() {
  local d=$1
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=peloton-k8s-real-ca \
    -keyout "$d/ca.key" -out "$d/ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj /CN=kube-apiserver \
    -keyout "$d/apiserver.key" -out "$d/apiserver.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$d/san.ext"
  openssl x509 -req -in "$d/apiserver.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
    -days 2 -extfile "$d/san.ext" -out "$d/apiserver.crt" 2>/dev/null
  openssl genrsa -out "$d/sa.key" 2048 2>/dev/null
}

tok() { head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n'; }

# up DIR: etcd and kube-apiserver on loopback, in the foreground until INT
# or TERM (then both are stopped). Writes into DIR: admin.kubeconfig
# (system:masters), scheduler.kubeconfig (system:kube-scheduler),
# extender.kubeconfig (the ServiceAccount peloton-system/peloton-extender,
# which has only what manifests/extender-rbac.yaml grants), env (ports,
# pids) and, last, `ready`.
ETCD_PID="" API_PID="" STOPPING=0
up_cleanup() {
  local rc=$?
  [ "$STOPPING" = 1 ] && return
  STOPPING=1
  trap '' INT TERM PIPE
  pl_stop kube-apiserver "$API_PID"
  pl_stop etcd "$ETCD_PID"
  exit "$rc"
}

up() {
  local d=${1:?usage: up DIR}
  need_bins
  mkdir -p "$d"
  d=$(cd "$d" && pwd)
  rm -f "$d/ready"
  trap up_cleanup EXIT
  pl_stop_on_signals
  make_certs "$d"

  local etcd_port peer_port api_port admin sched ext
  etcd_port=$(pl_free_port) peer_port=$(pl_free_port) api_port=$(pl_free_port)
  admin=$(tok) sched=$(tok) ext=$(tok)
  {
    echo "$admin,admin,uid-admin,\"system:masters\""
    echo "$sched,system:kube-scheduler,uid-scheduler"
    echo "$ext,system:serviceaccount:peloton-system:peloton-extender,uid-extender,\"system:serviceaccounts,system:serviceaccounts:peloton-system\""
  } >"$d/tokens.csv"

  setsid etcd --name k8s-real --data-dir "$d/etcd" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-cluster "k8s-real=http://127.0.0.1:$peer_port" --log-level warn >"$d/etcd.log" 2>&1 &
  ETCD_PID=$!
  pl_wait etcd 30 "$ETCD_PID" "$d/etcd.log" curl -fsS -m 2 "http://127.0.0.1:$etcd_port/health"

  # No controller-manager runs: the ServiceAccount admission plugin would
  # wait for token controllers, TaintNodesByCondition would taint every new
  # node not-ready for a node controller that never clears it.
  setsid "$BIN/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:$etcd_port" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$api_port" --insecure-port=0 \
    --tls-cert-file="$d/apiserver.crt" --tls-private-key-file="$d/apiserver.key" --client-ca-file="$d/ca.crt" \
    --token-auth-file="$d/tokens.csv" --authorization-mode=RBAC \
    --service-account-key-file="$d/sa.key" --service-account-signing-key-file="$d/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-cluster-ip-range=10.96.0.0/24 --endpoint-reconciler-type=none \
    --disable-admission-plugins=ServiceAccount,TaintNodesByCondition \
    --profiling=false --cert-dir="$d/certs" >"$d/kube-apiserver.log" 2>&1 &
  API_PID=$!
  pl_wait kube-apiserver 90 "$API_PID" "$d/kube-apiserver.log" \
    curl -fsS -m 2 --cacert "$d/ca.crt" -H "Authorization: Bearer $admin" "https://127.0.0.1:$api_port/readyz"

  local server="https://127.0.0.1:$api_port"
  pl_write_kubeconfig "$d/admin.kubeconfig" "$server" "$admin" "$d/ca.crt"
  pl_write_kubeconfig "$d/scheduler.kubeconfig" "$server" "$sched" "$d/ca.crt"
  pl_write_kubeconfig "$d/extender.kubeconfig" "$server" "$ext" "$d/ca.crt"
  printf '%s\n' "K8S_SERVER=$server" "K8S_API_PORT=$api_port" "K8S_ETCD_PORT=$etcd_port" \
    "K8S_ETCD_PID=$ETCD_PID" "K8S_APISERVER_PID=$API_PID" "K8S_BIN_DIR=$BIN" \
    "KUBECONFIG=$d/admin.kubeconfig" >"$d/env"
  touch "$d/ready"
  echo "k8s-real: $("$BIN/kube-apiserver" --version) at $server (etcd 127.0.0.1:$etcd_port)"
  echo "k8s-real: export KUBECONFIG=$d/admin.kubeconfig; Ctrl-C stops it"
  # Run until a signal, or until either process dies.
  while kill -0 "$API_PID" 2>/dev/null && kill -0 "$ETCD_PID" 2>/dev/null; do
    sleep 0.5
  done
  echo "error: kube-apiserver or etcd exited; see $d/kube-apiserver.log, $d/etcd.log" >&2
  exit 1
}

# scheduler DIR [EXTENDER_URL [plain|preempt]]: kube-scheduler against the
# API server of `up DIR`, in the foreground (exec: a signal reaches it
# directly). Its configuration is manifests/scheduler-config-v1beta1.yaml
# with the kubeconfig and the extender's URL put in (without EXTENDER_URL,
# the extender entry is left out: kube-scheduler alone). Health and metrics
# on http://127.0.0.1:PORT, PORT written to DIR/scheduler.port first.
# `preempt` runs the build with kubernetes#103030 (calls the preempt verb).
scheduler() {
  local d=${1:?usage: scheduler DIR [EXTENDER_URL [plain|preempt]]} url=${2:-} kind=${3:-plain} exe port
  need_bins
  [ -f "$d/ready" ] || pl_die "k8s-real scheduler: $d has no running API server (scripts/k8s-real.sh up $d)"
  case $kind in
    plain) exe=$BIN/kube-scheduler ;;
    preempt) exe=$BIN/kube-scheduler-preempt ;;
    *) pl_die "k8s-real scheduler: $kind: want plain or preempt" ;;
  esac
  local cfg=$d/scheduler-config.yaml
  if [ -n "$url" ]; then
    sed -e "s|^\(  kubeconfig:\).*|\1 $d/scheduler.kubeconfig|" \
      -e "s|^\(- urlPrefix:\).*|\1 \"$url\"|" manifests/scheduler-config-v1beta1.yaml >"$cfg"
  else
    sed -e "s|^\(  kubeconfig:\).*|\1 $d/scheduler.kubeconfig|" -e '/^extenders:/,$d' \
      manifests/scheduler-config-v1beta1.yaml >"$cfg"
  fi
  # K8S_SCHEDULER_QPS=N: clientConnection qps and burst N (v1beta1's
  # defaults, 50 and 100, limit kube-scheduler's own Bindings; the
  # benchmark bench/bench_k8s_sched.py runs with and without them).
  if [ -n "${K8S_SCHEDULER_QPS:-}" ]; then
    [[ $K8S_SCHEDULER_QPS =~ ^[0-9]+$ ]] || pl_die "k8s-real scheduler: K8S_SCHEDULER_QPS=$K8S_SCHEDULER_QPS: want a number"
    sed -i "s|^  kubeconfig: .*|&\n  qps: $K8S_SCHEDULER_QPS\n  burst: $K8S_SCHEDULER_QPS|" "$cfg"
  fi
  # With --config, kube-scheduler takes its (insecure) health and metrics
  # address from the file, not from --address/--port (0.0.0.0:10251 else).
  port=$(pl_free_port)
  printf '%s\n' 'leaderElection:' '  leaderElect: false' "healthzBindAddress: 127.0.0.1:$port" \
    "metricsBindAddress: 127.0.0.1:$port" >>"$cfg"
  grep -q "$d/scheduler.kubeconfig" "$cfg" || pl_die "k8s-real scheduler: could not set the kubeconfig in $cfg"
  [ -z "$url" ] || grep -q "$url" "$cfg" || pl_die "k8s-real scheduler: could not set urlPrefix in $cfg"
  echo "$port" >"$d/scheduler.port"
  exec "$exe" --config="$cfg" --secure-port=0 --profiling=false --v="${K8S_SCHEDULER_V:-1}"
}

case "${1:-}" in
build) build ;;
bindir) echo "$BIN" ;;
up) up "${2:-}" ;;
scheduler) shift && scheduler "$@" ;;
*)
  echo "usage: $0 build | bindir | up DIR | scheduler DIR [EXTENDER_URL [plain|preempt]]" >&2
  exit 2
  ;;
esac
