#!/usr/bin/env bash
# scripts/fresh-root.sh [CMD...]: runs CMD (default `make test`) in the project,
# cloned into a clean Debian bookworm root filesystem made for this run alone,
# so that a step the project's own scripts forget to install fails here as it
# would on a user's new machine. Used by .ci/run; runs as root.
#
# The root is made with mmdebstrap (minbase, plus git, make and ca-certificates:
# what a user needs to clone and type make), the committed HEAD of this
# repository is cloned into /src inside it, and CMD runs there under chroot in
# new mount and PID namespaces: /proc, /sys, /dev, /dev/pts and a private
# /dev/shm are mounted only inside those namespaces, so they can never be seen
# from, or leak into, the host's, and when CMD ends (or times out) the kernel
# kills every process it left and drops every mount. The tree is removed only
# after checking that nothing is mounted inside it, and only on its own file
# system (rm --one-file-system). Nothing is cached between runs.
#
# Environment: FRESH_TIMEOUT seconds for CMD (default 1500); FRESH_KEEP=1 keeps
# the tree (its path is printed); FRESH_MIRROR the Debian mirror
# (http://deb.debian.org/debian; security updates from its -security sibling).
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$(pwd)

[ "$(id -u)" -eq 0 ] || { echo "fresh-root: needs root (mmdebstrap, chroot, mounts)" >&2; exit 1; }
[ $# -gt 0 ] || set -- make test
TIMEOUT=${FRESH_TIMEOUT:-1500}
MIRROR=${FRESH_MIRROR:-http://deb.debian.org/debian}

if ! command -v mmdebstrap >/dev/null 2>&1; then
  echo "fresh-root: installing mmdebstrap" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null
fi

ROOT=$(mktemp -d /var/tmp/peloton-fresh.XXXXXX)

# True when something is still mounted at or below ROOT (in this namespace).
mounted_inside() {
  awk -v r="$ROOT" '$5 == r || index($5, r "/") == 1 { f = 1 } END { exit !f }' /proc/self/mountinfo
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ "${FRESH_KEEP:-0}" = 1 ]; then
    echo "fresh-root: kept $ROOT" >&2
  elif mounted_inside; then
    echo "fresh-root: something is still mounted under $ROOT; not removing it" >&2
    grep -F " $ROOT" /proc/self/mountinfo >&2 || true
    [ "$rc" -ne 0 ] || rc=1
  else
    rm -rf --one-file-system "$ROOT"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

t0=$(date +%s)
echo "fresh-root: making a bookworm root in $ROOT" >&2
mmdebstrap --quiet --variant=minbase --include=git,make,ca-certificates bookworm "$ROOT" \
  "deb $MIRROR bookworm main" "deb $MIRROR bookworm-updates main" \
  "deb ${MIRROR%/debian}/debian-security bookworm-security main"
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
# The certificate authorities this machine adds to Debian's (a network's TLS
# proxy, say) are trusted in the root too, as a user's machine on the same
# network would trust them: npm reaches its registry over TLS.
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  mkdir -p "$ROOT/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$ROOT/usr/local/share/ca-certificates/"
  chroot "$ROOT" update-ca-certificates >/dev/null
fi
git clone --quiet --no-hardlinks "$SRC" "$ROOT/src"
echo "fresh-root: root ready in $(($(date +%s) - t0)) s; running: $*" >&2

# Inside new mount and PID namespaces (mounts private to them): mount, run
# CMD under chroot, unmount. Killing this child (timeout) kills the namespace.
inner() {
  set -eu
  IN_ROOT=$1 # global: the EXIT trap runs after this function has returned
  shift
  [ -d "$IN_ROOT/proc" ] && [ "$IN_ROOT" != / ] || exit 1
  trap 'for m in dev/shm dev/pts dev sys proc; do
          mountpoint -q "$IN_ROOT/$m" && umount "$IN_ROOT/$m"
        done' EXIT
  mount -t proc proc "$IN_ROOT/proc"
  mount -t sysfs sysfs "$IN_ROOT/sys"
  mount --bind /dev "$IN_ROOT/dev"
  mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts "$IN_ROOT/dev/pts"
  mount -t tmpfs -o mode=1777,nosuid,nodev,size=1g shm "$IN_ROOT/dev/shm"
  chroot "$IN_ROOT" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    TERM="${TERM:-dumb}" CI="${CI:-}" /bin/bash -c "cd /src && $(printf '%q ' "$@")"
}
export -f inner
set +e
timeout --kill-after=30 "$TIMEOUT" unshare --mount --propagation private --pid --fork --kill-child \
  bash -c 'inner "$@"' inner "$ROOT" "$@"
rc=$?
set -e
[ "$rc" -eq 124 ] && echo "fresh-root: $* timed out after $TIMEOUT s" >&2
echo "fresh-root: $* exited $rc after $(($(date +%s) - t0)) s in all" >&2
exit "$rc"
