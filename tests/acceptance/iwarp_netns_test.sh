#!/usr/bin/env bash
# Acceptance (issue 8), iWARP urnic to urnic across two network namespaces
# joined by a veth pair (MTU 1500): one urnicd per namespace with an iWARP
# device bound to its address, unmodified rdmacm-utils and perftest (-R)
# through the drop-in librdmacm.so.1 / libibverbs.so.1, servers on either
# side. Four daemon configurations: {CRC on, off} x {markers on, off}, set
# differently on the two sides so that each option is honoured both as
# initiator and as responder:
#   CRC on:      a "request", b "off"      (b's requests have C=0: a's
#                                            Replies turn CRC on; a asks)
#   CRC off:     both "off"
#   markers on:  a "require", b "request"  (both directions, either role)
#   markers off: both "off"
# rping and ucmatose of each configuration are captured on the veth and
# decoded (`urnic frame decode`): the MPA Request/Reply flags must say what
# the configuration says, and every FPDU must deframe (markers) with
# crc=ok or crc=off as negotiated. Needs root (namespaces): exits 77 with
# the reason otherwise. Stops what it started by PID; deletes the
# namespaces.
#
# usage: iwarp_netns_test.sh VERBS_SHIM_DIR RDMACM_SHIM_DIR URNICD URNIC_CLI
set -uo pipefail
verbs_dir=$1
rdmacm_dir=$2
urnicd=$3
cli=$4

shim_dir=$verbs_dir
asan_probe="$rdmacm_dir/librdmacm.so.1"
default_limit=60
# shellcheck source=two_hosts.sh
source "$(dirname "$0")/two_hosts.sh"
require_tools "iproute2, rdmacm-utils, perftest, tshark" ip rping ucmatose ib_send_bw ib_write_bw ib_read_lat dumpcap
# shellcheck source=cm_client.sh
source "$(dirname "$0")/cm_client.sh"
two_hosts_env "$verbs_dir" "$rdmacm_dir"

cap_pid=
cleanup_extra() { stop_pid "$cap_pid"; }

# A /24 derived from the PID, in 10.232-247.x.0 (netns_test.sh uses 10.200-231).
veth_mtu=1500 two_hosts_create iw 232
pass "veth $ns_a ($ip_a) <-> $ns_b ($ip_b), MTU 1500"

# start_daemon H CRC MARKERS: urnicd in H with urnic_iw0 on H's address.
start_daemon() {
  local h=$1 crc=$2 markers=$3
  rm -rf "${rt:?}/$h"
  printf '{"devices": [{"name": "urnic_iw0", "transport": "iwarp", "address": "%s", "mpa_crc": "%s", "mpa_markers": "%s"}]}\n' \
    "$(ip_of "$h")" "$crc" "$markers" > "$rt/$h.json"
  two_hosts_daemon "$h"
}

port=$((20000 + tag % 20000))
# pair NAME SERVER_HOST SRE CRE -- SERVER_CMD... -- CLIENT_CMD...:
# cm_client.sh's cm_pair with the server in SERVER_HOST, the client in the
# other one ("@SERVER@": the server's address). A client that finds no
# listener yet (refused, ECONNREFUSED, as by iw_cm) is run again.
cm_retry_on='REJECTED|rror -111|Unable to|Failed to'
pair() { server_host=$2 cm_pair "$1" "${@:3}"; }

