# shellcheck shell=bash disable=SC2154  # shim_dir, cli and urnicd are the sourcing script's
# tests/acceptance/two_hosts.sh: sourced (not run) by the acceptance scripts
# that build two hosts on one machine: two network namespaces a and b joined
# by a veth pair, one urnicd per namespace with a runtime directory of its
# own, programs run in either namespace. It holds what those scripts share
# beyond common.sh (check counters, the ASan environment, stop_pid): the
# namespaces and their cleanup, and the perftest-style pair.
#
# Before sourcing, set `shim_dir` (the verbs shim's directory: an ASan build
# is recognised from it). Then:
#   hosts_require_root, host H CMD..., bg_host H CMD..., ns_of H,
#   veth_of H, ip_of H:                tools/lib/hosts.sh
#   two_hosts_env LIBDIR...            hosts_require_root, and the programs'
#                                      environment: URNIC_DAEMON=$urnicd,
#                                      LD_LIBRARY_PATH=LIBDIR:..., no
#                                      LD_PRELOAD, URNIC_RUNTIME_DIR (host H
#                                      sets $rt/H) or URNIC_CM_DEBUG
#   two_hosts_create LETTER BASE [ipv6]
#                                      the runtime directory `rt`, and
#                                      hosts_ab LETTER BASE (tools/lib/
#                                      hosts.sh: ns_a/b, veth_a/b, ip_a/b,
#                                      net) at MTU 9000 (or $veth_mtu); with
#                                      ipv6 also ${net6}1/2 (a ULA /64, no
#                                      DAD) and waits for the link-local
#                                      addresses
#   two_hosts_daemon H [WHAT]          urnicd (the script's `urnicd`) in host
#                                      H with config $rt/H.json, runtime
#                                      directory $rt/H, log $rt/H.log; its PID
#                                      is daemon_pid_H (tools/lib/daemons.sh).
#                                      Returns once its socket is there; if
#                                      it ends first or takes 5 s: fails
#                                      "WHAT in H did not start", exit 1
#   two_hosts_daemons LINK [MEMBERS]   both, on urnicd_config_ab H LINK
#                                      MEMBERS (tools/lib/daemons.sh)
#   two_hosts_stop                     stops both (daemon_pid_a, _b)
#   pair NAME EXPECT COUNT PROG ARGS...
#                                      server in a, client in b to $ip_a (-p
#                                      a fresh port); both must exit 0 and
#                                      the client print COUNT lines matching
#                                      EXPECT (client_host=a: the client in a
#                                      too, both on a's daemon; server_host=b:
#                                      the server in b, the client in a); the
#                                      same for cm_client.sh's cm_pair
#   mc_pair NAME GROUP BIND_A BIND_B ARGS...
#                                      mckey receiving GROUP in a (bound to
#                                      BIND_A, joined first), sending from b
#                                      (BIND_B); a must get every datagram
#   stat H COUNTER                     device urnic0's COUNTER in host H
#                                      (`urnic stats --json`; needs `cli`)
#   finish                             prints the counts; its status is the verdict
# At exit (tools/lib/cleanup.sh) every process started is stopped, the
# script's own `cleanup_extra` runs (processes gone, namespaces still
# there), the namespaces (and with them the veths) and `rt` are deleted.

asan_probe=${asan_probe:-$shim_dir/libibverbs.so.1}
# shellcheck source=tests/acceptance/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# shellcheck source=tools/lib/hosts.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/hosts.sh"
server_pid=
tag=$$
two_hosts_env() {
  hosts_require_root
  export URNIC_DAEMON=$urnicd
  LD_LIBRARY_PATH=$(IFS=:; echo "$*")
  export LD_LIBRARY_PATH
  unset LD_PRELOAD URNIC_RUNTIME_DIR URNIC_CM_DEBUG
}

