#!/usr/bin/env bash
# package-deb-chroot (issue 22): docs/CI.md's recipe, run as written in a clean
# Debian 12. Builds urnic_<version>_<arch>.deb from BUILD_DIR
# (tools/package-deb.sh; the build's prefix must be /usr), makes a minimal
# bookworm with mmdebstrap (--variant=minbase, Debian's mirror, a temporary
# directory), runs the recipe's install block there as root (chroot) and its
# use block as nobody, in a network namespace of its own (no clash with
# daemons on the host's 127.0.0.1), and checks what each program printed:
# urnic doctor, ibv_devinfo, ibv_rc_pingpong, rping (rdma_cm), ib_write_bw.
# Every process left in the chroot is stopped by its PID and the tree removed.
# Skipped (77) without root, mmdebstrap, the mirror, or a /usr prefix.
#
# usage: deb_chroot_test.sh SOURCE_ROOT BUILD_DIR
# URNIC_DEBIAN_MIRROR: the mirror (default http://deb.debian.org/debian).
set -uo pipefail
root=$1
build=$2
mirror=${URNIC_DEBIAN_MIRROR:-http://deb.debian.org/debian}

checks=0 fails=0
pass() { checks=$((checks + 1)); printf 'ok   %s\n' "$*"; }
fail() { checks=$((checks + 1)); fails=$((fails + 1)); printf 'FAIL %s\n' "$*"; }
skip() { printf 'SKIP: %s\n' "$*"; exit 77; }

[[ $(id -u) == 0 ]] || skip "needs root (chroot, network namespace)"
command -v mmdebstrap > /dev/null || skip "needs mmdebstrap (apt-get install mmdebstrap)"
prefix=$(meson introspect "$build" --buildoptions |
         python3 -c 'import json,sys; print({o["name"]: o["value"] for o in json.load(sys.stdin)}["prefix"])')
[[ $prefix == /usr ]] || skip "the build's prefix is $prefix; the package needs /usr (meson configure $build -Dprefix=/usr)"
if ldd "$build/verbs_shim/libibverbs.so.1" | grep -q 'libasan\|libclang_rt'; then
  skip "a sanitizer build is not packaged"
fi
python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=15)' \
  "$mirror/dists/bookworm/InRelease" 2>/dev/null || skip "cannot reach $mirror"

tmp=$(mktemp -d /tmp/urnic-deb-chroot.XXXXXX)
chroot_dir=$tmp/root
cleanup() {
  # Anything still running in the tree (a server a failed client left),
  # by PID; then whatever is still mounted below it; then the tree.
  local p
  for p in /proc/[0-9]*; do
    [[ $(readlink "$p/root" 2>/dev/null) == "$chroot_dir"* ]] && kill -KILL "${p#/proc/}" 2>/dev/null
  done
  findmnt -rn -o TARGET | grep "^$tmp/" | sort -r | while read -r m; do umount -l "$m"; done
  rm -rf "$tmp"
}
trap cleanup EXIT
t0=$SECONDS

# The package.
if deb=$("$root/tools/package-deb.sh" --build "$build" --out "$tmp/deb" 2> "$tmp/package.err" | tail -1) && [[ -f $deb ]]; then
  pass "package: $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB, $((SECONDS - t0)) s)"
else
  fail "package: $(tail -3 "$tmp/package.err" | tr '\n' ' ')"
  printf '%d checks, %d failed\n' "$checks" "$fails"
  exit 1
fi

# The recipe's two blocks, as docs/CI.md has them.
block() {
  awk -v mark="<!-- $1:" '
    index($0, mark) == 1 { found = 1; next }
    found && /^```sh/ { inside = 1; next }
    inside && /^```/ { exit }
    inside { print }' "$root/docs/CI.md"
}
mkdir -p "$tmp/recipe"
{
  echo 'set -ex'
  echo 'sudo() { "$@"; }  # root already'
  # apt as on an installed Debian 12, which installs Recommends (mmdebstrap
  # turns them off in its trees)
  echo "echo 'APT::Install-Recommends \"true\";' > /etc/apt/apt.conf.d/99zz-urnic-test"
  echo 'apt-config dump | grep -i "Install-Recommends"'
  echo 'cd /tmp/urnic-deb'
  block install
} > "$tmp/recipe/install.sh"
{
  echo 'set -ex'
  echo 'cd /tmp'
  block use
} > "$tmp/recipe/use.sh"
for b in install use; do
  [[ $(grep -cv '^\(set -ex\|cd \|sudo()\|#\|echo \|apt-config \)' "$tmp/recipe/$b.sh") -gt 0 ]] || { fail "docs/CI.md has no \"$b\" block"; exit 1; }
