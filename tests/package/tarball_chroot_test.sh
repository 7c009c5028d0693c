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
# the first completed ibv_rc_pingpong. Where the release's rdma-core is one of
# the issue's pyverbs targets (bookworm: 44, trixie: 56; pyverbs_releases),
# its python3-pyverbs too, and rdma-core's own test suite (the tests/ it
# ships) against the tarball's urnic0, as nobody, inside `urnic sysfs-run`:
# the sysfs view is a private mount namespace with device nodes, so for that
# one run nobody is given CAP_SYS_ADMIN and CAP_MKNOD as ambient capabilities
# (setpriv, run as root inside the tree), which urnic-sysfs and the programs
# under it inherit. Its counts
# are printed; a failure or an error fails the check.
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
# Debian 11's python3-pyverbs (rdma-core 33) is not among the issue's targets.
pyverbs_releases=" bookworm trixie "
packages=ibverbs-utils,perftest,rdmacm-utils,iproute2
# rootfs_of REL: the cached tree of REL (with python3-pyverbs where it runs).
rootfs_of() {
  if [[ $pyverbs_releases == *" $1 "* ]]; then echo "$cache/rootfs-$1-pyverbs.tar"
  else echo "$cache/rootfs-$1.tar"; fi
}

# shellcheck source=tests/package/chroot_lib.sh
source "$(dirname "$0")/chroot_lib.sh"
chroot_require
cache=$build/tarball
mkdir -p "$cache"
# The mirror is needed only for what is not in the cache yet.
for rel in "${releases[@]}"; do
  [[ -s $(rootfs_of "$rel") ]] || mirror_or_skip "$rel" "for the $rel root file system"
done
chroot_tmp tarball-chroot

# check_pyverbs REL LOG: the suite's counts from unittest's summary ("Ran N
# tests", then "OK (skipped=S)" or "FAILED (failures=F, errors=E,
# skipped=S)"); passes with no failure and no error. Prints the doctor's
# lines, the skips by reason and what failed.
check_pyverbs() {
  local rel=$1 log=$2 ran summary failures errors skipped
  ran=$(sed -n 's/^Ran \([0-9]*\) tests\? in .*/\1/p' "$log" | tail -1)
  summary=$(grep -E '^(OK|FAILED)( \(.*\))?$' "$log" | tail -1)
  field() { sed -n "s/.*[( ]$1=\([0-9]*\).*/\1/p" <<< "$summary"; }
  failures=$(field failures) errors=$(field errors) skipped=$(field skipped)
  failures=${failures:-0} errors=${errors:-0} skipped=${skipped:-0}
  check "$log" "urnic doctor as nobody with CAP_SYS_ADMIN and CAP_MKNOD" '^ok +sysfs-run: possible \(CAP_SYS_ADMIN, CAP_MKNOD\)'
  if [[ -z $ran || -z $summary ]]; then
    fail "$rel: pyverbs: the suite did not finish ($(grep -E '^pyverbs exit|Error|error' "$log" | tail -3 | tr '\n' ' '))"
    tail -30 "$log"
    return
  fi
  echo "--- $rel: pyverbs skips by reason"
  grep -o "skipped .*" "$log" | sort | uniq -c | sort -rn
  grep -E '^(FAIL|ERROR): ' "$log"
  local counts="$ran tests, $((ran - failures - errors - skipped)) passed, $failures failed, $errors errors, $skipped skipped"
  if ((failures == 0 && errors == 0)); then pass "$rel: pyverbs: $counts"
  else
    fail "$rel: pyverbs: $counts"
    sed -n '/^=\{20,\}$/,$p' "$log" | head -200
  fi
}
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
# rdma-core's test suite as the release's python3-pyverbs ships it, run the
# way docs/PYVERBS.md runs it on the build machine: copied out of
# /usr/share/doc/rdma-core/tests (gzipped there), with the distribution's
# python3, on urnic0, inside the tarball's `urnic sysfs-run`. No huge pages
# are reserved here (the huge-page tests skip).
cat > "$tmp/pyverbs.sh" <<'PYVERBS'
cd /tmp/user || exit 1
rm -rf pyverbs && mkdir pyverbs && cp -r /usr/share/doc/rdma-core/tests pyverbs/ || exit 1
find pyverbs -name '*.gz' -exec gunzip -f {} +
urnic=$(echo /tmp/user/urnic-*/bin/urnic)
# A daemon of its own, started with the same capabilities: the one the block
# started without them cannot reach this run's memory (urnic doctor's fix).
export URNIC_RUNTIME_DIR=/tmp/user/rt-pyverbs
echo "--- urnic doctor (nobody with CAP_SYS_ADMIN and CAP_MKNOD)"
"$urnic" doctor
cd pyverbs && timeout 900 "$urnic" sysfs-run -- /usr/bin/python3 tests/run_tests.py --dev urnic0 -v
echo "pyverbs exit $?"
kill "$(cat "$URNIC_RUNTIME_DIR/urnicd.pid")"
PYVERBS

