#!/usr/bin/env bash
# Acceptance (issue 5), two hosts on one machine over the afpacket link (raw
# Ethernet, AF_PACKET rings): two network namespaces joined by a veth pair
# (MTU 9000), one urnicd per namespace on its veth, unmodified ibverbs-utils
# and perftest, server in one namespace and client in the other, over each
# kind of GID the raw link's table has: RoCE v2 over IPv4, RoCE v2 over IPv6
# (a ULA address on the veths) and RoCE v1 (the link-local GID) at path MTU
# 4096, then RoCE v2 IPv4 at 1024 (the device's port MTU, so the daemons
# restart between the two). The GID table itself is checked (v1/v2 pairs per
# address, ibv_devinfo's GID types), and a capture on one side must decode with
# `urnic frame decode`, every ICRC ok, with RoCE v1 and v2 frames in it.
# Needs root (network namespaces, AF_PACKET); exits 77 (skipped) with the
# reason otherwise. About 2-3 minutes on a loaded 2-core machine. Removes the
# namespaces (and with them the veths) and stops every process it started,
# by PID.
#
# With LINK = dpdk the same runs over the dpdk link (a net_af_packet vdev on
# each veth, --no-huge): the daemons have addresses of their own (.11/.12,
# answered by their own ARP; the kernel's .1/.2 carry perftest's TCP
# exchange), and ULA addresses of their own (${net6}11/12, configured as
# "ipv6", answered and resolved by their own IPv6 neighbour discovery) give
# the RoCE v2 IPv6 GID. Skipped (77) when urnicd was built without DPDK.
#
# With LINK = memif the RoCE frames go over a net_memif shared-memory link
# between the two daemons instead (a is the memif server, b the client; the
# socket is a file in the test's private directory, so it is reachable from
# both namespaces); the veths carry only perftest's TCP exchange. Path MTU
# 4096 puts ~4.2 KB frames through memif rings (one ring buffer each, see
# engine/link/dpdk_link.cpp). --no-huge, as with dpdk.
#
# With LINK = afxdp the dpdk link drives a net_af_xdp vdev (an AF_XDP socket
# and an XDP program on a second veth pair, MTU 3500: XDP on veth needs a
# frame within a page, and the PMD drops frames of 3400 bytes and more, so
# path MTU 2048); with LINK = tap a net_tap vdev, whose tap interface the
# test puts into a bridge in the daemon's namespace with one end of the
# second veth pair (frames of at most 1522 bytes: path MTU 1024). Both
# PMDs take the interface from the kernel (af_xdp steers every frame of the
# queue to its socket), so perftest's TCP exchange has the first veth pair
# to itself. Each runs the matrix once, at the largest path MTU its PMD
# carries, after checking that a larger one is refused at start-up.
# Skipped (77) without the PMD or the kernel's AF_XDP sockets / tun.
#
# With LINK = xdp the daemons use urnic's own AF_XDP link (engine/link/
# xdp_link) on the one veth pair that also carries perftest's TCP exchange
# (its XDP program takes only RoCE frames; ARP, neighbour discovery and TCP
# stay the kernel's), at MTU 3500 so that the veths run native XDP, path
# MTU 2048 (a frame is one 4 KiB UMEM chunk) after checking that 4096 is
# refused; copy mode (veth has no zero-copy) is logged and counted. It also
# runs the pingpongs and ib_write_bw under `urnic fault --loss` on the link.
# Skipped (77) when urnicd was built without libxdp or the kernel has no
# AF_XDP sockets.
#
# usage: afpacket_test.sh SHIM_DIR URNICD URNIC_CLI [afpacket|xdp|dpdk|memif|afxdp|tap] [RDMACM_SHIM_DIR]
set -uo pipefail
shim_dir=$1
urnicd=$2
cli=$3
link=${4:-afpacket}
rdmacm_dir=${5:-$shim_dir}
# shellcheck source=cm_client.sh
source "$(dirname "$0")/cm_client.sh"
# memif is a dpdk link with another port: the same GIDs, ARP and addresses.
dpdk_like=false
[[ $link == dpdk || $link == memif || $link == afxdp || $link == tap ]] && dpdk_like=true
# (Not `ldd | grep -q` under pipefail: grep exiting at the first match can
# fail ldd with SIGPIPE, which skipped the test now and then.)
if $dpdk_like && ! grep -q librte_eal <<< "$(ldd "$urnicd")"; then
  echo "SKIP: urnicd was built without DPDK"
  exit 77
fi

