#!/usr/bin/env bash
# Acceptance (issue 18): a network peer aims RoCE v2 packets at a victim's
# QP from an address that is not the QP's connected peer. Two hosts (two
# namespaces, a veth): the victim's UC QP and MR on host a (urnic0,
# $ip_a), connected to its legitimate peer on host b (urnic0, $ip_b); the
# attacker on host b too, on a second device bound to a third address
# ($ip_c), knowing the victim's QPN, R_Key and address (as an on-path
# observer would). Its RDMA WRITE is a valid packet with a valid ICRC, UC
# (any PSN starts a message, no NAK): it must be dropped, the victim's
# memory untouched and a's wrong_peer_pkts counted. The same WRITE from the
# legitimate peer lands (the packet was good). Root (namespaces); skipped
# (77) otherwise.
#
# usage: security_spoof_test.sh SHIM_DIR URNICD URNIC_CLI
set -uo pipefail
shim_dir=$1
urnicd=$2
cli=$3

# shellcheck source=two_hosts.sh
source "$(dirname "$0")/two_hosts.sh"
two_hosts_env "$shim_dir"
if ! /usr/bin/python3 -c 'import pyverbs' 2> /dev/null; then
  echo "SKIP: pyverbs (python3-pyverbs) is not installed"
  exit 77
fi

two_hosts_create s 216
ip_c=$net.3
ip -n "$ns_b" addr add "$ip_c/24" dev "$veth_b"
urnicd_config_ab a udp > "$rt/a.json"
printf '{"devices": [{"name": "urnic0", "link": "udp", "address": "%s"}, {"name": "urnic1", "link": "udp", "address": "%s"}]}\n' \
  "$ip_b" "$ip_c" > "$rt/b.json"
two_hosts_daemon a
two_hosts_daemon b

# The victim, its peer and the attacker (tests/acceptance/spoof_peer.py).
out=$(timeout 120 /usr/bin/python3 "$(dirname "$0")/spoof_peer.py" drive "$ns_a" "$rt/a" "$ns_b" "$rt/b" "$cli" 2>&1)
while IFS= read -r line; do
  case $line in
    PASS\ *) pass "${line#PASS }" ;;
    FAIL\ *) fail "${line#FAIL }" ;;
  esac
done <<< "$out"
[[ $(grep -c '^PASS' <<< "$out") == 3 ]] || fail "the parties did not all run: $(tail -n 15 <<< "$out")"
alive "$daemon_pid_a" && pass "urnicd on a still serves" || fail "urnicd on a died"
finish
