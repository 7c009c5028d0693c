#!/usr/bin/env bash
# Acceptance (issue 7), rsockets: the unmodified Debian rstream and
# riostream (librdmacm-utils) through urnic's drop-in librdmacm.so.1 and
# libibverbs.so.1, against an auto-started urnicd in a private runtime
# directory. Every stream is an rsocket connection as rdma-core makes it:
# connect data in the CM private data, RDMA writes with immediate into the
# peer's receive buffer, credit updates, iomap announcements and riowrite
# for riostream, disconnect messages. Covered: rstream's default run
# (latency and bandwidth tests, 64 B .. 1 MiB; riostream's only with
# URNIC_RSOCKET_FULL=1, see below), transfer sizes and counts, verify mode
# (-T v; and a negative check that a verifying receiver does reject data
# that was not formatted), asynchronous (rpoll), blocking, non-blocking,
# rdma_getaddrinfo (-T r), small socket buffers (-B), IPv6 loopback, the
# iWARP device (127.0.0.2, immediates as SENDs), udpong (datagram
# rsockets over UD: echo in each mode, one way, IPv6), a connect to a port
# nobody listens on (ECONNREFUSED) and a peer killed mid-stream. Exit statuses and outputs are checked;
# every process started here is stopped by PID, the daemon last. About a
# minute on an idle 2-core machine.
#
# usage: rsocket_test.sh VERBS_SHIM_DIR RDMACM_SHIM_DIR URNICD URNIC_CLI
set -uo pipefail
verbs_dir=$1
rdmacm_dir=$2
urnicd=$3
cli=$4

