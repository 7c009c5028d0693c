#!/usr/bin/env bash
# package-tarball-chroot (issue 52): the release tarball (tools/package-tarball.sh)
# on other Debian releases, with each release's own RDMA programs. For each
# release (default: bullseye = Debian 11, rdma-core 33, glibc 2.31; bookworm =
# Debian 12, rdma-core 44, the build machine's own; trixie = Debian 13,
# rdma-core 56), a minbase root file system with that release's ibverbs-utils,
# perftest and rdmacm-utils (mmdebstrap from Debian's mirror, kept as a tar
# file in the build tree so a later run only unpacks it), then docs/CI.md's
# "tarball-use" block as nobody, in a network namespace of its own: unpack
# the tarball, urnic doctor, ibv_devinfo, ibv_rc_pingpong, rping, ucmatose,
# ib_write_bw, each checked by its output. Prints the time from unpacking to
# the first completed ibv_rc_pingpong.
#
# usage: tarball_chroot_test.sh SOURCE_ROOT BUILD_DIR [RELEASE...]
# URNIC_TARBALL: the tarball to test (default: made with
#   tools/package-tarball.sh --work BUILD_DIR/tarball, its Debian 11 sysroot
#   and build kept there). URNIC_DEBIAN_MIRROR: the mirror.
# Skipped (77) without root, mmdebstrap or the mirror.
set -uo pipefail
root=$1
build=$2
shift 2
releases=("$@")
[[ ${#releases[@]} -gt 0 ]] || releases=(bullseye bookworm trixie)

# shellcheck source=tests/package/chroot_lib.sh
source "$(dirname "$0")/chroot_lib.sh"
chroot_require
cache=$build/tarball
mkdir -p "$cache"
# The mirror is needed only for what is not in the cache yet.
for rel in "${releases[@]}"; do
  [[ -s $cache/rootfs-$rel.tar ]] || mirror_or_skip "$rel" "for the $rel root file system"
done
chroot_tmp tarball-chroot
t0=$SECONDS

tarball=${URNIC_TARBALL:-}
if [[ -z $tarball ]]; then
  if tarball=$("$root/tools/package-tarball.sh" --work "$cache" --out "$tmp/dist" 2> "$tmp/package.err" | tail -1) &&
     [[ -f $tarball ]]; then
    pass "tarball: $(basename "$tarball") ($(du -k "$tarball" | cut -f1) KiB, $((SECONDS - t0)) s)"
  else
    fail "tarball: $(tail -3 "$tmp/package.err" | tr '\n' ' ')"
    finish
    exit 1
  fi
fi

# docs/CI.md's block, as the user runs it.
{
  echo 'set -ex'
  echo 'cd /tmp/user'
  echo 'start=$(date +%s%N)'
  ci_block tarball-use | sed 's|^ibv_rc_pingpong \(.*127\.0\.0\.1\)$|&; echo "unpack to first pingpong: $((($(date +%s%N) - start) / 1000000)) ms"|'
} > "$tmp/use.sh"
[[ $(grep -c 'ibv_rc_pingpong' "$tmp/use.sh") -ge 2 ]] || { fail "docs/CI.md has no \"tarball-use\" block with ibv_rc_pingpong"; exit 1; }
# The CI action (.github/actions/urnic), every step as a runner runs it
# (composite_action_script.py), then a later step of the job that relies on
# what it put into $GITHUB_ENV.
python3 "$root/tests/package/composite_action_script.py" "$root/.github/actions/urnic/action.yml" \
  /tmp/user/runner "tarball=/tmp/user/$(basename "$tarball")" > "$tmp/action.sh" ||
  { fail "the action's steps: $(tail -1 "$tmp/action.sh")"; exit 1; }

for rel in "${releases[@]}"; do
  rootfs=$cache/rootfs-$rel.tar
  t1=$SECONDS
  if [[ ! -s $rootfs ]]; then
    # --format=tar: mmdebstrap picks the format from the name, and "x.tar.part" would be a directory.
    mmdebstrap --variant=minbase --mode=root --quiet --format=tar --include=ibverbs-utils,perftest,rdmacm-utils,iproute2 \
      "$rel" "$rootfs.part" "$mirror" > "$tmp/mmdebstrap-$rel.log" 2>&1 && mv "$rootfs.part" "$rootfs"
  fi
  if [[ ! -s $rootfs ]]; then
    fail "$rel: mmdebstrap: $(grep -iE 'error|^E:' "$tmp/mmdebstrap-$rel.log" | head -3 | tr '\n' ' ')"
    continue
  fi
  dir=$tmp/$rel
  mkdir -p "$dir"
  tar -C "$dir" -xf "$rootfs"
  versions=$(chroot "$dir" dpkg-query -W -f='${Package} ${Version}\n' libc6 libibverbs1 perftest 2>/dev/null | tr '\n' ' ')
  install -d -o nobody -g nogroup "$dir/tmp/user"
  install -m 0644 "$tarball" "$dir/tmp/user/"
  install -m 0644 "$tmp/use.sh" "$tmp/action.sh" "$dir/tmp/"
  # A mount and network namespace of its own: /proc, /sys (of this network
  # namespace) and /dev inside the tree go away with it.
  unshare --mount --net bash -c '
    mount --make-rprivate /
    mount -t proc proc "$1/proc" && mount -t sysfs sysfs "$1/sys" && mount --rbind /dev "$1/dev"
    ip link set lo up
    timeout 300 chroot --userspec=nobody:nogroup "$1" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp/user \
      bash /tmp/use.sh
    echo "use exit $?"
    timeout 120 chroot --userspec=nobody:nogroup "$1" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp/user \
      bash -c "bash /tmp/action.sh && while IFS= read -r l; do export \"\$l\"; done < /tmp/user/runner/env && ibv_devices"
    echo "action exit $?"
    pid=$(cat "$1/tmp/urnic-65534/urnicd.pid" 2>/dev/null)
    [[ -n $pid ]] && kill -TERM "$pid" && for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  ' sh "$dir" > "$tmp/use-$rel.log" 2>&1
  log=$tmp/use-$rel.log
  check_prefix="$rel: "
  echo "--- $rel ($versions; root file system $((SECONDS - t1)) s)"
  check "$log" "urnic doctor" 'urnic doctor: ready'
  check "$log" "ibv_devinfo" 'hca_id:[[:space:]]+urnic0'
  check "$log" "ibv_rc_pingpong" '100 iters in'
  check "$log" "time to the first pingpong" 'unpack to first pingpong: [0-9]+ ms'
  check "$log" "rping (rdma_cm)" 'ping data: rdma-ping-9:'
  check "$log" "ucmatose (rdma_cm)" 'test complete'
  check "$log" "ib_write_bw" '^ 65536 +1000 +'
  check "$log" "the CI action's steps" '^--- all steps passed'
  check "$log" "a later step with the action's environment (ibv_devices)" '^[[:space:]]+urnic0[[:space:]]+[0-9a-f]{16}'
  if grep -q '^use exit 0$' "$log" && grep -q '^action exit 0$' "$log"; then pass "$rel: block and action exit 0"
  else
    fail "$rel: block: $(grep -E '^use exit|error|symbol|not found' "$log" | head -3 | tr '\n' ' ')"
    echo "--- $rel: the block's output (tail)"; tail -40 "$log"
  fi
  rm -rf "$dir"
done
echo "whole test: $((SECONDS - t0)) s"
finish
