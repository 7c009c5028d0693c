# shellcheck shell=bash
# tools/lib/tcp_listen.sh: for the scripts that start a server (perftest,
# the pingpongs, iperf3, an HTTP server) and must not start its client before
# it listens. Their stdout is block-buffered, so the socket itself is looked
# for: /proc/net/tcp and tcp6, state 0A = LISTEN.
#
# wait_tcp_listen PORT [--ns NS] [--pid PID] [--timeout SECONDS]
#   0 once a TCP socket listens on PORT (in network namespace NS, else this
#   one); 1 when PID (the server) ended first or SECONDS (default 4) passed.
#   Looks every 20 ms.
wait_tcp_listen() {
  local port=$1 ns="" pid="" timeout=4
  shift
  while [[ $# -gt 0 ]]; do
    case $1 in
      --ns) ns=$2; shift 2 ;;
      --pid) pid=$2; shift 2 ;;
      --timeout) timeout=$2; shift 2 ;;
      *) echo "wait_tcp_listen: unknown argument $1" >&2; return 2 ;;
    esac
  done
  local hex i in_ns=()
  hex=$(printf '%04X' "$port")
  [[ -n $ns ]] && in_ns=(ip netns exec "$ns")
  for ((i = 0; i < timeout * 50; i++)); do
    "${in_ns[@]}" grep -qE "^ *[0-9]+: [0-9A-F]+:$hex [0-9A-F]+:0000 0A" /proc/net/tcp /proc/net/tcp6 2> /dev/null && return 0
    [[ -n $pid ]] && ! kill -0 "$pid" 2> /dev/null && return 1
    sleep 0.02
  done
  return 1
}
