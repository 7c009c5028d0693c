#!/usr/bin/env bash
# Acceptance (issue 49): raw packet QPs and ibv_create_flow on two hosts on
# one machine (network namespaces a and b joined by a veth pair, MTU 9000,
# one afpacket urnicd in each), through tests/acceptance/raw_frames.cpp:
#   - b receives on three raw QPs, each with a rule for frames to its veth's
#     MAC, IPv4 192.0.2.2 and one UDP port; a sends frames of 60..1514
#     bytes from one raw QP to those ports and to a fourth no rule names:
#     every frame of a steered port that arrives is on its QP alone, data,
#     length and headers checked, none twice (at least 90 % arrive: a
#     burst may be lost when b's ring fills before its engine runs on a
#     loaded machine, as a NIC drops on rx_out_of_buffer); the unsteered
#     ones reach no QP (b's raw_unmatched counts them);
#   - on a: bad input (malformed specs EINVAL, an unsupported spec
#     EOPNOTSUPP, a flow on a UD QP EINVAL, a QP with flows EBUSY, a frame
#     shorter than a header EINVAL, one longer than MTU + L2 LOC_LEN_ERR) and
#     a frame looped back to another QP's rule on the same device;
#   - a raw packet QP without CAP_NET_RAW: EPERM;
#   - RoCE between the hosts still works while rules exist (ibv_ud_pingpong
#     is not taken by a rule that does not name RoCE).
# Needs root (namespaces, AF_PACKET): skipped (77) otherwise. About 20 s.
#
# usage: raw_qp_test.sh SHIM_DIR URNICD URNIC_CLI RAW_FRAMES
set -uo pipefail
shim_dir=$1
urnicd=$2
cli=$3
raw_frames=$4
# shellcheck source=two_hosts.sh
source "$(dirname "$0")/two_hosts.sh"
two_hosts_env "$shim_dir"

veth_mtu=9000
two_hosts_create r 120
two_hosts_daemons afpacket
mac_a=$(ip -n "$ns_a" -br link show "$veth_a" | awk '{print $3}')
mac_b=$(ip -n "$ns_b" -br link show "$veth_b" | awk '{print $3}')
pass "two afpacket hosts: $ns_a ($mac_a) <-> $ns_b ($mac_b)"

caps=$(host a "${run_env[@]}" ibv_devinfo -v 2>&1)
if grep -q "MANAGED_FLOW_STEERING" <<< "$caps"; then pass "ibv_devinfo -v: MANAGED_FLOW_STEERING"
else fail "ibv_devinfo -v has no MANAGED_FLOW_STEERING: $(grep -A3 device_cap_flags <<< "$caps" | tr -s ' \n' ' ')"; fi

# Steering across the wire, exact.
count=300
out_r=$rt/recv.out
bg_host b "${run_env[@]}" timeout "$limit" stdbuf -oL "$raw_frames" recv "$mac_b" "$count" 9001 9002 9003 > "$out_r" 2>&1
recv_pid=$!
wait_until 20 --pid "$recv_pid" grep -q '^ready' "$out_r"
unmatched_before=$(stat b raw_unmatched)
host a "${run_env[@]}" timeout "$limit" "$raw_frames" send "$mac_b" "$mac_a" "$count" 9001 9002 9003 9004 > "$rt/send.out" 2>&1
send_rc=$?
wait "$recv_pid"
recv_rc=$?
unmatched=$(( $(stat b raw_unmatched) - unmatched_before ))
if [[ $send_rc -eq 0 && $recv_rc -eq 0 ]]; then
  pass "a -> b: $(grep 'data checked' "$out_r" | tr '\n' ';') $(grep wrong "$out_r")"
else
  fail "a -> b: sender exit $send_rc ($(tail -n 2 "$rt/send.out" | tr '\n' ' ')), receiver exit $recv_rc"
  sed 's/^/    receiver: /' "$out_r" | tail -n 10
fi
# The frames to port 9004 (and the kernel's own, e.g. IPv6 neighbour
# discovery) match no rule: dropped, counted.
if (( unmatched * 10 >= count * 9 )); then pass "b: $unmatched frames matched no rule and reached no QP (raw_unmatched)"
else fail "b: raw_unmatched grew by $unmatched, want >= 90 % of $count"; fi

if host a "${run_env[@]}" timeout "$limit" "$raw_frames" checks "$veth_mtu" > "$rt/checks.out" 2>&1; then
  pass "a: bad input and loopback: $(grep -E 'looped|oversized' "$rt/checks.out" | tr '\n' ';')"
else
  fail "a: checks"
  sed 's/^/    /' "$rt/checks.out" | tail -n 15
fi
# Four of the checks' bad rules reach the daemon and are counted (a spec
# size, an unknown type, port 2, ESP, a UD QP: the spec whose size runs
# into the next spec's bytes, and the one shorter than a header, end the
# shim's walk, which refuses them itself: the daemon never sees them).
rejected=$(stat a flow_rejected)
if (( rejected >= 4 )); then pass "a: flow_rejected $rejected"; else fail "a: flow_rejected $rejected, want >= 4"; fi

if host a "${run_env[@]}" setpriv --inh-caps=-net_raw --bounding-set=-net_raw "$raw_frames" eperm > "$rt/eperm.out" 2>&1; then
  pass "a: $(cat "$rt/eperm.out")"
else
  fail "a: eperm: $(cat "$rt/eperm.out")"
fi

# RoCE is the device's own while rules exist that do not name it.
bg_host b "${run_env[@]}" timeout "$limit" stdbuf -oL "$raw_frames" recv "$mac_b" 1000000 9001 > "$rt/hold.out" 2>&1
hold_pid=$!
wait_until 20 --pid "$hold_pid" grep -q '^ready' "$rt/hold.out"
pair "ibv_ud_pingpong with a rule on b" "$pp" 1 ibv_ud_pingpong -g 3 -s 1024 -n 200
stop_pid "$hold_pid"
trapped=$(stat b raw_trapped)
if [[ $trapped == 0 ]]; then pass "b: no RoCE frame taken by a rule (raw_trapped 0)"; else fail "b: raw_trapped $trapped"; fi

finish