asan_probe="$rdmacm_dir/librdmacm.so.1"
default_limit=240
# shellcheck source=tests/acceptance/common.sh
source "$(dirname "$0")/common.sh"
require_tools rdmacm-utils rstream riostream udpong
one_host_setup rsocket "$urnicd" "$verbs_dir:$rdmacm_dir"
for prog in rstream riostream; do
  lib=$(ldd "$(command -v $prog)" | awk '/librdmacm.so.1/ {print $3}')
  if [[ $lib == "$rdmacm_dir"/* ]]; then pass "$prog loads $lib"
  else fail "$prog loads ${lib:-no librdmacm} instead of $rdmacm_dir/librdmacm.so.1"; fi
done

# shellcheck source=cm_client.sh
source "$(dirname "$0")/cm_client.sh"
# A client that finds no listener yet: REJ, "Connection refused".
cm_retry_on='Connection refused'

# [EXPECT_FAIL=REGEX] pair NAME SERVER_REGEX CLIENT_REGEX -- SERVER_CMD... -- CLIENT_CMD...
# Starts the server, then the client; a client that finds no listener yet
# is run again while the server lives (cm_client_retry). Both
# must exit 0 and their outputs match the regexes; with EXPECT_FAIL, the
# client must fail instead, printing REGEX.
pair() {
  local name=$1 sre=$2 cre=$3 scmd ccmd
  shift 3
  cm_split_cmds "$@"
  local out_s=$rt/server.out out_c=$rt/client.out
  local t0
  t0=$(date +%s%N)
  "${run_env[@]}" timeout "$limit" "${scmd[@]}" > "$out_s" 2>&1 &
  server_pid=$!
  sleep 0.5
  local crc
  cm_client_retry "$out_c" "$server_pid" "${run_env[@]}" timeout "$limit" "${ccmd[@]}"
  crc=$?
  local src
  if [[ -n ${EXPECT_FAIL:-} ]]; then
    stop_pid "$server_pid"
    server_pid=
    if [[ $crc -ne 0 && $crc -ne 124 ]] && grep -qE "$EXPECT_FAIL" "$out_c"; then
      pass "$name (client exit $crc: $(grep -oE "$EXPECT_FAIL" "$out_c" | head -1))"
    else
      fail "$name: client exit $crc"
      sed 's/^/    client: /' "$out_c" | tail -8
    fi
    return
  fi
  wait "$server_pid"
  src=$?
  server_pid=
  local ms=$((($(date +%s%N) - t0) / 1000000))
  if [[ $crc -eq 0 && $src -eq 0 ]] && grep -qE "$sre" "$out_s" && grep -qE "$cre" "$out_c"; then
    pass "$name: $(grep -E "$cre" "$out_c" | tail -1 | awk '{print $NF " us/xfer, " $(NF-1) " Gb/s"}') (${ms} ms, client attempt $cm_client_tries)"
  else
    fail "$name: server exit $src, client exit $crc"
    sed 's/^/    client: /' "$out_c" | tail -12
    sed 's/^/    server: /' "$out_s" | tail -12
  fi
}

p=$((20000 + ($$ % 20000)))
row() { echo "^$1 +"; }  # a result row of rstream/riostream: name, bytes, xfers, ...
custom=$(row custom)
# rs NAME PROG N [@ADDR] ARGS...: pair NAME, $custom rows on both sides:
# PROG [-b ADDR] -p $((p + N)) ARGS the server, PROG -s ADDR (default
# 127.0.0.1) -p $((p + N)) ARGS the client.
rs() {
  local name=$1 prog=$2 port=$((p + $3)) addr=127.0.0.1 bind=()
  shift 3
  [[ $1 == @* ]] && { addr=${1#@}; bind=(-b "$addr"); shift; }
  pair "$name" "$custom" "$custom" -- "$prog" "${bind[@]}" -p "$port" "$@" -- "$prog" -s "$addr" -p "$port" "$@"
}

# rstream: the default run (a latency and a bandwidth connection; 64 B to
# 1 MiB, non-blocking calls).
pair "rstream (default run)" "$(row 1m_bw)" "$(row 1m_bw)" \
  -- rstream -p $p \
  -- rstream -s 127.0.0.1 -p $p
rs "rstream -S 1000000 -C 50 -T v" rstream 1 -S 1000000 -C 50 -T v
rs "rstream -S 100 -C 20000 -T v" rstream 2 -S 100 -C 20000 -T v
rs "rstream -T a -T v (rpoll) -S 65536 -C 300" rstream 3 -T a -T v -S 65536 -C 300
rs "rstream -T b -T v (blocking) -S 12345 -C 500 -I 2" rstream 4 -T b -T v -S 12345 -C 500 -I 2
rs "rstream -T n -T v (non-blocking) -S 4096 -C 1 -I 2000 (ping-pong)" rstream 5 -T n -T v -S 4096 -C 1 -I 2000
rs "rstream -T r -T v (rdma_getaddrinfo)" rstream 6 -T r -T v -S 30000 -C 200
# Small socket buffers: a 16 KiB receive buffer, so credits and buffer
# grants go back and forth many times per transfer.
rs "rstream -B 8192 -T v -S 100000 -C 100 (small buffers)" rstream 7 -B 8192 -T v -S 100000 -C 100
rs "rstream over IPv6 loopback (::1) -T v" rstream 8 @::1 -T v -S 10000 -C 200
# -T f: rstream forks and then uses TCP sockets, not rsockets (its own
# design); it still runs with urnic's libraries loaded.
rs "rstream -T f (fork; TCP sockets by rstream's design)" rstream 9 -T f -S 10000 -C 100

# Verify mode really compares bytes: a receiver with -T v fails on data the
# sender did not format (the sender runs without -T v).
EXPECT_FAIL="data verification failed byte [0-9]+" pair "rstream -T v against an unformatted sender" "" "" \
  -- rstream -p $((p + 10)) -S 10000 -C 10 \
  -- rstream -s 127.0.0.1 -p $((p + 10)) -S 10000 -C 10 -T v

# riostream: riomap'ped buffers written with riowrite, then a message.
# Its receiver spins on a byte of the mapped buffer without calling the
# library, competing with urnicd for the CPU: the default run (100k 64-byte
# round trips) takes 1-2 minutes on an idle 2-core host and times out when
# other jobs load it, so it runs only with URNIC_RSOCKET_FULL=1; otherwise a
# shorter run of its first size stands in.
if [[ -n ${URNIC_RSOCKET_FULL:-} ]]; then
  pair "riostream (default run)" "$(row 1m_bw)" "$(row 1m_bw)" \
    -- riostream -p $((p + 11)) \
    -- riostream -s 127.0.0.1 -p $((p + 11))
else
  rs "riostream -S 64 -C 1 -I 1000 (the default run's 64_lat, shorter)" riostream 11 -S 64 -C 1 -I 1000
fi
rs "riostream -S 1000000 -C 20 -T v" riostream 12 -S 1000000 -C 20 -T v
rs "riostream -T a -T v -S 65536 -C 100" riostream 13 -T a -T v -S 65536 -C 100
rs "riostream -T b -T v -S 5000 -C 300" riostream 14 -T b -T v -S 5000 -C 300
rs "riostream -T n -T v -S 100 -C 1 -I 200" riostream 15 -T n -T v -S 100 -C 1 -I 200
rs "riostream over IPv6 loopback (::1) -T v" riostream 16 @::1 -T v -S 20000 -C 50

# udpong: datagram rsockets (UD QPs; a peer's first datagram over UDP
# until its QP is known, rdma-core's protocol). Its server never ends: it
# is stopped (by PID) once the client has passed. Echo runs (a reply per
# datagram; a reply missing for 1 ms is sent again, udpong's own rule) in
# each mode, a one-way run (the server reports how many arrived: UD may
# drop what finds no receive posted, as UDP), and IPv6. The default run
# (every size, 64 B to 1.5 KiB, 20,000 round trips each; ~30 s idle) only
# with URNIC_RSOCKET_FULL=1.
udp_pair() {
  local name=$1 cre=$2 scmd ccmd
  shift 2
  cm_split_cmds "$@"
  local out_s=$rt/udp_server.out out_c=$rt/udp_client.out t0
  "${run_env[@]}" timeout "$limit" "${scmd[@]}" > "$out_s" 2>&1 &
  server_pid=$!
  sleep 0.3
  t0=$(date +%s%N)
  "${run_env[@]}" timeout "$limit" "${ccmd[@]}" > "$out_c" 2>&1
  local crc=$? ms=$((($(date +%s%N) - t0) / 1000000))
  local alive_after=0
  alive "$server_pid" && alive_after=1
  stop_pid "$server_pid"
  server_pid=
  if [[ $crc -eq 0 && $alive_after -eq 1 ]] && grep -qE "$cre" "$out_c"; then
    pass "$name: $(grep -E "$cre" "$out_c" | tail -1 | tr -s ' ') (${ms} ms)"
  else
    fail "$name: client exit $crc, server $( ((alive_after)) && echo running || echo ended)"
    sed 's/^/    client: /' "$out_c" | tail -8
    sed 's/^/    server: /' "$out_s" | tail -8
  fi
}
if [[ -n ${URNIC_RSOCKET_FULL:-} ]]; then
  udp_pair "udpong (default run)" "$(row 1.5k_bw)" \
    -- udpong -b 127.0.0.1 -p $((p + 30)) \
    -- udpong -s 127.0.0.1 -p $((p + 30))
fi
udp_pair "udpong -T e -S 1024 -C 500 (echo)" "$custom +1k +1k " \
  -- udpong -b 127.0.0.1 -p $((p + 31)) \
  -- udpong -s 127.0.0.1 -p $((p + 31)) -T e -S 1024 -C 500
udp_pair "udpong -T e -T a -S 64 -C 500 (echo, rpoll)" "$custom +64 +1k " \
  -- udpong -b 127.0.0.1 -p $((p + 32)) -T a \
  -- udpong -s 127.0.0.1 -p $((p + 32)) -T e -T a -S 64 -C 500
udp_pair "udpong -T e -T b -S 1500 -C 300 (echo, blocking)" "$custom +1.4k +600 " \
  -- udpong -b 127.0.0.1 -p $((p + 33)) -T b \
  -- udpong -s 127.0.0.1 -p $((p + 33)) -T e -T b -S 1500 -C 300
udp_pair "udpong -S 512 -C 5000 (one way; the server's count)" "$custom +512 +[0-9.]+k? " \
  -- udpong -b 127.0.0.1 -p $((p + 34)) \
  -- udpong -s 127.0.0.1 -p $((p + 34)) -S 512 -C 5000
udp_pair "udpong over IPv6 loopback (::1) -T e -S 256 -C 300" "$custom +256 +600 " \
  -- udpong -b ::1 -p $((p + 35)) \
  -- udpong -s ::1 -p $((p + 35)) -T e -S 256 -C 300

# The iWARP device (urnic_iw0 on 127.0.0.2): no write-with-immediate, so
# every immediate travels as a 4-byte SEND after its write (rdma-core's
# mode for iWARP). The device's counters must show the traffic.
stat_of() { "$cli" stats -d urnic_iw0 | awk -v k="$1" '$1 == k {print $2}'; }
before=$(stat_of wqes_posted)
rs "rstream over iWARP (127.0.0.2) -T v" rstream 17 @127.0.0.2 -T v -S 50000 -C 200
rs "rstream over iWARP (127.0.0.2) -T a" rstream 18 @127.0.0.2 -T a -S 1000 -C 1 -I 500
rs "riostream over iWARP (127.0.0.2) -T v" riostream 19 @127.0.0.2 -T v -S 50000 -C 50
after=$(stat_of wqes_posted)
if [[ -n $before && -n $after && $after -gt $((before + 1000)) ]]; then
  pass "urnic_iw0 carried the iWARP streams (wqes_posted $before -> $after)"
else
  fail "urnic_iw0 wqes_posted $before -> $after"
fi

# A connect to a port nobody listens on: REJ, ECONNREFUSED at once. rstream
# connects non-blocking: rconnect fails with it if the REJ came back before
# rconnect returned, else rconnect says EINPROGRESS and rpoll then reports
# it (both seen; the kernel's rsockets give the second).
out=$rt/refused.out
start=$(date +%s%N)
"${run_env[@]}" timeout 20 rstream -s 127.0.0.1 -p $((p + 20)) -S 100 -C 1 > "$out" 2>&1
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
if [[ $rc -ne 0 && $rc -ne 124 ]] && grep -qE "(rconnect|rpoll): Connection refused" "$out"; then
  pass "rstream to an unused port: refused in $ms ms (exit $rc)"
else
  fail "rstream to an unused port: exit $rc after $ms ms"
  sed 's/^/    /' "$out" | tail -5
fi

# A peer that dies mid-stream (SIGKILL: no disconnect message; its
# process's ids are destroyed, so the CM sends a DREQ): the survivor's
# blocking (-T b) or non-blocking (-T n) rrecv fails with ECONNRESET at
# once instead of hanging, and an rpoll-driven one (-T a) gets POLLERR.
port=$((p + 21))
for mode in b a n; do
  "${run_env[@]}" rstream -p $port -T $mode -S 1000 -C 1 -I 100000000 > "$rt/victim.out" 2>&1 &
  victim=$!
  server_pid=$victim  # stopped by cleanup if the script ends early
  sleep 0.5
  for _ in $(seq 20); do
    "${run_env[@]}" timeout "$limit" rstream -s 127.0.0.1 -p $port -T $mode -S 1000 -C 1 -I 100000000 \
      > "$rt/survivor.out" 2>&1 &
    survivor=$!
    sleep 2
    # Still running: connected and streaming. Refused: the victim was not
    # listening yet; try again.
    alive "$survivor" && break
    grep -q "Connection refused" "$rt/survivor.out" || break
  done
  kill -KILL "$victim" 2>/dev/null
  start=$(date +%s%N)
  wait "$survivor"
  rc=$?
  wait "$victim" 2>/dev/null
  server_pid=
  ms=$((($(date +%s%N) - start) / 1000000))
  ok=0
  if [[ $rc -ne 0 && $rc -ne 124 ]]; then
    # -T b: the survivor may be in rrecv (ECONNRESET) or in rsend (EPIPE:
    # writes after the peer's disconnect) when the reset comes.
    if [[ $mode != b ]] || grep -qE "rrecv: Connection reset by peer|rsend: (Broken pipe|Connection reset by peer)" "$rt/survivor.out"; then ok=1; fi
  fi
  if [[ $ok -eq 1 ]]; then
    pass "rstream -T $mode whose peer is killed mid-stream: exits $rc after $ms ms"
  else
    fail "rstream -T $mode whose peer is killed mid-stream: exit $rc after $ms ms"
    sed 's/^/    /' "$rt/survivor.out" | tail -5
  fi
  port=$((port + 1))
done

d=$(daemon_pid) || true
if alive "$d"; then pass "urnicd (pid $d) still serving"
else fail "urnicd is gone"; fi

finish