# Bad input (issue 52), as nobody after the block (whose daemon, from the
# unpacked tree, still serves /tmp/urnic-65534): the tree copied, moved and
# made read-only, used from there (its own daemon, in a runtime directory of
# its own); that tree as a second urnic on the machine, whose doctor names
# the first one's daemon and whose programs run on it; a daemon left running
# after its tree was removed (an older version replaced), which the doctor
# names as "(deleted)" while programs still run on it. Each step prints a
# line the checks look for; the daemons it started are stopped at its end.
cat > "$tmp/bad.sh" <<'BAD'
cd /tmp/user || exit 1
a=$(echo /tmp/user/urnic-*/bin/urnic); a=${a%/bin/urnic}
pair() {  # pair TAG: an ibv_rc_pingpong pair with the environment as it is
  ibv_rc_pingpong -g 1 -n 20 -p 18515 > /tmp/user/server.log 2>&1 & local s=$!
  sleep 1
  ibv_rc_pingpong -g 1 -n 20 -p 18515 127.0.0.1 2>&1 | grep -q 'iters in' && wait $s && echo "$1: pingpong ok"
}
cp -a "$a" /tmp/user/copy && mv /tmp/user/copy /tmp/user/moved && chmod -R a-w /tmp/user/moved
(
  eval "$(/tmp/user/moved/bin/urnic env)"
  export URNIC_RUNTIME_DIR=/tmp/user/rt-moved
  ibv_devinfo -d urnic0 | grep -q PORT_ACTIVE && echo "moved read-only tree: ibv_devinfo PORT_ACTIVE"
  echo "moved read-only tree: its daemon is $(readlink "/proc/$(cat /tmp/user/rt-moved/urnicd.pid)/exe")"
)
echo "--- two urnics: the moved tree's doctor, with the first one's daemon running"
/tmp/user/moved/bin/urnic doctor
( eval "$(/tmp/user/moved/bin/urnic env)" && pair "two urnics" )
echo "--- a daemon whose tree was removed"
cp -a "$a" /tmp/user/old
( eval "$(/tmp/user/old/bin/urnic env)" && URNIC_RUNTIME_DIR=/tmp/user/rt-stale ibv_devices > /dev/null )
rm -rf /tmp/user/old
URNIC_RUNTIME_DIR=/tmp/user/rt-stale "$a/bin/urnic" doctor
( eval "$("$a/bin/urnic" env)" && export URNIC_RUNTIME_DIR=/tmp/user/rt-stale && pair "stale daemon" )
for d in rt-moved rt-stale; do kill "$(cat /tmp/user/$d/urnicd.pid)"; done
if [[ -x /tmp/newer-rdma-core ]]; then
  echo "--- a program built against a newer rdma-core (IBVERBS_1.99)"
  "$a/bin/urnic" run -- /tmp/newer-rdma-core; echo "urnic run exit $?"
  ( eval "$("$a/bin/urnic" env)" && /tmp/newer-rdma-core; echo "direct exit $?" )
fi
chmod -R u+w /tmp/user/moved
BAD

# A program built against a newer rdma-core than the drop-in libraries know:
# it binds a symbol at IBVERBS_1.99 (linked against a stand-in
# libibverbs.so.1 that has it), built against the tarball's Debian 11
# sysroot so that it loads on every release. Without that sysroot
# (URNIC_TARBALL given), not made, and not checked.
newer=
if [[ -d $cache/sysroot-bullseye/usr/include ]] && command -v clang > /dev/null; then
  mkdir -p "$tmp/newer"
  echo 'int ibv_verb_of_the_future(void) { return 0; }' > "$tmp/newer/stub.c"
  echo 'IBVERBS_1.99 { global: ibv_verb_of_the_future; local: *; };' > "$tmp/newer/stub.map"
  echo 'int ibv_verb_of_the_future(void); int main(void) { return ibv_verb_of_the_future(); }' > "$tmp/newer/prog.c"
  if clang --sysroot="$cache/sysroot-bullseye" -shared -fPIC -Wl,-soname,libibverbs.so.1 \
       -Wl,--version-script="$tmp/newer/stub.map" "$tmp/newer/stub.c" -o "$tmp/newer/libibverbs.so.1" &&
     clang --sysroot="$cache/sysroot-bullseye" "$tmp/newer/prog.c" "$tmp/newer/libibverbs.so.1" -o "$tmp/newer/newer-rdma-core"; then
    newer=$tmp/newer/newer-rdma-core
  else
    fail "could not build the newer-rdma-core program"
  fi
fi

# The CI action (.github/actions/urnic), every step as a runner runs it
# (composite_action_script.py), then a later step of the job that relies on
# what it put into $GITHUB_ENV.
python3 "$root/tests/package/composite_action_script.py" "$root/.github/actions/urnic/action.yml" \
  /tmp/user/runner "tarball=/tmp/user/$(basename "$tarball")" > "$tmp/action.sh" ||
  { fail "the action's steps: $(tail -1 "$tmp/action.sh")"; exit 1; }

