#!/usr/bin/env bash
# scripts/deps.sh [fuzz]: installs the Debian packages the project needs, only
# those missing; with "fuzz", also what `make fuzz` needs (clang's libFuzzer).
# Uses sudo when not root. Safe to run repeatedly; quiet when nothing is missing.
# docs/dependencies.md says why each package is here.
set -euo pipefail

PKGS=(
  build-essential pkg-config
  libuv1-dev libnghttp2-dev libcurl4-openssl-dev libjansson-dev libssl-dev
  libprotobuf-c-dev protobuf-c-compiler libhiredis-dev redis-server libyaml-dev libjemalloc-dev libzstd-dev
  python3-kubernetes curl openssl
  libnghttp2-dev python3-grpcio python3-protobuf protobuf-compiler protobuf-compiler-grpc nghttp2-client prometheus
  chromium
)
[ "${1:-}" = fuzz ] && PKGS+=(clang-14 libclang-rt-14-dev)

# kubectl for the e2e tests: the machine image ships one (package "kubectl");
# Debian's kubernetes-client (kubectl 1.20) conflicts with it, so only when none is on PATH.
command -v kubectl >/dev/null 2>&1 || PKGS+=(kubernetes-client)
# node and npm for the client-node e2e suite (scripts/npm-deps.sh installs the
# client itself): Debian's, unless the machine has its own (NodeSource's nodejs
# bundles npm and conflicts with Debian's npm package).
command -v node >/dev/null 2>&1 || PKGS+=(nodejs)
command -v npm >/dev/null 2>&1 || PKGS+=(npm)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
echo "deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
$SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
