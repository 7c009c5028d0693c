#!/usr/bin/env bash
# Acceptance (issue 8), iWARP through the connection manager: unmodified
# Debian rdmacm-utils and perftest (-R) on one host over urnic_iw0
# (127.0.0.2) through the drop-in librdmacm.so.1 and libibverbs.so.1, with an
# auto-started urnicd in a private runtime directory. Every connection is a
# TCP connection of the host stack with the MPA Request/Reply exchange, then
# RDMAP/DDP in FPDUs; the RFC 7306 atomics (ib_atomic_bw/lat -R, both -A
# types) run once the two urnic ends negotiated them. Server and client exit statuses and outputs are
# checked, the traffic must have gone through urnic_iw0 and not urnic0
# (`urnic stats`), and a connect to a port nobody listens on must be refused
# (RDMA_CM_EVENT_REJECTED, ECONNREFUSED, as with the kernel's iw_cm). Every
# process started here is stopped by PID, the daemon last.
#
# usage: iwarp_cm_test.sh VERBS_SHIM_DIR RDMACM_SHIM_DIR URNICD CLI
set -uo pipefail
verbs_dir=$1
rdmacm_dir=$2
urnicd=$3
cli=$4
# shellcheck source=cm_client.sh
source "$(dirname "$0")/cm_client.sh"
# A client that finds no listener yet is refused (ECONNREFUSED), as by iw_cm.
cm_retry_on='REJECTED|rror -111|Unable to|Failed to'

asan_probe="$rdmacm_dir/librdmacm.so.1"
default_limit=60
# shellcheck source=tests/acceptance/common.sh
source "$(dirname "$0")/common.sh"
require_tools "rdmacm-utils, perftest, ibverbs-utils" rping ucmatose rdma_server rdma_client ib_send_bw ib_write_bw ib_read_bw ib_atomic_bw ib_atomic_lat ibv_devinfo
one_host_setup iwarp "$urnicd" "$verbs_dir:$rdmacm_dir"

stat_of() { "$cli" stats -d "$1" | awk -v k="$2" '$1 == k {print $2}'; }

row='^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+'
a=127.0.0.2
p=$((20000 + ($$ % 20000)))

# The commands of the issue: rping with data verification, 100 pings.
# The client's check is its exit status (-V verifies every ping): rping does
# not wait for its own DISCONNECTED event, so it may exit before printing it.
cm_pair "rping -s -a $a / rping -c -a $a -V -C 100" 'DISCONNECT' - \
  -- rping -s -a $a -p $p -V -C 100 \
  -- rping -c -a $a -p $p -V -C 100
cm_pair "rping -v -C 100 -S 65535 (FPDUs split at the segment size)" 'server ping data: rdma-ping-99:' \
  'ping data: rdma-ping-99:' \
  -- rping -s -a $a -p $((p + 1)) -v -C 100 -S 65535 \
  -- rping -c -a $a -p $((p + 1)) -v -C 100 -S 65535
cm_pair "rping server on the wildcard" 'DISCONNECT' 'ping data: rdma-ping-19:' \
  -- rping -s -a 0.0.0.0 -p $((p + 2)) -v -C 20 \
  -- rping -c -a $a -p $((p + 2)) -v -C 20
cm_pair "rping -q (self-managed QP, rdma_establish)" 'DISCONNECT' 'ping data: rdma-ping-9:' \
  -- rping -s -q -a $a -p $((p + 3)) -v -C 10 \
  -- rping -c -q -a $a -p $((p + 3)) -v -C 10
cm_pair "ucmatose -c 4 -C 50" 'return status 0' 'return status 0' \
  -- ucmatose -p $((p + 4)) -c 4 -C 50 \
  -- ucmatose -s $a -p $((p + 4)) -c 4 -C 50
cm_pair "rdma_server / rdma_client" 'rdma_server: end 0' 'rdma_client: end 0' \
  -- rdma_server -p $((p + 5)) \
  -- rdma_client -s $a -p $((p + 5))
cm_perftest "ib_send_bw -R" "$row" "$row" $a ib_send_bw -d urnic_iw0 -R -n 500 -p $((p + 6))
# An SRQ behind the iWARP QPs (both sides' receives come from it).
cm_perftest "ib_send_bw -R --use-srq" "$row" "$row" $a ib_send_bw -d urnic_iw0 -R --use-srq -n 500 -p $((p + 9))
cm_perftest "ib_write_bw -R" "$row" "$row" $a ib_write_bw -d urnic_iw0 -R -n 500 -p $((p + 7))
cm_perftest "ib_read_bw -R" "$row" "$row" $a ib_read_bw -d urnic_iw0 -R -n 500 -p $((p + 8))
if grep -q 'Transport type : IW' "$rt/client.out"; then pass "perftest reports Transport type IW"
else fail "perftest does not report the iWARP transport"; fi

