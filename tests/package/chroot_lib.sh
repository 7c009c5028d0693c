# shellcheck shell=bash disable=SC2154  # root: the sourcing script's
# tests/package/chroot_lib.sh: what the two package tests share
# (deb_chroot_test.sh, tarball_chroot_test.sh; dockerfile_test.sh its checks
# and skips): docs/CI.md's recipe run in a
# Debian root file system made with mmdebstrap, as nobody, in namespaces of
# its own. Set `root` (the source tree) first; `mirror` is Debian's mirror,
# URNIC_DEBIAN_MIRROR or deb.debian.org. Then:
#   pass MSG / fail MSG / skip MSG / finish
#                          count a check / exit 77 / the verdict
#   chroot_require         skip without root or mmdebstrap
#   mirror_or_skip RELEASE skip unless $mirror serves RELEASE
#   chroot_tmp NAME        a temporary directory, `tmp`, undone at exit:
#                          every process whose root is below it killed (by
#                          PID), whatever is mounted below it unmounted
#   ci_block NAME          prints docs/CI.md's sh block marked <!-- NAME: -->
#   check LOG NAME REGEX   passes if a line of LOG matches REGEX (check_prefix
#                          before NAME)

mirror=${URNIC_DEBIAN_MIRROR:-http://deb.debian.org/debian}
checks=0 fails=0
pass() { checks=$((checks + 1)); printf 'ok   %s\n' "$*"; }
fail() { checks=$((checks + 1)); fails=$((fails + 1)); printf 'FAIL %s\n' "$*"; }
skip() { printf 'SKIP: %s\n' "$*"; exit 77; }
finish() {
  printf '%d checks, %d failed\n' "$checks" "$fails"
  ((fails == 0))
}

chroot_require() {
  [[ $(id -u) == 0 ]] || skip "needs root (chroot, network namespace)"
  command -v mmdebstrap > /dev/null || skip "needs mmdebstrap (apt-get install mmdebstrap)"
}
mirror_or_skip() {
  python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=15)' \
    "$mirror/dists/$1/InRelease" 2>/dev/null || skip "cannot reach $mirror${2:+ ($2)}"
}

chroot_tmp() {
  tmp=$(mktemp -d "/tmp/urnic-$1.XXXXXX")
  trap chroot_cleanup EXIT
}
chroot_cleanup() {
  # Anything still running in a tree (a server a failed client left), by
  # PID; then whatever is still mounted below; then the trees.
  local p
  for p in /proc/[0-9]*; do
    [[ $(readlink "$p/root" 2>/dev/null) == "$tmp"/* ]] && kill -KILL "${p#/proc/}" 2>/dev/null
  done
  findmnt -rn -o TARGET | grep "^$tmp/" | sort -r | while read -r m; do umount -l "$m"; done
  rm -rf "$tmp"
}

ci_block() {
  awk -v mark="<!-- $1:" '
    index($0, mark) == 1 { found = 1; next }
    found && /^```sh/ { inside = 1; next }
    inside && /^```/ { exit }
    inside { print }' "$root/docs/CI.md"
}

check() {
  local log=$1 name=${check_prefix:-}$2 re=$3
  if grep -qE "$re" "$log" 2>/dev/null; then pass "$name: $(grep -E "$re" "$log" | head -1 | tr -s ' \t' ' ' | cut -c1-110)"
  else fail "$name: no line matching /$re/"; fi
}
