# shellcheck shell=bash disable=SC2154  # urnicd, rt, net: the sourcing script's (net: hosts.sh's)
# tools/lib/daemons.sh: urnicd started by a script (its path in `urnicd`),
# each in a runtime directory of its own, optionally in a network namespace
# (tools/lib/hosts.sh). (A daemon the shim started by itself is stopped
# through cleanup_daemon_dirs, tools/lib/cleanup.sh.)
#
#   urnicd_start [--wait SECONDS] NS DIR LOG [ARGS...]
#                            urnicd --runtime-dir DIR ARGS (e.g. --config
#                            FILE) in namespace NS ("" for this one), output
#                            to LOG; its PID in `urnicd_pid`, stopped at exit
#                            (tools/lib/cleanup.sh). Returns 0 once its socket
#                            is there, 1 if it ended first or SECONDS (5)
#                            passed.
#   urnicd_wait_up NS DIR [SECONDS]
#                            until `urnicd --status` says device urnic0's link
#                            is up (a memif client connects after its server,
#                            a DPDK port takes a while); 1 after SECONDS (5)
#   urnicd_config_ab H LINK [MEMBERS]
#                            prints a config of one device urnic0 in host H
#                            of hosts_ab (tools/lib/hosts.sh), LINK: udp (on
#                            ip_H), afpacket or xdp (on veth_H), dpdk
#                            (net_af_packet on veth_H), memif (net_memif
#                            between the two, socket $rt/memif.sock: a, the
#                            server, removes an old one), dpdk=DEVARGS; a
#                            dpdk port has address $net.1N and MAC
#                            02:00:75:72:6e:0X (N, X: 1, a in a; 2, b in b).
#                            MEMBERS: more of the device's JSON members
#                            ("mtu": 4096, ...)

# shellcheck source=tools/lib/cleanup.sh
source "$(dirname "${BASH_SOURCE[0]}")/cleanup.sh"

urnicd_start() {
  local seconds=5
  [[ $1 == --wait ]] && { seconds=$2; shift 2; }
  local ns=$1 dir=$2 log=$3 in_ns=()
  shift 3
  [[ -n $ns ]] && in_ns=(ip netns exec "$ns")
  mkdir -p "$dir"
  rm -f "$dir/urnicd.sock"
  # Not through a function: `&` on a function forks a subshell, and $!
  # would be its PID; ip netns exec and env exec into urnicd.
  "${in_ns[@]}" env "URNIC_RUNTIME_DIR=$dir" "$urnicd" --runtime-dir "$dir" "$@" > "$log" 2>&1 &
  urnicd_pid=$!
  cleanup_pids+=("$urnicd_pid")
  wait_until "$seconds" --pid "$urnicd_pid" test -S "$dir/urnicd.sock"
}

urnicd_wait_up() { wait_until "${3:-5}" urnicd_is_up "$1" "$2"; }
urnicd_is_up() {
  local in_ns=()
  [[ -n $1 ]] && in_ns=(ip netns exec "$1")
  "${in_ns[@]}" "$urnicd" --status --runtime-dir "$2" 2>/dev/null | grep -qE '^device urnic0: link .*, up$'
}

urnicd_config_ab() {
  local h=$1 link=$2 more=${3:+, $3} n=1 x=a role=server dev="" devargs=""
  [[ $h == b ]] && n=2 x=b role=client
  case $link in
    udp) dev="\"link\": \"udp\", \"address\": \"$(ip_of "$h")\"" ;;
    afpacket | xdp) dev="\"link\": \"$link\", \"interface\": \"$(veth_of "$h")\"" ;;
    dpdk) devargs="net_af_packet0,iface=$(veth_of "$h"),framesz=8192,blocksz=8192" ;;
    memif)
      [[ $h == a ]] && rm -f "$rt/memif.sock"
      devargs="net_memif0,role=$role,socket=$rt/memif.sock,socket-abstract=no,id=0" ;;
    dpdk=*) devargs=${link#dpdk=} ;;
  esac
  [[ -n $devargs ]] && dev="\"link\": \"dpdk\", \"devargs\": \"$devargs\", \"address\": \"$net.1$n\", \"mac\": \"02:00:75:72:6e:0$x\""
  echo "{\"devices\": [{\"name\": \"urnic0\", $dev$more}]}"
}
