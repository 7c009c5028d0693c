#!/usr/bin/env bash
# Acceptance (issue 23), engine threads: urnicd with "threads": 2 runs each
# udp and afpacket RoCE device on two engine threads, QPs sharded by QPN (a process's
# objects on one thread, processes spread over them; the udp link's sockets
# steer datagrams by destination QPN; engine/datapath/shard.hpp). Two hosts
# on one machine (network namespaces, a veth pair), a daemon with two
# threads in each:
# - same host (server and client on a's daemon, one process on each
#   thread): perftest RC write/send/read/atomic, UD, SRQ and the pingpongs
#   with data checks pass, and the packets went from one thread to the
#   other (shard_handoffs);
# - across hosts: perftest and rping (rdma_cm: the CM on the first thread,
#   the QPs on either) pass, and the receiving daemon handed over none of
#   the packets its link received: the kernel steered each to its QP's
#   thread; the same on an afpacket device (urnic1, a second veth pair:
#   PACKET_FANOUT), RoCE v2 and v1;
# - UD multicast across hosts (mckey);
# - ibv_xsrq_pingpong: the second process to open the XRC domain moves to
#   the first one's thread (its PD and MR with it) and the log says so;
# - under a busy loop on every core, perftest with 4 QPs still passes.
# Needs root (namespaces): exits 77 (skipped) otherwise. Stops what it
# starts by PID; the namespaces go with their daemons.
#
# usage: threads_test.sh SHIM_DIR URNICD URNIC_CLI [RDMACM_SHIM_DIR]
set -uo pipefail
shim_dir=$1
urnicd=$2
# shellcheck disable=SC2034  # two_hosts.sh's stat reads it
cli=$3
rdmacm_dir=${4:-$shim_dir}

# shellcheck source=two_hosts.sh
source "$(dirname "$0")/two_hosts.sh"
two_hosts_env "$shim_dir" "$rdmacm_dir"

hog_pids=()
cleanup_extra() {
  local p
  for p in "${hog_pids[@]}"; do stop_pid "$p"; done
}

two_hosts_create t 184
# A second veth pair for urnic1, the afpacket device (an AF_PACKET socket
# sees every frame of its interface: it must not share one with urnic0).
raw_a=${veth_a}r
raw_b=${veth_b}r
veth_add "$ns_a" "$raw_a" "$ns_b" "$raw_b" 9000 192.168.77.1/24 192.168.77.2/24 || { fail "ip link add $raw_a"; exit 1; }
for h in a b; do
  printf '{"threads": 2, "devices": [{"name": "urnic0", "link": "udp", "address": "%s"}, {"name": "urnic1", "link": "afpacket", "interface": "%s", "mtu": 4096}]}\n' \
    "$(ip_of "$h")" "$(veth_of "$h")r" > "$rt/$h.json"
  two_hosts_daemon "$h"
done
if grep -q "2 engine threads" "$rt/a.log" && grep -q "2 engine threads" "$rt/b.log"; then
  pass "urnicd in each namespace runs 2 engine threads"
else
  fail "the daemons did not say they run 2 engine threads: $(tail -n 4 "$rt/a.log")"
fi

gid=(-g 1)
x=(-x 1)

# --- same host: the server's process on one thread, the client's on the other
client_host=a pair "ib_write_bw -s 65536 (same host)" "$row" 1 ib_write_bw "${x[@]}" -s 65536 -n 2000
client_host=a pair "ib_send_bw -q 4 -s 4096 (same host)" "$row" 1 ib_send_bw "${x[@]}" -q 4 -s 4096 -n 2000
client_host=a pair "ib_read_bw -s 65536 (same host)" "$row" 1 ib_read_bw "${x[@]}" -s 65536 -n 500
client_host=a pair "ib_atomic_bw (same host)" "$row" 1 ib_atomic_bw "${x[@]}" -n 1000
client_host=a pair "ib_send_lat -e (same host)" "$row" 1 ib_send_lat "${x[@]}" -e -n 500
client_host=a pair "ib_send_bw -c UD -s 2048 (same host)" "$row" 1 ib_send_bw "${x[@]}" -c UD -s 2048 -n 1000
client_host=a pair "ibv_rc_pingpong --chk -s 8000 (same host)" "$pp" 1 ibv_rc_pingpong "${gid[@]}" -c -s 8000 -n 500
client_host=a pair "ibv_ud_pingpong (same host)" "$pp" 1 ibv_ud_pingpong "${gid[@]}" -n 500
client_host=a pair "ibv_srq_pingpong -e (same host)" "$pp" 1 ibv_srq_pingpong "${gid[@]}" -e -n 500
handoffs=$(stat a shard_handoffs)
tx=$(stat a tx_pkts)
drops=$(stat a shard_handoff_drops)
if (( handoffs > 0 && handoffs <= tx )); then
  pass "host a: $handoffs of $tx packets went from one engine thread to the other ($drops dropped at a full ring)"
else
  fail "host a: shard_handoffs $handoffs of tx_pkts $tx (the two processes should be on different threads)"
fi

