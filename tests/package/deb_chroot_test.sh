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

# shellcheck source=tests/package/chroot_lib.sh
source "$(dirname "$0")/chroot_lib.sh"
chroot_require
prefix=$(meson introspect "$build" --buildoptions |
         python3 -c 'import json,sys; print({o["name"]: o["value"] for o in json.load(sys.stdin)}["prefix"])')
[[ $prefix == /usr ]] || skip "the build's prefix is $prefix; the package needs /usr (meson configure $build -Dprefix=/usr)"
if ldd "$build/verbs_shim/libibverbs.so.1" | grep -q 'libasan\|libclang_rt'; then
  skip "a sanitizer build is not packaged"
fi
mirror_or_skip bookworm

chroot_tmp deb-chroot
chroot_dir=$tmp/root
t0=$SECONDS

# The package.
if deb=$("$root/tools/package-deb.sh" --build "$build" --out "$tmp/deb" 2> "$tmp/package.err" | tail -1) && [[ -f $deb ]]; then
  pass "package: $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB, $((SECONDS - t0)) s)"
else
  fail "package: $(tail -3 "$tmp/package.err" | tr '\n' ' ')"
  finish
  exit 1
fi

# The recipe's two blocks, as docs/CI.md has them.
mkdir -p "$tmp/recipe"
{
  echo 'set -ex'
  echo 'sudo() { "$@"; }  # root already'
  # apt as on an installed Debian 12, which installs Recommends (mmdebstrap
  # turns them off in its trees)
  echo "echo 'APT::Install-Recommends \"true\";' > /etc/apt/apt.conf.d/99zz-urnic-test"
  echo 'apt-config dump | grep -i "Install-Recommends"'
  echo 'cd /tmp/urnic-deb'
  ci_block install
} > "$tmp/recipe/install.sh"
{
  echo 'set -ex'
  echo 'cd /tmp'
  ci_block use
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
check "$use_log" "urnic doctor (as nobody)" '^urnic doctor: ready'
check "$use_log" "urnic run -- ibv_devinfo" 'hca_id:[[:space:]]+urnic0'
check "$use_log" "ibv_rc_pingpong after eval \"\$(urnic env)\"" '^[0-9]+ bytes in .* = .*Mbit/sec|100 iters in'
check "$use_log" "rping (rdma_cm)" 'ping data: rdma-ping-9:'
check "$use_log" "ib_write_bw" '^ 65536 +1000 +'
if grep -q '^use exit 0$' "$use_log" 2>/dev/null; then pass "use block: exit 0"
else fail "use block: $(grep -E '^use exit|error|Couldn' "$use_log" 2>/dev/null | head -3 | tr '\n' ' ')"; fi
echo "chroot (mmdebstrap, install, recipe): ${elapsed} s; whole test: $((SECONDS - t0)) s"
if ((fails > 0)); then
  echo "--- install log (tail)"; tail -15 "$install_log" 2>/dev/null
  echo "--- use log (tail)"; tail -40 "$use_log" 2>/dev/null
  echo "--- mmdebstrap log (tail)"; tail -15 "$tmp/mmdebstrap.log"
fi
finish