if [[ $link == xdp ]] && ! grep -q libxdp <<< "$(ldd "$urnicd")"; then
  echo "SKIP: urnicd was built without libxdp (the xdp link)"
  exit 77
fi

# shellcheck source=two_hosts.sh
source "$(dirname "$0")/two_hosts.sh"
two_hosts_env "$shim_dir" "$rdmacm_dir"
# The PMD as a shared object in DPDK's PMD directory (Debian: librte-net-*).
have_pmd() { compgen -G "/usr/lib/*/dpdk/pmds-*/librte_net_$1.so*" > /dev/null; }
if [[ $link == afxdp || $link == xdp ]]; then
  [[ $link == xdp ]] || have_pmd af_xdp || { echo "SKIP: DPDK's net_af_xdp PMD is not installed"; exit 77; }
  # AF_XDP sockets (CONFIG_XDP_SOCKETS): address family 44.
  python3 -c 'import socket; socket.socket(44, socket.SOCK_RAW, 0)' 2> /dev/null ||
    { echo "SKIP: the kernel has no AF_XDP sockets"; exit 77; }
fi
if [[ $link == tap ]]; then
  have_pmd tap || { echo "SKIP: DPDK's net_tap PMD is not installed"; exit 77; }
  [[ -c /dev/net/tun ]] || { echo "SKIP: no /dev/net/tun"; exit 77; }
fi
# afxdp / tap: the second veth pair the PMD's frames cross (tap: bridged
# with the tap interface in each namespace).
vx_a=uxa$tag
vx_b=uxb$tag

# --- the two hosts ------------------------------------------------------------
# xdp: native XDP on a veth needs a frame and its headroom within one page.
[[ $link == xdp ]] && veth_mtu=3500
two_hosts_create p 232 ipv6
if [[ $link == afxdp || $link == tap ]]; then
  # XDP on a veth needs the frame and its headroom within one page.
  vx_mtu=
  [[ $link == afxdp ]] && vx_mtu=3500
  veth_add "$ns_a" "$vx_a" "$ns_b" "$vx_b" "$vx_mtu" || { fail "ip link add veth 2"; exit 1; }
  if [[ $link == tap ]]; then
    for h in a b; do bridge_add "$(ns_of "$h")" "ubr$h$tag" "ux$h$tag" || { fail "bridge in $h"; exit 1; }; done
  fi
fi
pass "veth $ns_a ($ip_a, ${net6}1) <-> $ns_b ($ip_b, ${net6}2)"

start_daemon() {
  local h=$1 mtu=$2 kind=$link more=
  case $link in
    afxdp) kind=dpdk=net_af_xdp0,iface=ux$h$tag,start_queue=0,queue_count=1 ;;
    tap) kind=dpdk=net_tap0,iface=ut$h$tag ;;
  esac
  $dpdk_like && more="\"ipv6\": \"${net6}1$([[ $h == a ]] && echo 1 || echo 2)\", "
  urnicd_config_ab "$h" "$kind" "$more\"mtu\": $mtu" > "$rt/$h.json"
  two_hosts_daemon "$h"
  # The tap interface the PMD made joins the namespace's bridge.
  if [[ $link == tap ]]; then
    ip -n "$(ns_of "$h")" link set "ut$h$tag" master "ubr$h$tag" &&
      ip -n "$(ns_of "$h")" link set "ut$h$tag" up || fail "tap ut$h$tag into the bridge"
  fi
}
# refuse_mtu MTU: a daemon whose path MTU the PMD cannot carry must not
# start, and must say why.
refuse_mtu() {
  local mtu=$1
  local devargs=net_af_xdp0,iface=$vx_a
  [[ $link == tap ]] && devargs=net_tap0,iface=uta$tag
  mkdir -p "$rt/refuse"
  if [[ $link == xdp ]]; then
    # The device fits the path MTU to the interface's first (3500: 2048),
    # so the refusal shows where the interface would carry 4096 (MTU 9000,
    # generic XDP); back to 3500 after it.
    ip -n "$ns_a" link set dev "$veth_a" mtu 9000
    printf '{"devices": [{"name": "urnic0", "link": "xdp", "interface": "%s", "mtu": %d}]}\n' \
      "$veth_a" "$mtu" > "$rt/refuse.json"
  else
    printf '{"devices": [{"name": "urnic0", "link": "dpdk", "devargs": "%s", "address": "%s.11", "mtu": %d}]}\n' \
      "$devargs" "$net" "$mtu" > "$rt/refuse.json"
  fi
  host a timeout 30 "$urnicd" --config "$rt/refuse.json" --runtime-dir "$rt/refuse" > "$rt/refuse.log" 2>&1
  local rc=$?
  [[ $link == xdp ]] && ip -n "$ns_a" link set dev "$veth_a" mtu 3500
  if [[ $rc -ne 0 && $rc -ne 124 ]] && grep -q "path MTU $mtu needs frames of up to" "$rt/refuse.log"; then
    pass "path MTU $mtu refused on $link: $(grep -o 'path MTU.*' "$rt/refuse.log" | head -n 1)"
  else
    fail "path MTU $mtu on $link: exit $rc, $(tail -n 3 "$rt/refuse.log")"
  fi
}
start_pair() {
  start_daemon a "$1"
  start_daemon b "$1"
  # A memif client connects to the server after it started: wait until
  # both ports report a link (`urnicd --status`).
  urnicd_wait_up "$ns_a" "$rt/a"
  urnicd_wait_up "$ns_b" "$rt/b"
}

