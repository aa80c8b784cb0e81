#!/usr/bin/env bash
# scripts/npm-deps.sh [DIR]: installs the JavaScript packages the e2e suite
# test/e2e/test_client_node.py needs (test/e2e/node/package.json, pinned by its
# package-lock.json) into DIR (default build/node), with `npm ci`. Quiet and
# quick when DIR already holds what the lock file names. node and npm come from
# scripts/deps.sh (Debian's nodejs and npm). Bounded: npm gives up after
# NPM_DEPS_TIMEOUT seconds (default 300). Exits 1 with a one-line reason when
# the registry cannot be reached, so that an offline run says why.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build/node}
src=test/e2e/node
stamp="$dir/.installed-lock"

command -v npm >/dev/null 2>&1 || { echo "npm-deps: npm is not installed (scripts/deps.sh installs it)" >&2; exit 1; }
if [ -f "$stamp" ] && cmp -s "$stamp" "$src/package-lock.json" && [ -d "$dir/node_modules/@kubernetes/client-node" ]; then
  exit 0
fi
mkdir -p "$dir"
cp "$src/package.json" "$src/package-lock.json" "$dir/"
rm -f "$stamp"
log="$dir/npm-ci.log"
# npm is Node, which trusts its own list of authorities: the system's bundle
# too (with what the machine adds to it, e.g. a TLS proxy's), unless the
# caller said otherwise
if [ -z "${NODE_EXTRA_CA_CERTS:-}" ] && [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  export NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt
fi
secs=${NPM_DEPS_TIMEOUT:-300}
if ! timeout "$secs" npm ci --prefix "$dir" --no-audit --no-fund --ignore-scripts \
      --fetch-retries=1 --fetch-timeout=60000 >"$log" 2>&1; then
  reg=$(npm config get registry 2>/dev/null || echo "the npm registry")
  echo "npm-deps: could not install $src/package-lock.json into $dir within ${secs} s" \
       "(is $reg reachable? see $log)" >&2
  exit 1
fi
cp "$src/package-lock.json" "$stamp"
