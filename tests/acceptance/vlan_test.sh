#!/usr/bin/env bash
# Acceptance (issue 5): the VLAN tag option of the raw links ("vlan": ID in
# a device's config). Two network namespaces joined by a veth pair, one
# urnicd per namespace on the afpacket link of its veth, both devices on
# VLAN 100: ibv_rc_pingpong --chk over RoCE v2/IPv4 with service level 5
# and over RoCE v1, and ib_write_bw, pass; a capture on b's veth (tshark;
# libpcap puts back the tag the kernel moved into tp_vlan_tci) shows every
# RoCE frame tagged VLAN 100 with priority 5 (the SL) for the SL-5
# pingpong. Then b moves to VLAN 200: a pingpong cannot complete (it is
# stopped after a few seconds), and a counts b's frames as rx_other_vlan,
# none delivered. The veths carry perftest's TCP exchange
# untagged. Needs root (namespaces, AF_PACKET) and tshark: exits 77
# (skipped) with the reason otherwise. About 30 s. Removes the namespaces
# and stops every process it started, by PID.
#
# With LINK = dpdk the daemons drive net_af_packet vdevs on the veths
# instead (addresses .11/.12 of their own, their ARP in the VLAN too; the
# PMD puts back the tag the kernel took out). Skipped (77) without DPDK.
#
# usage: vlan_test.sh SHIM_DIR URNICD URNIC_CLI [afpacket|dpdk]
set -uo pipefail
shim_dir=$1
urnicd=$2
cli=$3
link=${4:-afpacket}
if [[ $link == dpdk ]] && ! grep -q librte_eal <<< "$(ldd "$urnicd")"; then
  echo "SKIP: urnicd was built without DPDK"
  exit 77
fi

default_limit=60
# shellcheck source=two_hosts.sh
source "$(dirname "$0")/two_hosts.sh"
two_hosts_env "$shim_dir"
require_tools "iproute2, tshark" ip tshark

two_hosts_create v 232
pass "veth $ns_a ($ip_a) <-> $ns_b ($ip_b)"

start_daemon() {  # start_daemon H VLAN
  urnicd_config_ab "$1" "$link" "\"vlan\": $2, \"mtu\": 4096" > "$rt/$1.json"
  two_hosts_daemon "$1"
}

# try_pair NAME LIMIT PROG ARGS...: server in a, client in b to $ip_a; sets
# pair_rc (0: both ended well) and leaves the client's output in $rt/client.out.
try_pair() {
  local name=$1 lim=$2
  shift 2
  port=$((port + 1))
  bg_host a "${run_env[@]}" timeout "$lim" "$@" -p "$port" > "$rt/server.out" 2>&1
  server_pid=$!
  wait_listen "$port" "$server_pid"
  host b "${run_env[@]}" timeout "$lim" "$@" -p "$port" "$ip_a" > "$rt/client.out" 2>&1
  local crc=$?
  wait "$server_pid"
  local src=$?
  server_pid=
  pair_rc=$((crc != 0 || src != 0))
}

# --- both on VLAN 100 ----------------------------------------------------------
start_daemon a 100
start_daemon b 100
grep -q "over $link .*$veth_a.*vlan 100" "$rt/a.log" && pass "urnicd in a: $(grep -o 'RoCE v1/v2 over.*' "$rt/a.log")" ||
  fail "urnicd in a: $(cat "$rt/a.log")"

# Capture on b's veth while the SL-5 pingpong runs: only RoCE v2 (UDP 4791)
# and RoCE v1 frames, as libpcap rebuilds them with their tag.
ip netns exec "$ns_b" tshark -q -i "$veth_b" -w "$rt/b.pcap" > "$rt/tshark.out" 2>&1 &
cap_pid=$!
cleanup_pids+=("$cap_pid")
# tshark takes a while to start (dissector tables) on a loaded runner: wait
# up to 30 s for it to say it captures, and report it if it never does
# (the check below would otherwise only see an empty capture).
wait_until 30 grep -q "Capturing on" "$rt/tshark.out"
grep -q "Capturing on" "$rt/tshark.out" || echo "    tshark did not start capturing within 30 s: $(tail -n 2 "$rt/tshark.out" | tr '\n' ' ')"
try_pair "rc_pingpong" "$limit" ibv_rc_pingpong -g 3 -l 5 -c -s 4000 -n 100
if (( pair_rc == 0 )) && grep -qE "$pp" "$rt/client.out"; then
  pass "ibv_rc_pingpong --chk -l 5 (RoCE v2 IPv4, VLAN 100): $(grep -E "$pp" "$rt/client.out" | tail -n 1)"