two_hosts_create() {
  local letter=$1 base=$2 ipv6=${3:-}
  rt=$(mktemp -d "/tmp/urnic-$letter.XXXXXX")
  cleanup_paths+=("$rt")
  # Jumbo frames: path MTU 4096 needs ~4.2 KB frames (and the udp link
  # sends with DF).
  hosts_ab "$letter" "$base" "${veth_mtu:-9000}" || { fail "ip netns add / ip link add veth"; exit 1; }
  net6=fd75:726e:$(printf '%x' $((tag % 65536)))::
  [[ $ipv6 == ipv6 ]] || return 0
  # nodad: usable at once (the daemons read the addresses when they start).
  ip -n "$ns_a" addr add "${net6}1/64" dev "$veth_a" nodad
  ip -n "$ns_b" addr add "${net6}2/64" dev "$veth_b" nodad
  wait_link_local "$ns_a" "$veth_a" && wait_link_local "$ns_b" "$veth_b"
  return 0
}

two_hosts_daemon() {
  local h=$1 what=${2:-urnicd}
  if ! urnicd_start "$(ns_of "$h")" "$rt/$h" "$rt/$h.log" --config "$rt/$h.json"; then
    fail "$what in $h did not start: $(tail -n 3 "$rt/$h.log")"
    exit 1
  fi
  eval "daemon_pid_$h=$urnicd_pid"
}
two_hosts_daemons() {
  local h
  for h in a b; do
    urnicd_config_ab "$h" "$@" > "$rt/$h.json"
    two_hosts_daemon "$h"
  done
}
daemon_pid_a="" daemon_pid_b=""
two_hosts_stop() {
  stop_pid "$daemon_pid_a"
  stop_pid "$daemon_pid_b"
}

# wait_listen PORT PID: until something in a listens on TCP PORT (perftest's
# and the pingpongs' exchange), or PID has ended; at most 4 s.
wait_listen() {
  wait_tcp_listen "$1" --ns "$ns_a" --pid "$2"
}

# common.sh's `pair` (and cm_client.sh's cm_pair) across the two hosts:
# server in a (server_host=b: in b), client in the other one (client_host=a:
# in a too, both on a's daemon). On failure, the daemons' last lines too.
# shellcheck disable=SC2034  # pair_logs, pair_label: for cm_pair
pair_where() {
  local s=${server_host:-a} c
  c=${client_host:-$([[ $s == a ]] && echo b || echo a)}
  pair_server=(ip netns exec "$(ns_of "$s")" env "URNIC_RUNTIME_DIR=$rt/$s")
  pair_client=(ip netns exec "$(ns_of "$c")" env "URNIC_RUNTIME_DIR=$rt/$c")
  pair_ns=$(ns_of "$s") pair_addr=$(ip_of "$s") pair_inf_rows=0 pair_logs=("$rt/a.log" "$rt/b.log")
  pair_label="$s <- $c, "
}

# Multicast is unreliable: a datagram sent before the receiver joined is
# gone, so the sender starts once the receiver says it joined (its QPs are
# attached and the group joined on the link by then).
mc_pair() {
  local name=$1 group=$2 bind_a=$3 bind_b=$4
  shift 4
  local out_r=$rt/mc_recv.out out_s=$rt/mc_send.out
  bg_host a "${run_env[@]}" timeout "$limit" stdbuf -oL mckey -m "$group" -b "$bind_a" "$@" > "$out_r" 2>&1
  server_pid=$!
  wait_until 30 --pid "$server_pid" grep -q 'joined dgid' "$out_r"
  host b "${run_env[@]}" timeout "$limit" mckey -m "$group" -b "$bind_b" -s "$@" > "$out_s" 2>&1
  local src=$?
  wait "$server_pid"
  local rrc=$?
  server_pid=
  if [[ $rrc -eq 0 && $src -eq 0 ]] && grep -q 'return status 0' "$out_r"; then
    pass "$name"
  else
    fail "$name: receiver exit $rrc, sender exit $src"
    sed 's/^/    receiver: /' "$out_r" | tail -n 10
    sed 's/^/    sender: /' "$out_s" | tail -n 10
  fi
}

stat() {
  host "$1" "$cli" stats -d urnic0 --json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["counters"][sys.argv[1]])' "$2"
}

# Patterns of the programs' result lines.
pp='[0-9]+ iters in [0-9.]+ seconds'
row='^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+'
