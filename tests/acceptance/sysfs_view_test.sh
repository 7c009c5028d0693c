#!/usr/bin/env bash
# Acceptance (issue 9): urnic-sysfs's view of /sys/class/infiniband
# (tools/sysfs/). Inside `urnic-sysfs -- CMD`, for a daemon in a private
# runtime directory,
#   - /sys/class/infiniband/urnic0/ has node_guid, node_type, the port's
#     state, phys_state, link_layer and every valid GID with its type and
#     netdev, all equal to what ibv_devinfo -v says through the drop-in
#     libibverbs (the daemon's answers); device/net/ lists lo (the udp link's
#     interface) and urnic_iw0 is an RNIC;
#   - the rest of /sys/class is the host's (same entries; `ip -j addr show
#     lo` and /sys/class/net work), and the view is read-only;
#   - /dev/infiniband has uverbs0, uverbs1 and rdma_cm as the kernel numbers
#     them, and the rest of /dev is the host's and works;
# and afterwards the host's mount namespace is untouched (same mountinfo,
# no /sys/class/infiniband that was not there before); the same view made
# inside a chroot, where / is not a mount point. As an unprivileged
# user urnic-sysfs refuses with exit 125 and says why. Needs root (exit 77
# otherwise). A few seconds.
#
# usage: sysfs_view_test.sh SHIM_DIR URNICD URNIC_SYSFS
set -uo pipefail
shim_dir=$1
urnicd=$2
sysfs=$3

if (( EUID != 0 )); then
  echo "SKIP: urnic-sysfs needs root (it makes a private mount namespace)"
  exit 77
fi

asan_probe=$shim_dir/libibverbs.so.1
# shellcheck source=tests/acceptance/common.sh
source "$(dirname "$0")/common.sh"
require_tools ibverbs-utils ibv_devinfo
one_host_setup sysfs-view "$urnicd" "$shim_dir"
chmod 755 "$rt"
# The daemon a program run as nobody starts has a directory of its own.
cleanup_daemon_dirs+=("$rt/nobody")

mounts_before=$(sort /proc/self/mountinfo)
ib_before=$(ls -A /sys/class/infiniband 2>&1)
dev_ib_before=$(ls -A /dev/infiniband 2>&1)
class_host=$(ls -A /sys/class | grep -vx -e infiniband -e infiniband_verbs)

devinfo=$("${run_env[@]}" ibv_devinfo -v -d urnic0 2>&1) || { fail "ibv_devinfo -v -d urnic0: $devinfo"; exit 1; }
field() { awk -v k="$1:" '$1 == k { print $2; exit }' <<< "$devinfo"; }