row='^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+'
# configuration NAME CRC_A MARKERS_A CRC_B MARKERS_B CRC_ON MARKERS_ON
configuration() {
  local name=$1 crc_on=$6 markers_on=$7
  two_hosts_stop
  start_daemon a "$2" "$3"
  start_daemon b "$4" "$5"
  echo "--- $name: a crc=$2 markers=$3, b crc=$4 markers=$5"
  local pcap=$rt/veth.pcap
  rm -f "$pcap"
  ip netns exec "$ns_b" dumpcap -q -P -i "$veth_b" -f tcp -w "$pcap" > "$rt/dumpcap.log" 2>&1 &
  cap_pid=$!
  wait_until 5 test -s "$pcap"
  port=$((port + 10))
  # The client's own DISCONNECTED event is not waited for by rping (it may
  # exit first and print nothing): its exit status, with -V verifying every
  # ping, is the client's check.
  pair "$name: rping -V -C 50 -S 20000" a 'DISCONNECT' - \
    -- rping -s -a "$ip_a" -p $port -V -C 50 -S 20000 \
    -- rping -c -a @SERVER@ -p $port -V -C 50 -S 20000
  pair "$name: ucmatose -c 2 -C 20" b 'return status 0' 'return status 0' \
    -- ucmatose -p $((port + 1)) -c 2 -C 20 \
    -- ucmatose -s @SERVER@ -p $((port + 1)) -c 2 -C 20
  sleep 0.3
  stop_pid "$cap_pid"
  cap_pid=
  local dec=$rt/decode.txt
  "$cli" frame decode "$pcap" > "$dec" 2>&1
  local want_m=0 want_c=0 crc_word=off
  [[ $markers_on == 1 ]] && want_m=1
  [[ $crc_on == 1 ]] && { want_c=1; crc_word=ok; }
  local reqs reps bad_reps fpdus good_fpdus errors
  reqs=$(grep -c 'MPA_REQ' "$dec")
  reps=$(grep -c 'MPA_REP' "$dec")
  bad_reps=$(grep -o 'MPA_REP rev=[0-9] M=[01] C=[01]' "$dec" | grep -vc "M=$want_m C=$want_c")
  fpdus=$(grep -oE 'crc=[a-z]+[(]?' "$dec" | wc -l)
  good_fpdus=$(grep -oE "crc=$crc_word[(]?" "$dec" | grep -vc '(')
  errors=$(grep -c 'FPDU error\|DDP malformed\|TERMINATE' "$dec")
  if [[ $reqs -ge 3 && $reps -eq $reqs && $bad_reps -eq 0 && $fpdus -gt 100 && $good_fpdus -eq $fpdus && $errors -eq 0 ]]; then
    pass "$name: capture: $reqs MPA exchanges with M=$want_m C=$want_c in the Reply, $fpdus FPDUs all crc=$crc_word, markers deframed"
  else
    fail "$name: capture: $reqs requests, $reps replies ($bad_reps not M=$want_m C=$want_c), $good_fpdus/$fpdus FPDUs crc=$crc_word, $errors errors"
    grep 'MPA_' "$dec" | head -6 | sed 's/^/    /'
    grep 'FPDU error\|malformed' "$dec" | head -3 | sed 's/^/    /'
  fi
  HEAD_START=1.5 server_host=a cm_perftest "$name: ib_send_bw -R" "$row" "$row" @SERVER@ ib_send_bw -d urnic_iw0 -R -n 300 -p $((port + 2))
  HEAD_START=1.5 server_host=b cm_perftest "$name: ib_write_bw -R" "$row" "$row" @SERVER@ ib_write_bw -d urnic_iw0 -R -n 300 -p $((port + 3))
  # A latency server prints no result row.
  HEAD_START=1.5 server_host=a cm_perftest "$name: ib_read_lat -R" 'remote address' "$row" @SERVER@ ib_read_lat -d urnic_iw0 -R -n 300 -p $((port + 4))
  local h terms
  for h in a b; do
    terms=$(host "$h" "$cli" stats -d urnic_iw0 | awk '$1 == "sent_nak_err" {print $2}')
    if [[ ${terms:-1} -eq 0 ]]; then pass "$name: host $h sent no Terminate"
    else fail "$name: host $h sent ${terms:-?} Terminates"; fi
  done
}

configuration "CRC on, markers on" request require off request 1 1
configuration "CRC on, markers off" request off off off 1 0
configuration "CRC off, markers on" off require off request 0 1
configuration "CRC off, markers off" off off off off 0 0

finish
