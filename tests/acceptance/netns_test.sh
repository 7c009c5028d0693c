#!/usr/bin/env bash
# Acceptance (issue 5), two hosts on one machine over the udp link: two
# network namespaces joined by a veth pair, one urnicd per namespace with a
# config binding its address, unmodified ibverbs-utils / perftest servers in
# one namespace and clients in the other. Also across hosts: 5 % loss on one
# side (`urnic fault`) recovered by RC with retransmissions in its counters,
# and a capture on the receiving side (frames that came in over the link,
# headers rebuilt) that `urnic frame decode` accepts with every ICRC ok.
# Needs root (network namespaces); exits 77 (skipped) with the reason
# otherwise. Removes the namespaces (and with them the veths) and stops every
# process it started, by PID.
#
# Also UD multicast across the hosts: mckey in a joins a group (the udp
# link joins it on a's veth), mckey in b sends to it, a receives every
# datagram.
#
# usage: netns_test.sh SHIM_DIR URNICD URNIC_CLI [RDMACM_SHIM_DIR]
set -uo pipefail
shim_dir=$1
urnicd=$2
cli=$3
rdmacm_dir=${4:-$shim_dir}

# shellcheck source=two_hosts.sh
source "$(dirname "$0")/two_hosts.sh"
two_hosts_env "$shim_dir" "$rdmacm_dir"

# --- the two hosts ------------------------------------------------------------
two_hosts_create n 200
addrs="$(ip -n "$ns_a" -o addr show dev "$veth_a") $(ip -n "$ns_b" -o addr show dev "$veth_b")"
if [[ $addrs == *"$ip_a/24"* && $addrs == *"$ip_b/24"* ]]; then pass "veth $ns_a ($ip_a) <-> $ns_b ($ip_b)"
else fail "veth addresses not configured"; exit 1; fi

two_hosts_daemons udp
grep -q "udp $ip_a:4791" "$rt/a.log" && grep -q "udp $ip_b:4791" "$rt/b.log" &&
  pass "urnicd per namespace, bound to $ip_a and $ip_b" || fail "daemons not bound: $(cat "$rt/a.log" "$rt/b.log")"

gid=(-g 1)
x=(-x 1)

pair "ibv_rc_pingpong --chk (a <- b)" "$pp" 1 ibv_rc_pingpong "${gid[@]}" -c -n 500
pair "ibv_rc_pingpong --chk -s 8000 (a <- b)" "$pp" 1 ibv_rc_pingpong "${gid[@]}" -c -s 8000 -n 200
pair "ibv_ud_pingpong (a <- b)" "$pp" 1 ibv_ud_pingpong "${gid[@]}" -n 200
pair "ib_write_bw -s 65536 (a <- b)" "$row" 1 ib_write_bw "${x[@]}" -s 65536 -n 1000
pair "ib_send_bw -s 4096 (a <- b)" "$row" 1 ib_send_bw "${x[@]}" -s 4096 -n 1000
pair "ib_write_lat (a <- b)" "$row" 1 ib_write_lat "${x[@]}" -n 1000
hp=$(stat a hairpin_pkts)
rx=$(stat a rx_pkts)
if [[ $hp == 0 && $rx -gt 0 ]]; then pass "host a: $rx packets over the link, none hairpinned"
else fail "host a: rx_pkts $rx, hairpin_pkts $hp"; fi

mc_pair "mckey -C 20 across hosts (b -> 239.1.2.3 -> a)" 239.1.2.3 "$ip_a" "$ip_b" -C 20
mc_pair "mckey -c 2 -C 10 -S 1000 across hosts" 239.1.2.4 "$ip_a" "$ip_b" -c 2 -C 10 -S 1000

# Loss on a's TX, a capture on b: b sees a's frames as they came in.
host a "$cli" fault -d urnic0 --loss 0.05 --seed 21 > /dev/null || fail "urnic fault in a"
capture_start --host b "$rt/b.pcap" -c 400
before=$(stat a retransmitted_pkts)
pair "ib_write_bw -s 65536, 5 % loss on a (a <- b)" "$row" 1 ib_write_bw "${x[@]}" -s 65536 -n 300
lossy=1 pair "ibv_rc_pingpong --chk -s 5000, 5 % loss on a (a <- b)" "$pp" 1 ibv_rc_pingpong "${gid[@]}" -c -s 5000 -n 100
after=$(stat a retransmitted_pkts)
dropped=$(stat a fault_dropped)
# a is the server: it retransmits what it sends (ib_write_bw's responses are
# ACKs; the pingpong server sends data), so retransmissions on either side count.
rb=$(stat b retransmitted_pkts)
if [[ $dropped -gt 0 && $((after - before + rb)) -gt 0 ]]; then
  pass "5 % loss on a: $dropped frames dropped, retransmitted: a $((after - before)), b $rb"
else
  fail "5 % loss on a: dropped $dropped, retransmitted a $((after - before)) b $rb"
fi
wait_gone 5 "$capture_pid"
stop_pid "$capture_pid"
frames_decode "$rt/b.pcap"
from_a=$(tshark -r "$rt/b.pcap" -T fields -e ip.src 2>/dev/null | grep -c "^$ip_a$")
if [[ $dec_rc -eq 0 && $ok -eq 400 ]]; then pass "capture on b: 400 frames (${from_a:-?} from $ip_a), every ICRC ok"
else fail "capture on b: decode exit $dec_rc, $ok/400 frames ok"; fi

finish
