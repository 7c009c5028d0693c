# shellcheck shell=bash disable=SC2154  # rt: the sourcing script's
# tools/lib/hosts.sh: hosts on one machine as network namespaces, joined by
# veth pairs (and bridges), with their addresses and MTU. Every namespace
# made here is deleted at exit (tools/lib/cleanup.sh), and the veths and
# bridges in it with it.
#
# Namespace names are "$URNIC_NETNS_PREFIX-NAME-PID" (prefix "urnic" by
# default), so that two runs, or two people's runs on one machine, never
# meet; interfaces are made inside the namespaces, where no other run sees
# their names.
#
#   hosts_require_root       exit 77 (the test is skipped) without root or ip(8)
#   netns_name NAME          prints the namespace's full name
#   netns_add NAME...        makes namespaces NAME (full names), loopback up
#   veth_add NS_A DEV_A NS_B DEV_B [MTU [CIDR_A [CIDR_B]]]
#                            a veth pair DEV_A in NS_A, DEV_B in NS_B, at MTU
#                            (9000 for jumbo frames; default the kernel's
#                            1500), with the addresses given (- for none), up
#   bridge_add NS BRIDGE DEV...
#                            a bridge in NS with DEV... in it, up
#   wait_link_local NS DEV   until DEV has its IPv6 link-local address (5 s)
#
# Two hosts a and b (tests/acceptance/two_hosts.sh, bench/links_bench.sh):
#   hosts_ab LETTER BASE [MTU]
#                            namespaces ns_a, ns_b = $(netns_name LETTERa/b)
#                            joined by veths veth_a, veth_b = uLETTERa/bPID at
#                            MTU, with ip_a/ip_b = NET.1/.2 of the /24 NET =
#                            10.(BASE + PID % 16).(PID / 16 % 256)
#   ns_of H, veth_of H, ip_of H
#                            H's namespace, veth and address (H: a or b)
#   host H CMD... / bg_host H CMD...
#                            CMD in H with the runtime directory $rt/H (`rt`:
#                            the script's), foreground or background ($! is
#                            CMD: ip netns exec and env exec into it)

# shellcheck source=tools/lib/cleanup.sh
source "$(dirname "${BASH_SOURCE[0]}")/cleanup.sh"

hosts_require_root() {
  if [[ $(id -u) -ne 0 ]]; then
    echo "SKIP: needs root to create network namespaces"
    exit 77
  fi
  if ! command -v ip > /dev/null; then
    echo "SKIP: iproute2 (ip) is not installed"
    exit 77
  fi
}

netns_name() { echo "${URNIC_NETNS_PREFIX:-urnic}-$1-$$"; }

netns_add() {
  local ns
  for ns in "$@"; do
    ip netns add "$ns" || return 1
    cleanup_netns+=("$ns")
    ip -n "$ns" link set lo up
  done
}

veth_add() {
  local ns_a=$1 dev_a=$2 ns_b=$3 dev_b=$4 mtu=${5:-} cidr_a=${6:--} cidr_b=${7:--}
  ip link add "$dev_a" netns "$ns_a" type veth peer name "$dev_b" netns "$ns_b" || return 1
  [[ $cidr_a != - ]] && ip -n "$ns_a" addr add "$cidr_a" dev "$dev_a"
  [[ $cidr_b != - ]] && ip -n "$ns_b" addr add "$cidr_b" dev "$dev_b"
  ip -n "$ns_a" link set "$dev_a" ${mtu:+mtu "$mtu"} up
  ip -n "$ns_b" link set "$dev_b" ${mtu:+mtu "$mtu"} up
}

bridge_add() {
  local ns=$1 br=$2 dev
  shift 2
  ip -n "$ns" link add "$br" type bridge || return 1
  for dev in "$@"; do ip -n "$ns" link set "$dev" master "$br" || return 1; done
  ip -n "$ns" link set "$br" up
}

wait_link_local() { wait_until 5 has_link_local "$1" "$2"; }
has_link_local() { ip -n "$1" -6 addr show dev "$2" | grep -q 'fe80.*scope link'; }

hosts_ab() {
  local letter=$1 base=$2 mtu=${3:-}
  ns_a=$(netns_name "${letter}a")
  ns_b=$(netns_name "${letter}b")
  veth_a=u${letter}a$$
  veth_b=u${letter}b$$
  net=10.$((base + $$ % 16)).$((($$ / 16) % 256))
  ip_a=$net.1
  ip_b=$net.2
  netns_add "$ns_a" "$ns_b" && veth_add "$ns_a" "$veth_a" "$ns_b" "$veth_b" "$mtu" "$ip_a/24" "$ip_b/24"
}
ns_of() { [[ $1 == a ]] && echo "$ns_a" || echo "$ns_b"; }
veth_of() { [[ $1 == a ]] && echo "$veth_a" || echo "$veth_b"; }
ip_of() { [[ $1 == a ]] && echo "$ip_a" || echo "$ip_b"; }
host() {
  local h=$1
  shift
  ip netns exec "$(ns_of "$h")" env "URNIC_RUNTIME_DIR=$rt/$h" "$@"
}
bg_host() {
  local h=$1
  shift
  ip netns exec "$(ns_of "$h")" env "URNIC_RUNTIME_DIR=$rt/$h" "$@" &
}
