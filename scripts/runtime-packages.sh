#!/usr/bin/env bash
# scripts/runtime-packages.sh BINARY...: the Debian packages that hold the
# shared libraries the binaries load (ldd, then dpkg -S), one a line, sorted.
# The Dockerfile's runtime stage installs exactly these, so the image follows
# what the release binaries link without a list kept by hand. On a merged-/usr
# system a library found under /usr/lib may be registered under /lib (or the
# other way round): both are tried. A library no package owns is an error.
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 BINARY..." >&2; exit 2; }
libs=$(for b in "$@"; do ldd "$b"; done | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | sort -u)
for l in $libs; do
  owner=""
  for p in "$l" "$(readlink -f "$l")"; do
    for q in "$p" "${p#/usr}" "/usr$p"; do
      owner=$(dpkg -S "$q" 2>/dev/null | head -n 1 | cut -d: -f1) && [ -n "$owner" ] && break 2
    done
  done
  [ -n "$owner" ] || { echo "runtime-packages: no package owns $l" >&2; exit 1; }
  echo "$owner"
done | sort -u