# --- the GID table -------------------------------------------------------------
# The largest path MTU the link carries (../shared/notes/dpdk-here.md).
mtu1=4096
ud1=2048
case $link in
  afxdp | xdp) mtu1=2048; refuse_mtu 4096 ;;
  tap) mtu1=1024 ud1=1024; refuse_mtu 2048 ;;
esac
start_pair "$mtu1"
if $dpdk_like; then
  roce_a=$net.11 roce_b=$net.12 ngids=6 want_types='v1 v2 v1 v2 v1 v2' v6_check="GID\[ *5\]:.*${net6}11"
else
  roce_a=$ip_a roce_b=$ip_b ngids=6 want_types='v1 v2 v1 v2 v1 v2' v6_check="GID\[ *5\]:.*${net6}1"
fi
kind=$link
$dpdk_like && kind=dpdk
grep -q "$kind .*($roce_a), mtu $mtu1, $ngids GIDs" "$rt/a.log" &&
  pass "urnicd in a: $(grep -o "RoCE v1/v2 over $kind.*" "$rt/a.log")" ||
  fail "urnicd in a: $(cat "$rt/a.log")"
# `urnicd --status` names the real link and its port.
status=$(host a "$urnicd" --status --runtime-dir "$rt/a")
want_port=$veth_a
[[ $link == dpdk ]] && want_port="net_af_packet0,iface=$veth_a"
[[ $link == memif ]] && want_port="net_memif0,role=server"
[[ $link == afxdp ]] && want_port="net_af_xdp0,iface=$vx_a"
[[ $link == tap ]] && want_port="net_tap0,iface=uta$tag"
if grep -qF "device urnic0: link $kind $want_port" <<< "$status" && grep -qE '^device urnic0: .*, up$' <<< "$status"; then
  pass "urnicd --status: $(grep '^device' <<< "$status")"
else
  fail "urnicd --status: $status"
fi
# Expected: fe80 v1, fe80 v2, IPv4 v1, IPv4 v2, ULA v1, ULA v2.
devinfo=$(host a "${run_env[@]}" ibv_devinfo -v 2>&1)
gid_lines=$(grep -E 'GID\[ *[0-9]+\]:' <<< "$devinfo")
types=$(grep -oE 'RoCE v[12]' <<< "$gid_lines" | awk '{print $2}' | tr '\n' ' ' | sed 's/ $//')
if [[ $types == "$want_types" ]] && grep -qE "GID\[ *3\]:.*::ffff:$roce_a" <<< "$gid_lines" &&
   grep -qiE "$v6_check" <<< "$gid_lines" && grep -qE 'GID\[ *0\]:.*fe80' <<< "$gid_lines"; then
  pass "GID table: $(tr -s ' \t\n' ' ' <<< "$gid_lines")"
else
  fail "GID table: types '$types', want '$want_types':"
  sed 's/^/    /' <<< "$gid_lines"
fi