# RFC 7306 between two urnic peers (negotiated in the MPA exchange): the
# device reports atomics, and perftest's atomic tests run over urnic_iw0.
# (With the ASan shim ibv_devinfo needs the runtime preloaded; not a pipe into
# grep -q, which can SIGPIPE ibv_devinfo and fail the pipeline.)
devinfo=$("${run_env[@]}" ibv_devinfo -d urnic_iw0 -v 2>&1)
if grep -q 'atomic_cap:.*ATOMIC_HCA' <<< "$devinfo"; then
  pass "urnic_iw0 reports atomic_cap ATOMIC_HCA"
else
  fail "urnic_iw0 does not report ATOMIC_HCA: $(grep -E 'atomic_cap|rror' <<< "$devinfo" | head -n 3 | tr '\n' ' ')"
fi
q=$((p + 11))
for at in FETCH_AND_ADD CMP_AND_SWAP; do
  cm_perftest "ib_atomic_bw -R -A $at" "$row" "$row" $a ib_atomic_bw -d urnic_iw0 -R -A $at -n 500 -p $q
  # A latency test's server prints no results, only the connection.
  cm_perftest "ib_atomic_lat -R -A $at" 'remote address' "$row" $a ib_atomic_lat -d urnic_iw0 -R -A $at -n 500 -p $((q + 1))
  q=$((q + 2))
done

# No listener: the TCP connect is refused, rping sees REJECTED at once.
out=$rt/reject.out
"${run_env[@]}" timeout 20 rping -c -a $a -p $((p + 10)) -C 1 > "$out" 2>&1
rc=$?
if [[ $rc -ne 0 && $rc -ne 124 ]] && grep -q "RDMA_CM_EVENT_REJECTED, error -111" "$out"; then
  pass "rping to an unused port: rejected (connection refused, exit $rc)"
else
  fail "rping to an unused port: exit $rc"
  sed 's/^/    /' "$out" | tail -5
fi

# All of it went over urnic_iw0 (FPDUs), none over urnic0.
iw_sent=$(stat_of urnic_iw0 sent_pkts)
roce_posted=$(stat_of urnic0 wqes_posted)
if [[ ${iw_sent:-0} -gt 1000 && ${roce_posted:-1} -eq 0 ]]; then
  pass "traffic on urnic_iw0 ($iw_sent FPDUs sent), none on urnic0"
else
  fail "urnic_iw0 sent ${iw_sent:-?} FPDUs, urnic0 took ${roce_posted:-?} WQEs"
fi
terms=$(stat_of urnic_iw0 sent_nak_err)
if [[ ${terms:-1} -eq 0 ]]; then pass "no Terminate sent"; else fail "$terms Terminates sent"; fi

# The iWARP stream counters, in the JSON output too. Both ends are on
# urnic_iw0: every FPDU taken (rcvd_pkts, once each, also a Send that
# waited for its receive WQE) was deframed (iw_fpdus_rcvd) and sent
# (iw_fpdus_sent); FPDUs that reach a QP already closed are not deframed.
"$cli" stats -d urnic_iw0 --json > "$rt/stats.json"
iwj() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["counters"][sys.argv[2]])' "$rt/stats.json" "$1" 2>/dev/null; }
fs=$(iwj iw_fpdus_sent) fr=$(iwj iw_fpdus_rcvd) rp=$(iwj rcvd_pkts) sp=$(iwj sent_pkts)
bs=$(iwj iw_bytes_sent) br=$(iwj iw_bytes_rcvd)
if [[ -n $fs && -n $fr && -n $rp && $fs -eq ${sp:-x} && $fr -le $fs && $rp -le $fr && $fr -gt $((fs * 3 / 4)) &&
      ${bs:-0} -gt 0 && ${br:-0} -gt 0 && ${br:-0} -le ${bs:-0} ]]; then
  pass "stream counters: $fs FPDUs sent, $fr deframed, $rp taken; $bs bytes sent, $br received"
else
  fail "stream counters: iw_fpdus_sent ${fs:-?} (sent_pkts ${sp:-?}), iw_fpdus_rcvd ${fr:-?}, rcvd_pkts ${rp:-?}, bytes ${bs:-?}/${br:-?}"
fi
errs="$(iwj iw_crc_errors) $(iwj iw_terminates_sent) $(iwj iw_terminates_rcvd) $(iwj iw_mpa_rejects_sent) $(iwj iw_mpa_rejects_rcvd)"
if [[ $errs == "0 0 0 0 0" ]]; then
  pass "no CRC error, Terminate or MPA Reject (the unused port was a TCP refusal)"
else
  fail "iw_crc_errors, iw_terminates_sent/rcvd, iw_mpa_rejects_sent/rcvd: $errs"
fi
if [[ $(stat_of urnic_iw0 iw_fpdus_sent) == "$fs" ]]; then pass "urnic stats (text) shows iw_fpdus_sent"
else fail "urnic stats (text): no iw_fpdus_sent $fs"; fi

d=$(daemon_pid) || true
if alive "$d"; then pass "urnicd (pid $d) still serving"
else fail "urnicd is gone"; fi

finish
