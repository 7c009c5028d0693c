#!/usr/bin/env bash
# Acceptance (issue 5): IPv6 neighbour discovery on DPDK ports. Two network
# namespaces joined by a veth pair (MTU 9000), one urnicd per namespace.
#  1. Two dpdk daemons (net_af_packet vdevs) with configured global (ULA)
#     IPv6 addresses of their own ("ipv6"): the GID table has their RoCE v1
#     and v2 entries, and ibv_rc_pingpong -g / ibv_ud_pingpong -g /
#     ib_write_bw -x over the RoCE v2 GID of that address pass; a capture of
#     the veth shows the daemons' own Neighbor Solicitation (to the
#     solicited-node group's 33:33:ff MAC, hop limit 255, ICMPv6 checksum
#     right as tshark checks it) and the Advertisement that answers it.
#  2. A dpdk daemon against an afpacket daemon, both ways round, so that the
#     kernel's neighbour discovery is the other side: the kernel resolves
#     the dpdk daemon's address through its NA (`ip neigh` shows its MAC),
#     and the dpdk daemon resolves the kernel's address through the kernel's
#     NA.
# Needs root and DPDK (and tshark for the capture); exits 77 (skipped) with
# the reason otherwise. About a minute. Removes the namespaces and stops
# every process it started, by PID.
#
# usage: dpdk_ndp_test.sh SHIM_DIR URNICD
set -uo pipefail
shim_dir=$1
urnicd=$2
if ! grep -q librte_eal <<< "$(ldd "$urnicd")"; then
  echo "SKIP: urnicd was built without DPDK"
  exit 77
fi
# shellcheck source=two_hosts.sh
source "$(dirname "$0")/two_hosts.sh"
two_hosts_env "$shim_dir"
require_tools "iproute2, tshark" ip tshark

two_hosts_create n 232 ipv6
pass "veth $ns_a ($ip_a, ${net6}1) <-> $ns_b ($ip_b, ${net6}2)"

# start_daemon HOST dpdk|afpacket: the dpdk one has .1x and ${net6}1x.
start_daemon() {
  local more='"mtu": 4096'
  [[ $2 == dpdk ]] && more="\"ipv6\": \"${net6}1$([[ $1 == a ]] && echo 1 || echo 2)\", $more"
  urnicd_config_ab "$1" "$2" "$more" > "$rt/$1.json"
  two_hosts_daemon "$1" "urnicd ($2)"
}

# --- 1. two dpdk daemons over their global IPv6 GIDs -------------------------
start_daemon a dpdk
start_daemon b dpdk
gids=$(host a "${run_env[@]}" ibv_devinfo -v 2>&1 | grep -E 'GID\[ *[0-9]+\]:')
# (ibv_devinfo writes RoCE v1 GIDs in full, v2 ones compressed.)
if grep -qiE "GID\[ *4\]:.*:0011, RoCE v1" <<< "$gids" && grep -qiE "GID\[ *5\]:.*${net6}11, RoCE v2" <<< "$gids"; then
  pass "GID table of a: $(tr -s ' \t\n' ' ' <<< "$gids")"
else
  fail "GID table of a lacks ${net6}11 as GID[4] (v1) / GID[5] (v2):"
  sed 's/^/    /' <<< "$gids"