for rel in "${releases[@]}"; do
  rootfs=$(rootfs_of "$rel")
  pyverbs=
  [[ $pyverbs_releases == *" $rel "* ]] && pyverbs=1
  t1=$SECONDS
  if [[ ! -s $rootfs ]]; then
    # --format=tar: mmdebstrap picks the format from the name, and "x.tar.part" would be a directory.
    mmdebstrap --variant=minbase --mode=root --quiet --format=tar --include="$packages${pyverbs:+,python3-pyverbs}" \
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
  install -m 0644 "$tmp/use.sh" "$tmp/action.sh" "$tmp/pyverbs.sh" "$tmp/bad.sh" "$dir/tmp/"
  [[ -n $newer ]] && install -m 0755 "$newer" "$dir/tmp/"
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
    timeout 120 chroot --userspec=nobody:nogroup "$1" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp/user \
      bash /tmp/bad.sh > "$1/tmp/bad.log" 2>&1
    # A program with a capability that the daemon of the block lacks (which
    # keeps that daemon from its memory): told so when it connects.
    timeout 60 chroot "$1" setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=+sys_admin --ambient-caps=+sys_admin \
      env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp/user bash -c '"'"'eval "$(/tmp/user/urnic-*/bin/urnic env)" && ibv_devices'"'"' \
      >> "$1/tmp/bad.log" 2>&1
    # sysfs-run makes a private mount namespace and the nodes in /dev/infiniband:
    # CAP_SYS_ADMIN and CAP_MKNOD, given to nobody for this run only
    # (ambient: kept across exec by urnic-sysfs, the suite and the daemon it
    # starts).
    [[ -n $2 ]] && timeout 1200 chroot "$1" setpriv --reuid=65534 --regid=65534 --clear-groups \
      --inh-caps=+sys_admin,+mknod --ambient-caps=+sys_admin,+mknod \
      env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp/user bash /tmp/pyverbs.sh > "$1/tmp/pyverbs.log" 2>&1
    pid=$(cat "$1/tmp/urnic-65534/urnicd.pid" 2>/dev/null)
    [[ -n $pid ]] && kill -TERM "$pid" && for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  ' sh "$dir" "$pyverbs" > "$tmp/use-$rel.log" 2>&1
  log=$tmp/use-$rel.log
  check_prefix="$rel: "
  echo "--- $rel ($versions; root file system $((SECONDS - t1)) s)"
  echo "--- $rel: urnic doctor as nobody"
  awk '/^(ok|warn|FAIL|info) / || /^      fix:/ {print} /urnic doctor: / {exit}' "$log"
  check "$log" "urnic doctor" 'urnic doctor: ready'
  # What needs a capability, each with its fix (nobody has none here).
  check "$log" "urnic doctor: sysfs-run needs CAP_SYS_ADMIN, and says how" 'fix: sudo -E /tmp/user/urnic-[^ ]*/bin/urnic sysfs-run -- PROG'
  check "$log" "urnic doctor: afpacket needs CAP_NET_RAW, and says how" 'fix: sudo setcap cap_net_raw\+ep /tmp/user/urnic-[^ ]*/sbin/urnicd'
  check "$log" "urnic doctor: the tarball has no dpdk link, and says so" 'link dpdk: not in this urnicd'
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
  bad=$dir/tmp/bad.log
  check "$bad" "the tree moved and read-only: ibv_devinfo" '^moved read-only tree: ibv_devinfo PORT_ACTIVE'
  check "$bad" "... its own daemon" '^moved read-only tree: its daemon is /tmp/user/moved/sbin/urnicd$'
  check "$bad" "two urnics: the second's doctor names the first's daemon" \
    '^warn +the running daemon \(pid [0-9]+\) is /tmp/user/urnic-[^ ]*/sbin/urnicd, not this urnic.s /tmp/user/moved/sbin/urnicd'
  check "$bad" "two urnics: the second's programs run on it" '^two urnics: pingpong ok'
  check "$bad" "a daemon whose tree was removed: the doctor says so" \
    '^warn +the running daemon \(pid [0-9]+\) is /tmp/user/old/sbin/urnicd \(deleted\), not this'
  check "$bad" "... and programs run on it" '^stale daemon: pingpong ok'
  check "$bad" "a program with a capability the daemon lacks is told so" \
    '^urnic: this program has capabilities \(CapPrm [0-9a-f]+\) that urnicd \(pid [0-9]+\) lacks'
  if [[ -n $newer ]]; then
    check "$bad" "a program built against a newer rdma-core: urnic run refuses it, and says why" \
      "^urnic: /tmp/newer-rdma-core needs IBVERBS_1.99, which urnic's drop-in libibverbs.so.1/librdmacm.so.1 lack: it was built against a newer rdma-core"
    check "$bad" "... exit 127" '^urnic run exit 127$'
    check "$bad" "... run directly, the loader refuses it" "version .IBVERBS_1.99' not found"
  fi
  if [[ -n $pyverbs ]]; then
    cp "$dir/tmp/pyverbs.log" "$cache/pyverbs-$rel.log"  # the whole run, kept until the next
    check_pyverbs "$rel" "$cache/pyverbs-$rel.log"
  fi
  rm -rf "$dir"
done
echo "whole test: $((SECONDS - t0)) s"
finish