# --- across hosts: the link delivers each packet to its QP's thread
# dev_stat H DEV COUNTER: DEV's COUNTER in host H.
dev_stat() {
  host "$1" "$cli" stats -d "$2" --json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["counters"][sys.argv[1]])' "$3"
}
# mark DEV / steered DEV WHAT MIN: what host a received on DEV since the
# mark, more than MIN packets, none handed from one thread to the other.
mark() {
  h0=$(dev_stat a "$1" shard_handoffs)
  r0=$(dev_stat a "$1" rx_pkts)
}
steered() {
  local h1 r1
  h1=$(dev_stat a "$1" shard_handoffs)
  r1=$(dev_stat a "$1" rx_pkts)
  if (( r1 - r0 > $3 && h1 == h0 )); then
    pass "host a, $2: $((r1 - r0)) packets from b, each received by its QP's thread (no handoff)"
  else
    fail "host a, $2: $((r1 - r0)) packets from b, $((h1 - h0)) handed from one thread to the other"
  fi
}
mark urnic0
pair "ib_write_bw -q 4 -s 65536 (a <- b)" "$row" 1 ib_write_bw "${x[@]}" -q 4 -s 65536 -n 1000
pair "ib_send_bw -s 4096 (a <- b)" "$row" 1 ib_send_bw "${x[@]}" -s 4096 -n 2000
pair "ib_read_lat (a <- b)" "$row" 1 ib_read_lat "${x[@]}" -n 500
pair "ibv_rc_pingpong --chk (a <- b)" "$pp" 1 ibv_rc_pingpong "${gid[@]}" -c -n 500
steered urnic0 udp 10000

# The afpacket device: its sockets on the two threads form one PACKET_FANOUT
# group whose program sends each frame to its QP's thread (RoCE v2 over
# IPv4 at GID 3, RoCE v1 at GID 2).
# Each side's kernel knows the other's MAC (the afpacket link asks it).
for _ in $(seq 50); do host b ping -c 1 -W 1 192.168.77.1 > /dev/null 2>&1 && break; sleep 0.1; done
ip_udp=$ip_a
ip_a=192.168.77.1
mark urnic1
pair "ib_write_bw -q 4 -s 65536 (afpacket, RoCE v2, a <- b)" "$row" 1 ib_write_bw -d urnic1 -x 3 -q 4 -s 65536 -n 500
pair "ib_send_bw -q 2 -s 4096 (afpacket, RoCE v1, a <- b)" "$row" 1 ib_send_bw -d urnic1 -x 2 -q 2 -s 4096 -n 1000
pair "ibv_rc_pingpong --chk (afpacket, a <- b)" "$pp" 1 ibv_rc_pingpong -d urnic1 -g 3 -c -s 8000 -n 200
steered urnic1 afpacket 5000
ip_a=$ip_udp

# rdma_cm: REQ/REP/RTU and DREQ through the CM (first thread) for QPs on either.
port=$((port + 1))
bg_host a "${run_env[@]}" timeout "$limit" rping -s -a "$ip_a" -p "$port" -V -C 100 -S 4096 > "$rt/rping_s.out" 2>&1
server_pid=$!
wait_listen "$port" "$server_pid"
host b "${run_env[@]}" timeout "$limit" rping -c -a "$ip_a" -p "$port" -V -C 100 -S 4096 > "$rt/rping_c.out" 2>&1
crc=$?
wait "$server_pid"
src=$?
server_pid=
if [[ $crc == 0 && $src == 0 ]]; then pass "rping -V -C 100 across hosts (rdma_cm)"
else fail "rping across hosts: client exit $crc, server exit $src; $(said "$rt/rping_c.out") $(said "$rt/rping_s.out")"; fi

mc_pair "mckey -C 20 across hosts (b -> 239.1.2.5 -> a)" 239.1.2.5 "$ip_a" "$ip_b" -C 20

# --- XRC: ibv_xsrq_pingpong's two processes share the domain of
# /tmp/xrc_domain; the second to open it moves to the first's thread (it
# has a PD and an MR then, no queues) and says so in the log.
client_host=a pair "ibv_xsrq_pingpong -n 500 (same host, one domain)" '^success$' 1 ibv_xsrq_pingpong "${gid[@]}" -n 500
if grep -q "moved to engine thread 0 to share an XRC domain" "$rt/a.log"; then
  pass "the XRC client moved to the server's engine thread"
else
  fail "no move of the XRC client in the log: $(grep -i xrc "$rt/a.log" | tail -n 1)"
fi

# --- a busy loop on every core
for ((i = 0; i < $(nproc); i++)); do
  bash -c 'while :; do :; done' &
  hog_pids+=($!)
done
client_host=a pair "ib_write_bw -q 4 -s 65536 under a CPU hog (same host)" "$row" 1 ib_write_bw "${x[@]}" -q 4 -s 65536 -n 500
pair "ib_send_bw -q 2 -s 4096 under a CPU hog (a <- b)" "$row" 1 ib_send_bw "${x[@]}" -q 2 -s 4096 -n 500
for p in "${hog_pids[@]}"; do stop_pid "$p"; done
hog_pids=()
v=$(stat a retry_exceeded_err)
if [[ $v == 0 ]]; then pass "host a: retry_exceeded_err 0"; else fail "host a: retry_exceeded_err $v"; fi

for h in a b; do
  pid_var=daemon_pid_$h
  if alive "${!pid_var}"; then pass "urnicd in $h still serving"; else fail "urnicd in $h died: $(tail -n 5 "$rt/$h.log")"; fi
done
finish
