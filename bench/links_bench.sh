#!/usr/bin/env bash
# bench/links_bench.sh: ib_write_lat and ib_write_bw between two network
# namespaces (a veth pair, MTU 9000, one urnicd per namespace), per link type
# in one run: udp (kernel UDP socket, RoCE v2/IPv4), afpacket (raw Ethernet
# rings; RoCE v2/IPv4 and RoCE v1) and, when urnicd has DPDK, dpdk with a
# net_af_packet vdev (RoCE v2/IPv4; the daemons' own addresses .11/.22 and
# ARP). A benchmark: it prints one
# table and asserts nothing. Needs root. Usage:
#   bench/links_bench.sh [BUILD_DIR] [LAT_ITERS] [BW_ITERS]
# Latency is perftest's one-way figure (half the round trip): t_typical and
# the 99 % percentile; bandwidth is BW average for 64 KiB writes.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
lat_iters=${2:-5000}
bw_iters=${3:-5000}
urnicd=$build/engine/urnicd
[[ $(id -u) -eq 0 ]] || { echo "needs root (network namespaces)"; exit 1; }
[[ -x $urnicd ]] || { echo "no $urnicd: build first"; exit 1; }

tag=$$
ns_a=urnb-a-$tag
ns_b=urnb-b-$tag
veth_a=uba$tag
veth_b=ubb$tag
net=10.$((248 + tag % 8)).$(((tag / 8) % 256))
ip_a=$net.1
ip_b=$net.2
rt=$(mktemp -d /tmp/urnic-links-bench.XXXXXX)
export URNIC_DAEMON=$urnicd
export LD_LIBRARY_PATH=$build/verbs_shim
unset LD_PRELOAD URNIC_RUNTIME_DIR
daemons=()
cleanup() {
  local p
  for p in "${daemons[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${daemons[@]}"; do wait "$p" 2>/dev/null; done
  ip netns del "$ns_a" 2>/dev/null
  ip netns del "$ns_b" 2>/dev/null
  rm -rf "$rt"
}
trap cleanup EXIT
ip netns add "$ns_a" && ip netns add "$ns_b" || exit 1
ip link add "$veth_a" netns "$ns_a" type veth peer name "$veth_b" netns "$ns_b" || exit 1
ip -n "$ns_a" addr add "$ip_a/24" dev "$veth_a"
ip -n "$ns_b" addr add "$ip_b/24" dev "$veth_b"
for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up; done
ip -n "$ns_a" link set "$veth_a" mtu 9000 up
ip -n "$ns_b" link set "$veth_b" mtu 9000 up

in_ns() { local h=$1; shift; ip netns exec "urnb-$h-$tag" env "URNIC_RUNTIME_DIR=$rt/$h" "$@"; }
start() {  # start LINK: one daemon per namespace
  local h
  for h in a b; do
    local ifname addr
    [[ $h == a ]] && { ifname=$veth_a; addr=$ip_a; } || { ifname=$veth_b; addr=$ip_b; }
    mkdir -p "$rt/$h"
    if [[ $1 == udp ]]; then
      printf '{"devices":[{"name":"urnic0","link":"udp","address":"%s"}]}\n' "$addr" > "$rt/$h.json"
    elif [[ $1 == dpdk ]]; then
      printf '{"devices":[{"name":"urnic0","link":"dpdk","devargs":"net_af_packet0,iface=%s,framesz=8192,blocksz=8192","address":"%s","mac":"02:00:75:72:6e:%s"}]}\n' \
        "$ifname" "$addr$([[ $h == a ]] && echo 1 || echo 2)" "$([[ $h == a ]] && echo 0a || echo 0b)" > "$rt/$h.json"
    else
      printf '{"devices":[{"name":"urnic0","link":"afpacket","interface":"%s"}]}\n' "$ifname" > "$rt/$h.json"
    fi
    # Not through in_ns: $! must be the daemon's own PID (ip netns exec and
    # env exec into it), so stop() can signal and reap it.
    ip netns exec "urnb-$h-$tag" env "URNIC_RUNTIME_DIR=$rt/$h" \
      "$urnicd" --config "$rt/$h.json" --runtime-dir "$rt/$h" > "$rt/$h.log" 2>&1 &
    daemons+=($!)
    for _ in $(seq 200); do [[ -S $rt/$h/urnicd.sock ]] && break; sleep 0.02; done
  done
}
stop() {
  local p
  for p in "${daemons[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${daemons[@]}"; do wait "$p" 2>/dev/null; done
  daemons=()
}
port=$((30000 + tag % 20000))
run() {  # run PROG ARGS...: server in a, client in b; prints the client's result row
  port=$((port + 1))
  ip netns exec "urnb-a-$tag" env "URNIC_RUNTIME_DIR=$rt/a" timeout 120 "$@" -p "$port" > "$rt/server.out" 2>&1 &
  local s=$!
  sleep 0.5
  in_ns b timeout 120 "$@" -p "$port" "$ip_a" > "$rt/client.out" 2>&1
  grep -E "^ *[0-9]+ +[0-9]+ +[0-9.]+" "$rt/client.out" | tail -n 1 || { tail -n 5 "$rt/client.out" "$rt/server.out" "$rt/a.log" >&2; }
  wait "$s"
}

printf '| link | GID | ib_write_lat t_typical [us] | ib_write_lat 99%% [us] | ib_write_bw 64 KiB [MB/s] |\n'
printf '|---|---|---|---|---|\n'
row() {  # row LINK LABEL GID_INDEX
  local lat bw
  lat=$(run ib_write_lat -x "$3" -n "$lat_iters")
  bw=$(run ib_write_bw -x "$3" -s 65536 -n "$bw_iters")
  printf '| %s | %s | %s | %s | %s |\n' "$1" "$2" "$(awk '{print $5}' <<< "$lat")" "$(awk '{print $8}' <<< "$lat")" \
    "$(awk '{print $4}' <<< "$bw")"
}
${SKIP_UDP:+:} start udp
${SKIP_UDP:+:} row udp "RoCE v2 IPv4 (1)" 1
${SKIP_UDP:+:} stop
start afpacket
row afpacket "RoCE v2 IPv4 (3)" 3
row afpacket "RoCE v1 (0)" 0
stop
if ldd "$urnicd" | grep -q librte_eal; then
  start dpdk
  row "dpdk net_af_packet" "RoCE v2 IPv4 (3)" 3
  stop
fi