view=$("${run_env[@]}" "inner_sysfs=$sysfs" "$sysfs" -- /bin/sh -c '
  d=/sys/class/infiniband/urnic0
  p=$d/ports/1
  echo "node_guid $(cat $d/node_guid)"
  echo "node_type $(cat $d/node_type)"
  echo "state $(cat $p/state)"
  echo "phys_state $(cat $p/phys_state)"
  echo "link_layer $(cat $p/link_layer)"
  for f in $p/gid_attrs/types/*; do
    n=${f##*/}
    echo "gid $n $(cat $p/gids/$n)|$(cat $f)|$(cat $p/gid_attrs/ndevs/$n 2>/dev/null)"
  done
  echo "net $(ls $d/device/net/)"
  echo "iw_node_type $(cat /sys/class/infiniband/urnic_iw0/node_type)"
  v=/sys/class/infiniband_verbs
  echo "uverbs $(cat $v/abi_version) $(cat $v/uverbs0/ibdev $v/uverbs0/abi_version $v/uverbs0/dev $v/uverbs1/ibdev $v/uverbs1/dev | tr "\n" " ")"
  echo "class $(ls -A /sys/class | grep -vx -e infiniband -e infiniband_verbs | tr "\n" " ")"
  echo "lo_mtu $(cat /sys/class/net/lo/mtu)"
  echo "ip_lo $(ip -j addr show lo | /usr/bin/python3 -c "import json, sys; print(json.load(sys.stdin)[0][\"addr_info\"][0][\"local\"])")"
  if touch $d/new 2>/dev/null; then echo "writable yes"; else echo "writable no"; fi
  echo "ibdev $(stat -c "%n %F %t:%T %a" /dev/infiniband/* | tr "\n" ";")"
  echo "dev $(ls -A /dev | grep -vx infiniband | tr "\n" " ")"
  echo "nested $("$inner_sysfs" -- stat -c "%n %F %t:%T %a" /dev/infiniband/* 2>&1 | tr "\n" ";")"
  echo "devnull $(echo x > /dev/null && head -c 4 /dev/zero | od -An -tx1 | tr -d " ")"
' 2>&1)
rc=$?
if (( rc != 0 )); then
  fail "urnic-sysfs exited $rc: $view"
  exit 1
fi
pass "urnic-sysfs ran a command in the view"
get() { sed -n "s/^$1 //p" <<< "$view" | head -1; }

[[ $(get node_guid) == "$(field node_guid)" ]] && pass "node_guid $(get node_guid) = ibv_devinfo's" \
  || fail "node_guid $(get node_guid), ibv_devinfo says $(field node_guid)"
[[ $(get node_type) == "1: CA" ]] && pass "node_type 1: CA" || fail "node_type '$(get node_type)'"
[[ $(get iw_node_type) == "4: RNIC" ]] && pass "urnic_iw0 node_type 4: RNIC" || fail "urnic_iw0 node_type '$(get iw_node_type)'"
state_num=$(grep -m1 -E '^\s+state:' <<< "$devinfo" | sed 's/.*(\([0-9]*\)).*/\1/')
[[ $(get state) == "$state_num: ACTIVE" ]] && pass "port state $(get state) (ibv_devinfo: $state_num)" \
  || fail "port state '$(get state)', ibv_devinfo $state_num"
phys_num=$(grep -m1 -E '^\s+phys_state:' <<< "$devinfo" | sed 's/.*(\([0-9]*\)).*/\1/')
[[ $(get phys_state) == "$phys_num: LinkUp" ]] && pass "phys_state $(get phys_state)" \
  || fail "phys_state '$(get phys_state)', ibv_devinfo $phys_num"
[[ $(get link_layer) == "$(field link_layer)" ]] && pass "link_layer $(get link_layer)" \
  || fail "link_layer '$(get link_layer)', ibv_devinfo $(field link_layer)"

# Every GID ibv_devinfo lists, with its type, and the netdev lo.
want=$(grep -E 'GID\[ *[0-9]+\]:' <<< "$devinfo" | sed 's/.*GID\[ *\([0-9]*\)\]:[[:space:]]*\([^,]*\), \(.*\)/\1 \2|\3/')
have=$(sed -n 's/^gid //p' <<< "$view" | /usr/bin/python3 -c '
import socket, sys
for line in sys.stdin:
    n, rest = line.rstrip("\n").split(" ", 1)
    gid, typ, ndev = rest.split("|")
    text = socket.inet_ntop(socket.AF_INET6, bytes.fromhex(gid.replace(":", "")))
    print(n + " " + text + "|" + typ + "\t" + ndev)')
ngids=$(grep -c . <<< "$want")
if [[ -n $want ]] && [[ $(cut -f1 <<< "$have") == "$want" ]]; then
  pass "$ngids GIDs with their types equal ibv_devinfo's"
else
  fail "GIDs differ: view [$have], ibv_devinfo [$want]"
fi
if [[ -n $have ]] && [[ $(cut -f2 <<< "$have" | sort -u) == lo ]]; then pass "every GID's netdev is lo"; else fail "GID netdevs: [$have]"; fi
[[ $(get net) == lo ]] && pass "device/net/ lists lo" || fail "device/net/ lists '$(get net)'"

[[ $(get class) == "$(tr '\n' ' ' <<< "$class_host")" ]] && pass "the rest of /sys/class is the host's" \
  || fail "/sys/class in the view: $(get class); on the host: $(tr '\n' ' ' <<< "$class_host")"
[[ $(get lo_mtu) == "$(cat /sys/class/net/lo/mtu)" ]] && pass "/sys/class/net/lo/mtu reads $(get lo_mtu)" \
  || fail "/sys/class/net/lo/mtu reads '$(get lo_mtu)'"
[[ $(get ip_lo) == 127.0.0.1 ]] && pass "ip -j addr show lo: 127.0.0.1" || fail "ip -j addr show lo: '$(get ip_lo)'"
[[ $(get writable) == no ]] && pass "the view is read-only" || fail "a file could be created in the view"

# /sys/class/infiniband_verbs as ib_uverbs shows it: the class's ABI 6,
# and per device its ibdev, provider ABI and the node's numbers.
want_uv="6 urnic0 1 231:192 urnic_iw0 231:193 "
[[ $(get uverbs) == "$want_uv" ]] && pass "/sys/class/infiniband_verbs: abi_version 6, uverbs0 -> urnic0 (231:192), uverbs1 -> urnic_iw0" \
  || fail "/sys/class/infiniband_verbs in the view: '$(get uverbs)', want '$want_uv'"

# /dev/infiniband (tools/sysfs/dev_view.hpp): uverbsN with the kernel's
# numbers (231:192+N, hex in stat) for each device, rdma_cm, mode 0666; the
# rest of /dev is the host's and works.
want_ib="/dev/infiniband/rdma_cm character special file e7:ff 666;/dev/infiniband/uverbs0 character special file e7:c0 666;/dev/infiniband/uverbs1 character special file e7:c1 666;"
[[ $(get ibdev) == "$want_ib" ]] && pass "/dev/infiniband: rdma_cm, uverbs0, uverbs1 (231:192+N, 0666)" \
  || fail "/dev/infiniband in the view: '$(get ibdev)'"
# A view started inside the view (an MPI launcher's agent entering another
# network namespace) makes the same nodes, none mistaken for the kernel's.
[[ $(get nested) == "$want_ib" ]] && pass "a view inside the view: the same /dev/infiniband, made anew" \
  || fail "/dev/infiniband in a nested view: '$(get nested)'"
[[ $(get dev) == "$(ls -A /dev | grep -vx infiniband | tr '\n' ' ')" ]] && pass "the rest of /dev is the host's" \
  || fail "/dev in the view: $(get dev)"
[[ $(get devnull) == 00000000 ]] && pass "/dev/null and /dev/zero work in the view" || fail "/dev/null, /dev/zero: '$(get devnull)'"
[[ $(ls -A /dev/infiniband 2>&1) == "$dev_ib_before" ]] && pass "the host's /dev/infiniband is as before" \
  || fail "the host's /dev/infiniband changed: $(ls -A /dev/infiniband 2>&1)"

[[ $(sort /proc/self/mountinfo) == "$mounts_before" ]] && pass "the host's mounts are unchanged" \
  || fail "the host's mountinfo changed"
[[ $(ls -A /sys/class/infiniband 2>&1) == "$ib_before" ]] && pass "the host's /sys/class/infiniband is as before" \
  || fail "the host's /sys/class/infiniband changed"

# `rdma link show` (iproute2; the kernel answers it over RDMA netlink, for
# its own devices only) answered for urnic's inside the view by
# tools/sysfs/view/rdma, which `urnic sysfs-run` puts first on PATH:
# rdma-core 56's suite finds a GID's netdev so (tests/base.py).
view_path=$(cd "$(dirname "$0")/../../tools/sysfs/view" && pwd)
links=$("${run_env[@]}" PATH="$view_path:$PATH" "$sysfs" -- /bin/sh -c 'rdma link show -j; rdma link show urnic0/1; rdma dev show' 2>&1)
if /usr/bin/python3 -c '
import json, sys
links = json.loads(sys.stdin.readline())
want = {"ifname": "urnic0", "port": 1, "state": "ACTIVE", "physical_state": "LINK_UP", "netdev": "lo"}
sys.exit(0 if any(all(l.get(k) == v for k, v in want.items()) for l in links) else 1)' <<< "$links" &&
   grep -q '^link urnic0/1 state ACTIVE physical_state LINK_UP netdev lo$' <<< "$links" &&
   grep -q '^[0-9]*: urnic0: node_type ca node_guid ' <<< "$links"; then
  pass "rdma link show (-j) and rdma dev show in the view: urnic0/1 ACTIVE LINK_UP, netdev lo"
else
  fail "rdma link show in the view: $(tr '\n' ' ' <<< "$links")"
fi

# In a chroot (docs/CI.md: pyverbs in the tarball's Debian trees runs so), /
# is not a mount point and cannot be made private (EINVAL): the view makes
# the mounts holding /sys/class and /dev private instead. The tree: the
# host's /usr and /etc, the build tree and /tmp (the runtime directory)
# bound in at their own paths, then /sys, /dev and /proc as a chroot recipe
# mounts them, in a mount namespace of its own.
croot=$(mktemp -d /tmp/urnic-sysfs-chroot.XXXXXX)
cleanup_paths+=("$croot")
build_root=$(cd "$(dirname "$sysfs")/.." && pwd)
chrooted=$(unshare --mount /bin/sh -c '
  r=$1 b=$2; shift 2
  for l in bin sbin lib lib64; do [ -L /$l ] && ln -s "$(readlink /$l)" "$r/$l"; done
  for d in /usr /etc /tmp "$b"; do mkdir -p "$r$d" && mount --bind "$d" "$r$d" || exit 1; done
  mkdir -p "$r/sys" "$r/dev" "$r/proc"
  mount -t sysfs sysfs "$r/sys" && mount --rbind /dev "$r/dev" && mount -t proc proc "$r/proc" || exit 1
  exec chroot "$r" "$@"
' sh "$croot" "$build_root" env "${run_env[@]:1}" URNIC_RUNTIME_DIR="$rt" URNIC_DAEMON="$urnicd" LD_LIBRARY_PATH="$shim_dir" \
  "$sysfs" -- /bin/sh -c 'cat /sys/class/infiniband/urnic0/node_type; ls /dev/infiniband | tr "\n" " "' 2>&1)
rc=$?
if (( rc == 0 )) && grep -q '^1: CA$' <<< "$chrooted" && grep -q 'uverbs0' <<< "$chrooted"; then
  pass "in a chroot: the view is made (node_type 1: CA, /dev/infiniband: $(tail -1 <<< "$chrooted"))"
else
  fail "in a chroot: exit $rc: $(tr '\n' ' ' <<< "$chrooted")"
fi
[[ $(sort /proc/self/mountinfo) == "$mounts_before" ]] && pass "the host's mounts are unchanged after the chroot" \
  || fail "the host's mountinfo changed after the chroot"

# Unprivileged: refused, with the reason. The user gets a daemon of its own
# (its own runtime directory), so the verbs queries succeed and the refusal
# is the namespace's.
if command -v setpriv > /dev/null && setpriv --reuid=nobody --regid=nogroup --clear-groups test -x "$urnicd"; then
  mkdir -p "$rt/nobody" && chown nobody "$rt/nobody"
  out=$(setpriv --reuid=nobody --regid=nogroup --clear-groups "${run_env[@]}" URNIC_RUNTIME_DIR="$rt/nobody" \
        "$sysfs" -- /bin/true 2>&1)
  rc=$?
  if (( rc == 125 )) && grep -q 'CAP_SYS_ADMIN' <<< "$out"; then
    pass "unprivileged: exit 125, '$out'"
  else
    fail "unprivileged: exit $rc, '$out'"
  fi
fi

finish