fi
# Captured where each frame arrives (net_af_packet sends with
# PACKET_QDISC_BYPASS, which the sender's own taps do not see), without a
# capture filter: on this machine's kernel (6.18) a BPF filter 'icmp6' let
# the kernel's own ICMPv6 through but none of the DPDK daemons' NS and NA
# (cause not found); the display filters below pick them out.
ip netns exec "$ns_a" dumpcap -q -i "$veth_a" -w "$rt/nd_a.pcap" > /dev/null 2>&1 &
cap_a=$!
ip netns exec "$ns_b" dumpcap -q -i "$veth_b" -w "$rt/nd_b.pcap" > /dev/null 2>&1 &
cap_b=$!
cleanup_pids+=("$cap_a" "$cap_b")
sleep 1
pair "ibv_rc_pingpong --chk -g 5 (dpdk <-> dpdk, ${net6}11/12)" "$pp" 1 ibv_rc_pingpong -g 5 -c -s 4096 -n 100
stop_pid "$cap_a"
stop_pid "$cap_b"
wait "$cap_a" "$cap_b" 2>/dev/null
pair "ibv_ud_pingpong -g 5 (dpdk <-> dpdk)" "$pp" 1 ibv_ud_pingpong -g 5 -s 2048 -n 100
pair "ib_write_bw -x 5 (dpdk <-> dpdk)" "$row" 1 ib_write_bw -x 5 -s 65536 -n 300
# b solicited a's address (the client speaks first); a answered.
ns_filter="icmpv6.type == 135 && ipv6.src == ${net6}12 && ipv6.dst == ff02::1:ff00:11 && eth.dst == 33:33:ff:00:00:11 && ipv6.hlim == 255 && icmpv6.nd.ns.target_address == ${net6}11 && icmpv6.opt.linkaddr == 02:00:75:72:6e:0b && icmpv6.checksum.status == 1"
na_filter="icmpv6.type == 136 && ipv6.src == ${net6}11 && ipv6.dst == ${net6}12 && eth.dst == 02:00:75:72:6e:0b && ipv6.hlim == 255 && icmpv6.nd.na.flag.s == 1 && icmpv6.opt.linkaddr == 02:00:75:72:6e:0a && icmpv6.checksum.status == 1"
n_ns=$(tshark -r "$rt/nd_a.pcap" -Y "$ns_filter" 2>/dev/null | wc -l)
n_na=$(tshark -r "$rt/nd_b.pcap" -Y "$na_filter" 2>/dev/null | wc -l)
if [[ $n_ns -ge 1 && $n_na -ge 1 ]]; then
  pass "capture: $n_ns NS from ${net6}12 to ff02::1:ff00:11 (33:33:ff:00:00:11, hop limit 255, checksum good), $n_na NA from ${net6}11"
else
  fail "capture: $n_ns matching NS, $n_na matching NA:"
  tshark -r "$rt/nd_b.pcap" -V -Y icmpv6 2>/dev/null | grep -E 'Type|Checksum|Hop Limit|Target|Link-layer|Destination' | head -n 30 | sed 's/^/    /'
fi
two_hosts_stop

# --- 2. dpdk against afpacket (the kernel's neighbour discovery) ---------------
# a: dpdk (server), b: afpacket (client): b's kernel resolves ${net6}11
# through the dpdk link's NA.
start_daemon a dpdk
start_daemon b afpacket
pair "ibv_rc_pingpong --chk -g 5 (dpdk ${net6}11 <-> afpacket ${net6}2)" "$pp" 1 ibv_rc_pingpong -g 5 -c -s 4096 -n 100
pair "ib_write_bw -x 5 (dpdk <-> afpacket)" "$row" 1 ib_write_bw -x 5 -s 65536 -n 300
neigh=$(ip -n "$ns_b" -6 neigh show "${net6}11" dev "$veth_b")
if grep -qiE 'lladdr 02:00:75:72:6e:0a (REACHABLE|STALE|DELAY|PROBE)' <<< "$neigh"; then
  pass "kernel in b learnt the dpdk daemon's address: $neigh"
else
  fail "kernel in b: neighbour ${net6}11: '$neigh'"
fi
two_hosts_stop
# a: afpacket (server), b: dpdk (client): the dpdk link solicits the
# kernel's ${net6}1 and learns it from the kernel's NA.
start_daemon a afpacket
start_daemon b dpdk
pair "ibv_rc_pingpong --chk -g 5 (afpacket ${net6}1 <-> dpdk ${net6}12)" "$pp" 1 ibv_rc_pingpong -g 5 -c -s 4096 -n 100
pair "ib_write_bw -x 5 (afpacket <-> dpdk)" "$row" 1 ib_write_bw -x 5 -s 65536 -n 300
two_hosts_stop

finish