# --- the matrix: GID kind x MTU x program ---------------------------------------
# GID indexes as above: 3 RoCE v2 IPv4, 5 RoCE v2 IPv6, 0 RoCE v1.
# matrix MTU UD_SIZE GID_INDEX...: the five programs over each GID kind given.
v6_gid=5
matrix() {
  local mtu=$1 ud_size=$2
  shift 2
  local g kind
  for g in "$@"; do
    case $g in 3) kind="RoCE v2 IPv4" ;; 0) kind="RoCE v1" ;; *) kind="RoCE v2 IPv6" ;; esac
    local tagline="$kind, mtu $mtu"
    pair "ibv_rc_pingpong --chk ($tagline)" "$pp" 1 ibv_rc_pingpong -g "$g" -m "$mtu" -c -s 8000 -n 200
    pair "ibv_ud_pingpong ($tagline)" "$pp" 1 ibv_ud_pingpong -g "$g" -s "$ud_size" -n 200
    pair "ib_write_bw -s 65536 ($tagline)" "$row" 1 ib_write_bw -x "$g" -m "$mtu" -s 65536 -n 500
    pair "ib_send_bw -s 4096 ($tagline)" "$row" 1 ib_send_bw -x "$g" -m "$mtu" -s 4096 -n 500
    pair "ib_write_lat ($tagline)" "$row" 1 ib_write_lat -x "$g" -m "$mtu" -n 200
  done
}

# A capture on b: RoCE v1, v2/IPv6 and v2/IPv4 frames, every ICRC ok
# (~120 frames per pingpong at b: 30 iterations, a SEND and an ACK each way).
capture_start --host b "$rt/b.pcap" -c 300
for g in 0 "$v6_gid" 3; do
  pair "ibv_rc_pingpong --chk -g $g, captured on b" "$pp" 1 ibv_rc_pingpong -g "$g" -c -s 100 -n 30
done
wait_gone 5 "$capture_pid"
stop_pid "$capture_pid"
frames_decode "$rt/b.pcap"
total=$(tshark -r "$rt/b.pcap" 2>/dev/null | wc -l)
v1=$(tshark -r "$rt/b.pcap" -Y 'eth.type == 0x8915' 2>/dev/null | wc -l)
v6=$(tshark -r "$rt/b.pcap" -Y 'ipv6 && udp.dstport == 4791' 2>/dev/null | wc -l)
if [[ $dec_rc -eq 0 && $total -eq 300 && $ok -eq 300 && $v1 -gt 0 && $v6 -gt 0 ]]; then
  pass "capture on b: $total frames ($v1 RoCE v1, $v6 RoCE v2 over IPv6), every ICRC ok"
else
  fail "capture on b: decode exit $dec_rc, $ok/$total frames ok, $v1 RoCE v1, $v6 IPv6"
  head -n 5 <<< "$decoded" | sed 's/^/    /'
fi

matrix "$mtu1" "$ud1" 3 "$v6_gid" 0
# The RDMA CM across the link: IB CM MADs on QP1 from the RoCE v2 GID of the
# address family the program uses (the IPv4-mapped one, or the IPv6 one).
cm_addrs=("$roce_a")
if ! $dpdk_like; then cm_addrs+=("${net6}1"); else cm_addrs+=("${net6}11"); fi
for addr in "${cm_addrs[@]}"; do
  port=$((port + 2))
  cm_pair "rping -v -V -C 20 -S 4096 over $addr" - 'ping data: rdma-ping-19:' \
    -- rping -s -a "$addr" -p "$port" -V -S 4096 -- rping -c -a "$addr" -p "$port" -v -V -C 20 -S 4096
  cm_pair "ucmatose -c 2 -C 10 over $addr" 'return status 0' 'return status 0' \
    -- ucmatose -b "$addr" -p $((port + 1)) -c 2 -C 10 -- ucmatose -s "$addr" -p $((port + 1)) -c 2 -C 10
  cm_pair "udaddy -c 2 -C 10 over $addr" 'return status 0' 'return status 0' \
    -- udaddy -b "$addr" -c 2 -C 10 -- udaddy -s "$addr" -c 2 -C 10