else
  fail "ibv_rc_pingpong --chk -l 5 over VLAN 100"
  sed 's/^/    client: /' "$rt/client.out" | tail -n 10
  sed 's/^/    server: /' "$rt/server.out" | tail -n 10
fi
sleep 0.5
stop_pid "$cap_pid"
roce='(udp.dstport == 4791 || eth.type == 0x8915 || vlan.etype == 0x8915)'
all=$(tshark -r "$rt/b.pcap" -Y "$roce" 2>/dev/null | wc -l)
tagged=$(tshark -r "$rt/b.pcap" -Y "$roce && vlan.id == 100 && vlan.priority == 5" 2>/dev/null | wc -l)
# 100 iterations: at least a's 100 SENDs (b's own frames too, when the tap
# sees what the TX ring sends).
if (( all >= 100 && tagged == all )); then
  pass "capture on $veth_b: $tagged of $all RoCE frames tagged VLAN 100, priority 5"
else
  fail "capture on $veth_b: $tagged of $all RoCE frames tagged VLAN 100 priority 5"
  sed 's/^/    tshark: /' "$rt/tshark.out" | tail -n 5
  tshark -r "$rt/b.pcap" -V -Y "$roce" -c 1 2>/dev/null | grep -iE '802.1Q|ID:|Priority' | sed 's/^/    /'
fi

try_pair "rc_pingpong v1" "$limit" ibv_rc_pingpong -g 0 -c -s 1000 -n 100
if (( pair_rc == 0 )) && grep -qE "$pp" "$rt/client.out"; then
  pass "ibv_rc_pingpong --chk (RoCE v1, VLAN 100): $(grep -E "$pp" "$rt/client.out" | tail -n 1)"
else
  fail "ibv_rc_pingpong --chk (RoCE v1) over VLAN 100"
  sed 's/^/    client: /' "$rt/client.out" | tail -n 10
fi
try_pair "write_bw" "$limit" ib_write_bw -x 3 -s 65536 -n 300
if (( pair_rc == 0 )) && grep -qE "$row" "$rt/client.out"; then
  pass "ib_write_bw -s 65536 (RoCE v2 IPv4, VLAN 100): $(grep -E "$row" "$rt/client.out" | tail -n 1 | tr -s ' ')"
else
  fail "ib_write_bw over VLAN 100"
  sed 's/^/    client: /' "$rt/client.out" | tail -n 10
fi
other_a=$(stat a rx_other_vlan)
rx_a=$(stat a rx_pkts)
# (The dpdk port also sees the kernel's untagged ARP broadcasts on the veth:
# other-VLAN frames for it.)
if [[ ($other_a == 0 || $link == dpdk) && $rx_a -gt 0 ]]; then pass "host a: $rx_a packets received, rx_other_vlan $other_a"
else fail "host a: rx_pkts $rx_a, rx_other_vlan $other_a"; fi

# --- b on VLAN 200: nothing gets through; a counts b's frames ----------------
stop_pid "$daemon_pid_b"
start_daemon b 200
before_a=$(stat a rx_pkts)
try_pair "rc_pingpong across VLANs" 6 ibv_rc_pingpong -g 3 -c -s 100 -n 10
delivered=$(( $(stat a rx_pkts) - before_a ))
other_a=$(stat a rx_other_vlan)
other_b=$(stat b rx_other_vlan)
rx_b=$(stat b rx_pkts)
# (a never answers, so b may see nothing at all.)
if (( pair_rc != 0 && delivered == 0 && rx_b == 0 && other_a > 0 )); then
  pass "a on VLAN 100, b on VLAN 200: no pingpong, none delivered; rx_other_vlan a $other_a, b $other_b"
else
  fail "VLAN 100 vs 200: pingpong rc $pair_rc, delivered a $delivered b $rx_b, rx_other_vlan a $other_a b $other_b"
fi

finish
