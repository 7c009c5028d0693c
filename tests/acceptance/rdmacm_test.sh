#!/usr/bin/env bash
# Acceptance (issue 7), the RDMA connection manager: unmodified Debian
# rdmacm-utils and perftest (-R: connections made by rdma_cm) on one host over
# urnic0 through the drop-in librdmacm.so.1 and libibverbs.so.1, with an
# auto-started urnicd in a private runtime directory. Every connection is a
# real IBTA CM exchange (REQ/REP/RTU/DREQ/DREP, SIDR for UD) hairpinned through
# the daemon's QP1. Server and client exit statuses and outputs are checked;
# a connect to a port nobody listens on must be rejected (REJ reason 8,
# RDMA_CM_EVENT_REJECTED). Every process started here is stopped by PID, the
# daemon last.
#
# With URNIC_CLI, the CM's counters in `urnic stats --json` must show the
# MADs both ways and the REJ.
#
# usage: rdmacm_test.sh VERBS_SHIM_DIR RDMACM_SHIM_DIR URNICD [URNIC_CLI]
set -uo pipefail
verbs_dir=$1
rdmacm_dir=$2
urnicd=$3
cli=${4:-}
# shellcheck source=cm_client.sh
source "$(dirname "$0")/cm_client.sh"

asan_probe="$rdmacm_dir/librdmacm.so.1"
default_limit=60
# shellcheck source=tests/acceptance/common.sh
source "$(dirname "$0")/common.sh"
require_tools "rdmacm-utils, perftest" rping ucmatose udaddy mckey rdma_server rdma_client rdma_xserver rdma_xclient ib_send_bw ib_write_lat ib_read_bw ib_write_bw
one_host_setup rdmacm "$urnicd" "$verbs_dir:$rdmacm_dir"
# The programs must load urnic's libraries, not rdma-core's.
for prog in rping ucmatose udaddy rdma_server ib_send_bw; do
  lib=$(ldd "$(command -v $prog)" | awk '/librdmacm.so.1/ {print $3}')
  if [[ $lib == "$rdmacm_dir"/* ]]; then pass "$prog loads $lib"
  else fail "$prog loads ${lib:-no librdmacm} instead of $rdmacm_dir/librdmacm.so.1"; fi
done

row='^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+'
p=$((20000 + ($$ % 20000)))

# rping: RC send + RDMA read/write ping-pong with data verification.
# The client's exit status is the check (-V: 1 on a data mismatch): its
# "client DISCONNECT EVENT" line comes from rping's CM thread, which the
# main thread may outrun to exit after its own rdma_disconnect.
cm_pair "rping -V -C 100 -S 65535" 'DISCONNECT' - \
  -- rping -s -a 127.0.0.1 -p $p -V -C 100 -S 65535 \
  -- rping -c -a 127.0.0.1 -p $p -V -C 100 -S 65535
cm_pair "rping -v -C 100 -S 4096" 'server ping data: rdma-ping-99:' 'ping data: rdma-ping-99:' \
  -- rping -s -a 127.0.0.1 -p $((p + 1)) -v -C 100 -S 4096 \
  -- rping -c -a 127.0.0.1 -p $((p + 1)) -v -C 100 -S 4096
cm_pair "rping server on the wildcard, -C 20" 'DISCONNECT' 'ping data: rdma-ping-19:' \
  -- rping -s -a 0.0.0.0 -p $((p + 2)) -v -C 20 \
  -- rping -c -a 127.0.0.1 -p $((p + 2)) -v -C 20
cm_pair "rping over IPv6 loopback (::1)" 'DISCONNECT' 'ping data: rdma-ping-9:' \
  -- rping -s -a ::1 -p $((p + 11)) -v -C 10 \
  -- rping -c -a ::1 -p $((p + 11)) -v -C 10
# -q: the program creates and moves its own QP (rdma_init_qp_attr) and
# finishes the handshake with rdma_establish.
cm_pair "rping -q (self-managed QP)" 'DISCONNECT' 'ping data: rdma-ping-9:' \
  -- rping -s -q -a 127.0.0.1 -p $((p + 12)) -v -C 10 \
  -- rping -c -q -a 127.0.0.1 -p $((p + 12)) -v -C 10
# ucmatose: several RC connections on one event channel, sends both ways.
cm_pair "ucmatose -c 4 -C 50" 'return status 0' 'return status 0' \
  -- ucmatose -p $((p + 3)) -c 4 -C 50 \
  -- ucmatose -s 127.0.0.1 -p $((p + 3)) -c 4 -C 50
cm_pair "ucmatose -c 1 -C 200 -S 4000" 'return status 0' 'return status 0' \
  -- ucmatose -p $((p + 4)) -c 1 -C 200 -S 4000 \
  -- ucmatose -s 127.0.0.1 -p $((p + 4)) -c 1 -C 200 -S 4000
# udaddy: UD services resolved with SIDR_REQ/SIDR_REP (its port is fixed).
cm_pair "udaddy -c 2 -C 20" 'return status 0' 'return status 0' \
  -- udaddy -c 2 -C 20 \
  -- udaddy -s 127.0.0.1 -c 2 -C 20
# mckey: UD multicast. Both join 239.1.2.3 (RDMA_CM_EVENT_MULTICAST_JOIN,
# the library attaches the QP); the sender's datagrams to QPN 0xFFFFFF reach
# the receiver's QP, which exits after 20. The receiver needs its head start:
# multicast is unreliable, and a datagram sent before it has joined is gone.
HEAD_START=1 cm_pair "mckey -C 20 (UD multicast)" 'return status 0' 'return status 0' \
  -- mckey -m 239.1.2.3 -b 127.0.0.1 -C 20 \
  -- mckey -m 239.1.2.3 -b 127.0.0.1 -s -C 20
HEAD_START=1 cm_pair "mckey -c 2 -C 10 -S 1000 (two ids, two QPs each side)" 'return status 0' 'return status 0' \
  -- mckey -m 239.1.2.4 -b 127.0.0.1 -c 2 -C 10 -S 1000 \
  -- mckey -m 239.1.2.4 -b 127.0.0.1 -s -c 2 -C 10 -S 1000
# rdma_server / rdma_client: rdma_getaddrinfo, rdma_create_ep, rdma_get_request
# and the rdma_verbs.h inlines over the CQs and channels the library made.
cm_pair "rdma_server / rdma_client" 'rdma_server: end 0' 'rdma_client: end 0' \
  -- rdma_server -p $((p + 5)) \
  -- rdma_client -s 127.0.0.1 -p $((p + 5))
# rdma_xserver / rdma_xclient: XRC through rdma_cm (issue 19): an XRC
# receive (target) endpoint with its SRQ on the server, an XRC send
# (initiator) endpoint on the client, connected by rdma_cm.
cm_pair "rdma_xserver / rdma_xclient (XRC)" 'rdma_xserver: end 0' 'rdma_xclient: end 0' \
  -- rdma_xserver -p $((p + 14)) \
  -- rdma_xclient -s 127.0.0.1 -p $((p + 14))
# perftest with -R: both the exchange and the test QPs connected by rdma_cm.
cm_perftest "ib_send_bw -R" "$row" "$row" 127.0.0.1 ib_send_bw -R -n 500 -p $((p + 6))
cm_perftest "ib_write_lat -R" "$row" "$row" 127.0.0.1 ib_write_lat -R -n 500 -p $((p + 7))
cm_perftest "ib_read_bw -R" "$row" "$row" 127.0.0.1 ib_read_bw -R -n 500 -p $((p + 8))
cm_perftest "ib_write_bw -R -q 2" "$row" "$row" 127.0.0.1 ib_write_bw -R -q 2 -n 500 -p $((p + 9))
cm_perftest "ib_send_bw -R -c UD (SIDR)" "$row" "$row" 127.0.0.1 ib_send_bw -R -c UD -n 200 -p $((p + 13))

# A REQ to a port nobody listens on: REJ (reason 8, invalid service ID), so
# rping fails at once with RDMA_CM_EVENT_REJECTED, as over the kernel.
out=$rt/reject.out
start=$(date +%s%N)
"${run_env[@]}" timeout 20 rping -c -a 127.0.0.1 -p $((p + 10)) -C 1 > "$out" 2>&1
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
if [[ $rc -ne 0 && $rc -ne 124 ]] && grep -q "RDMA_CM_EVENT_REJECTED, error 8" "$out"; then
  pass "rping to an unused port: rejected in $ms ms (exit $rc)"
else
  fail "rping to an unused port: exit $rc after $ms ms"
  sed 's/^/    /' "$out" | tail -5
fi

if [[ -n $cli ]]; then
  cm=$("$cli" stats -d urnic0 --json | python3 -c '
import json, sys
c = json.load(sys.stdin)["cm"]
print(c["mads_received"], c["mads_sent"], c["rej_sent"], c["mads_dropped"])' 2>&1)
  read -r received sent rej dropped <<< "$cm"
  # One daemon is both ends: it sent and received MADs, and the REJ.
  if [[ $received =~ ^[0-9]+$ ]] && ((received > 0 && sent > 0 && rej >= 1 && dropped == 0)); then
    pass "urnic stats: cm mads_received $received, mads_sent $sent, rej_sent $rej, mads_dropped 0"
  else
    fail "urnic stats: cm counters: $cm"
  fi
fi

d=$(daemon_pid) || true
if alive "$d"; then pass "urnicd (pid $d) still serving"
else fail "urnicd is gone"; fi

finish