done
# UD multicast across the hosts on the raw link (its join_group: afpacket
# adds the group's MAC to the interface's filter, a dpdk port takes all
# multicast): mckey in a joins a group, mckey in b sends to it (the frames
# go to the group's 01:00:5e MAC), a receives every datagram.
mc_pair "mckey -C 20 across hosts (b -> 239.1.2.3 -> a)" 239.1.2.3 "$roce_a" "$roce_b" -C 20
mc_pair "mckey -c 2 -C 10 -S 1000 across hosts" 239.1.2.4 "$roce_a" "$roce_b" -c 2 -C 10 -S 1000
# An IPv6 group (33:33 MAC), from and to the hosts' ULA addresses.
if $dpdk_like; then mc6_a=${net6}11 mc6_b=${net6}12; else mc6_a=${net6}1 mc6_b=${net6}2; fi
mc_pair "mckey -C 20 across hosts over IPv6 (b -> ff0e::1:2:3 -> a)" ff0e::1:2:3 "$mc6_a" "$mc6_b" -C 20
rx=$(stat a rx_pkts)
hp=$(stat a hairpin_pkts)
icrc=$(stat a rx_icrc_errors)
if [[ $hp == 0 && $rx -gt 0 && $icrc == 0 ]]; then pass "host a: $rx packets over the link, none hairpinned, no ICRC errors"
else fail "host a: rx_pkts $rx, hairpin_pkts $hp, rx_icrc_errors $icrc"; fi
# The raw links count frames that were not for them: on the dpdk port
# (promiscuous on the veth) the kernel's own TCP frames of perftest's
# exchange are such frames.
not_ours=$(stat a rx_not_ours)
no_neigh=$(stat a tx_no_neighbour)
if [[ $link != dpdk || $not_ours -gt 0 ]]; then pass "host a: rx_not_ours $not_ours, tx_no_neighbour $no_neigh"
else fail "host a: rx_not_ours $not_ours (want > 0: the kernel's frames on the veth), tx_no_neighbour $no_neigh"; fi
# An idle daemon on the raw link sleeps in epoll on its packet socket
# (dpdk: adaptive polling, at most 1000 looks a second): CPU time (utime +
# stime, clock ticks) of both daemons over 5 s of idleness must stay below
# 10 % of a core (measured: ~1 %; a daemon that spins uses 100 %).
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
ta0=$(ticks "$daemon_pid_a")
tb0=$(ticks "$daemon_pid_b")
sleep 5
ta1=$(ticks "$daemon_pid_a")
tb1=$(ticks "$daemon_pid_b")
hz=$(getconf CLK_TCK)
for h in a b; do
  eval "used=\$((t${h}1 - t${h}0))"
  if (( used * 100 <= 10 * 5 * hz )); then pass "idle urnicd in $h on $link: $used ticks of CPU in 5 s (<= 10 %, CLK_TCK $hz)"
  else fail "idle urnicd in $h on $link: $used ticks of CPU in 5 s (CLK_TCK $hz)"; fi
done

# The xdp link: how it runs on a veth (native XDP, copy mode: logged and
# counted), and the matrix's core under fault injection on the link (the
# fault stage's encode / send_frame path), RC recovering every loss.
if [[ $link == xdp ]]; then
  grep -q "AF_XDP on $veth_a queue 0, native XDP, copy mode" "$rt/a.log" &&
    grep -q "zero-copy refused by the driver" "$rt/a.log" &&
    pass "urnicd in a: $(grep -o 'AF_XDP on .*' "$rt/a.log")" || fail "xdp link mode: $(grep xdp "$rt/a.log")"
  zc=$(stat a link_xdp_copy_fallbacks)
  [[ $zc == 1 ]] && pass "link_xdp_copy_fallbacks 1 (veth: copy mode)" || fail "link_xdp_copy_fallbacks $zc"
  host a "$cli" fault -d urnic0 --loss 0.05 --seed 7 > /dev/null || fail "urnic fault --loss 0.05 in a"
  pair "ibv_rc_pingpong --chk under 5 % loss (RoCE v2 IPv4)" "$pp" 1 ibv_rc_pingpong -g 3 -m 2048 -c -s 8000 -n 200
  pair "ib_write_bw -s 65536 under 5 % loss" "$row" 1 ib_write_bw -x 3 -m 2048 -s 65536 -n 200
  dropped=$(stat a fault_dropped)
  resent=$(stat a retransmitted_pkts)
  if [[ $dropped -gt 0 && $resent -gt 0 ]]; then pass "fault on the xdp link: $dropped dropped, $resent retransmitted"
  else fail "fault on the xdp link: fault_dropped $dropped, retransmitted_pkts $resent"; fi
  host a "$cli" fault -d urnic0 --clear > /dev/null || fail "urnic fault --clear in a"
  kdrops=$(stat b link_xdp_rx_drops)
  pass "host b: link_xdp_rx_drops $kdrops (frames the kernel dropped at the socket's rings)"
fi
two_hosts_stop

# The PMDs with a small frame limit ran at their one path MTU above.
if [[ $link != afxdp && $link != tap && $link != xdp ]]; then
  start_pair 1024
  grep -q "mtu 1024" "$rt/a.log" && pass "urnicd restarted with port MTU 1024" || fail "mtu 1024: $(cat "$rt/a.log")"
  # Segmentation at the smaller MTU over one GID kind: the GID kinds differ
  # in addressing only, which the larger MTU's matrix above covered each of.
  matrix 1024 1024 3
  two_hosts_stop
fi

finish