done
# Run in the chroot (mmdebstrap's customize hook, with /proc, /dev, /sys
# mounted): install as root, use as nobody with a clean environment, in a
# network namespace with only lo; then stop the daemon the programs started.
cat > "$tmp/recipe/hook.sh" <<'HOOK'
set -u
dir=$1
chroot "$dir" bash /tmp/recipe/install.sh > "$dir/tmp/install.log" 2>&1
echo "install exit $?" >> "$dir/tmp/install.log"
unshare --net bash -c '
  ip link set lo up
  timeout 300 chroot --userspec=nobody:nogroup "$1" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp \
    bash /tmp/recipe/use.sh
  echo "use exit $?"
  pid=$(cat "$1/tmp/urnic-65534/urnicd.pid" 2>/dev/null)
  [[ -n $pid ]] && kill -TERM "$pid" && for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
' sh "$dir" > "$dir/tmp/use.log" 2>&1
cp "$dir/tmp/install.log" "$dir/tmp/use.log" "$(dirname "$dir")/"
HOOK
mkdir -p "$tmp/deb-in"
t1=$SECONDS
mmdebstrap --variant=minbase --mode=root --quiet \
  --customize-hook='mkdir -p "$1/tmp/urnic-deb" "$1/tmp/recipe"' \
  --customize-hook="copy-in $deb /tmp/urnic-deb" \
  --customize-hook="copy-in $tmp/recipe/install.sh $tmp/recipe/use.sh /tmp/recipe" \
  --customize-hook="bash $tmp/recipe/hook.sh \"\$1\"" \
  bookworm "$chroot_dir" "$mirror" > "$tmp/mmdebstrap.log" 2>&1
mmrc=$?
elapsed=$((SECONDS - t1))
if [[ $mmrc -ne 0 ]]; then
  fail "mmdebstrap bookworm (exit $mmrc): $(grep -iE 'error|^E:' "$tmp/mmdebstrap.log" | head -3 | tr '\n' ' ')"
fi

install_log=$tmp/install.log use_log=$tmp/use.log
if grep -q '^install exit 0$' "$install_log" 2>/dev/null; then
  pass "install block (apt-get install ./$(basename "$deb")) in a minbase bookworm: $(grep -cE '^(Setting up|Unpacking) ' "$install_log") apt lines, $(grep -oE '[0-9]+ newly installed' "$install_log")"
else
  fail "install block: $(grep -E '^E:|exit' "$install_log" 2>/dev/null | head -3 | tr '\n' ' ')"
fi
check() {  # check NAME REGEX: a line of the use block's output matches
  if grep -qE "$2" "$use_log" 2>/dev/null; then pass "$1: $(grep -E "$2" "$use_log" | head -1 | tr -s ' \t' ' ' | cut -c1-120)"
  else fail "$1: no line matching /$2/"; fi
}
check "urnic doctor (as nobody)" '^urnic doctor: ready'
check "urnic run -- ibv_devinfo" 'hca_id:[[:space:]]+urnic0'
check "ibv_rc_pingpong after eval \"\$(urnic env)\"" '^[0-9]+ bytes in .* = .*Mbit/sec|100 iters in'
check "rping (rdma_cm)" 'ping data: rdma-ping-9:'
check "ib_write_bw" '^ 65536 +1000 +'
if grep -q '^use exit 0$' "$use_log" 2>/dev/null; then pass "use block: exit 0"
else fail "use block: $(grep -E '^use exit|error|Couldn' "$use_log" 2>/dev/null | head -3 | tr '\n' ' ')"; fi
echo "chroot (mmdebstrap, install, recipe): ${elapsed} s; whole test: $((SECONDS - t0)) s"
if ((fails > 0)); then
  echo "--- install log (tail)"; tail -15 "$install_log" 2>/dev/null
  echo "--- use log (tail)"; tail -40 "$use_log" 2>/dev/null
  echo "--- mmdebstrap log (tail)"; tail -15 "$tmp/mmdebstrap.log"
fi
printf '%d checks, %d failed\n' "$checks" "$fails"
((fails == 0))
