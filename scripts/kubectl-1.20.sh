#!/usr/bin/env bash
# Prints the path of a kubectl 1.20 (Debian bookworm's own, package
# kubernetes-client), for the tests that check what that old client does with
# our API server. The kubectl on PATH when it is 1.20; otherwise the package is
# unpacked into build/kubectl-1.20/ (once; not installed: it conflicts with the
# package "kubectl" of newer releases) and its usr/bin/kubectl is printed.
# Exits non-zero, saying why on stderr, when neither can be had.
set -euo pipefail
cd "$(dirname "$0")/.."

# kubectl's client minor version, or nothing. `version --client -o json`
# answers the same shape in 1.20 and 1.32 (1.20's plain output is Go syntax,
# 1.32's dropped --short).
minor_of() {
  "$1" version --client -o json 2>/dev/null | sed -n 's/^ *"minor": *"\([0-9]*\).*/\1/p' | head -n 1
}

if onpath=$(command -v kubectl 2>/dev/null) && [ "$(minor_of "$onpath")" = 20 ]; then
  echo "$onpath"
  exit 0
fi

DIR=build/kubectl-1.20
BIN=$DIR/usr/bin/kubectl
if [ ! -x "$BIN" ]; then
  mkdir -p "$DIR"
  # apt-get download writes into the current directory; as root its _apt
  # sandbox cannot write there, which it only warns about.
  if ! (cd "$DIR" && apt-get download -qq kubernetes-client >/dev/null 2>&1); then
    apt-get update -qq >/dev/null 2>&1 || true
    (cd "$DIR" && apt-get download -qq kubernetes-client >/dev/null 2>&1) || {
      echo "kubectl-1.20: cannot download Debian's kubernetes-client" >&2
      exit 1
    }
  fi
  deb=$(ls "$DIR"/kubernetes-client_*.deb | head -n 1)
  dpkg -x "$deb" "$DIR"
  rm -f "$deb"
fi
[ "$(minor_of "$BIN")" = 20 ] || { echo "kubectl-1.20: $BIN is not kubectl 1.20" >&2; exit 1; }
echo "$(pwd)/$BIN"
