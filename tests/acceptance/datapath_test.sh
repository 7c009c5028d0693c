#!/usr/bin/env bash
# Acceptance (issue 4), the data path: unmodified Debian ibverbs-utils and
# perftest programs move real data through urnicd on one host, zero
# configuration. Server and client are two processes on 127.0.0.1, both on the
# default device urnic0 (GID index 1 = ::ffff:127.0.0.1); the first program
# starts urnicd in a private runtime directory. Each pair's exit status and
# output are checked (the pingpongs validate the data they receive). Every
# process this script starts is stopped by PID, the daemon last; at the end
# the idle daemon must be asleep (~0 % CPU).
#
# usage: datapath_test.sh SHIM_DIR URNICD GROUP
#   GROUP: smoke | pingpong | perftest-lat | perftest-bw
#   (smoke: one short pair per family, for tools/urnic test --quick)
set -uo pipefail
shim_dir=$1
urnicd=$2
group=$3

asan_probe="$shim_dir/libibverbs.so.1"
# shellcheck source=tests/acceptance/common.sh
source "$(dirname "$0")/common.sh"
one_host_setup datapath "$urnicd" "$shim_dir"

pp='[0-9]+ iters in [0-9.]+ seconds'
# perftest result rows: "#bytes #iterations ..." followed by numbers.
row='^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+'
gid=(-g 1)
x=(-x 1)

case $group in
  smoke)
    pair "ibv_rc_pingpong -n 200" "$pp" 1 ibv_rc_pingpong "${gid[@]}" -n 200
    pair "ibv_ud_pingpong -n 200 -e" "$pp" 1 ibv_ud_pingpong "${gid[@]}" -n 200 -e
    pair "ib_write_bw -s 65536 -n 500" "$row" 1 ib_write_bw "${x[@]}" -s 65536 -n 500
    pair "ib_read_lat -s 4096 -n 200" "$row" 1 ib_read_lat "${x[@]}" -s 4096 -n 200
    pair "ib_atomic_bw -n 200" "$row" 1 ib_atomic_bw "${x[@]}" -n 200
    ;;
  pingpong)
    pair "ibv_rc_pingpong -n 1000" "$pp" 1 ibv_rc_pingpong "${gid[@]}" -n 1000
    pair "ibv_rc_pingpong -s 65536 -n 1000 -e" "$pp" 1 ibv_rc_pingpong "${gid[@]}" -s 65536 -n 1000 -e
    pair "ibv_rc_pingpong -s 65536 -n 100" "$pp" 1 ibv_rc_pingpong "${gid[@]}" -s 65536 -n 100
    pair "ibv_rc_pingpong -s 1 -n 10000 -e" "$pp" 1 ibv_rc_pingpong "${gid[@]}" -s 1 -n 10000 -e
    pair "ibv_uc_pingpong -n 200" "$pp" 1 ibv_uc_pingpong "${gid[@]}" -n 200
    pair "ibv_uc_pingpong -s 65536 -n 1000 -e" "$pp" 1 ibv_uc_pingpong "${gid[@]}" -s 65536 -n 1000 -e
    pair "ibv_ud_pingpong -n 1000" "$pp" 1 ibv_ud_pingpong "${gid[@]}" -n 1000
    pair "ibv_ud_pingpong -s 4000 -n 1000 -e" "$pp" 1 ibv_ud_pingpong "${gid[@]}" -s 4000 -n 1000 -e
    pair "ibv_srq_pingpong -n 1000" "$pp" 1 ibv_srq_pingpong "${gid[@]}" -n 1000
    pair "ibv_srq_pingpong -s 65536 -n 1000 -e" "$pp" 1 ibv_srq_pingpong "${gid[@]}" -s 65536 -n 1000 -e
    # XRC: every process opens the XRC domain of /tmp/xrc_domain (one domain
    # for the daemon); each side's SENDs name the other's XRC SRQ. The
    # program prints "success" after its exchange and orderly teardown.
    pair "ibv_xsrq_pingpong -n 1000" '^success$' 1 ibv_xsrq_pingpong "${gid[@]}" -n 1000
    pair "ibv_xsrq_pingpong -s 65536 -n 200 -e" '^success$' 1 ibv_xsrq_pingpong "${gid[@]}" -s 65536 -n 200 -e
    pair "ibv_xsrq_pingpong -s 1 -m 256 -n 500" '^success$' 1 ibv_xsrq_pingpong "${gid[@]}" -s 1 -m 256 -n 500
    clients=3 pair "ibv_xsrq_pingpong -c 3 -n 300 (3 clients)" '^success$' 1 \
      ibv_xsrq_pingpong "${gid[@]}" -c 3 -n 300
    clients=2 pair "ibv_xsrq_pingpong -c 2 -n 100 -e (2 clients)" '^success$' 1 \
      ibv_xsrq_pingpong "${gid[@]}" -c 2 -n 100 -e
    ;;
  perftest-lat)
    pair "ib_send_lat" "$row" 1 ib_send_lat "${x[@]}"
    pair "ib_send_lat -e -s 65536 -n 200" "$row" 1 ib_send_lat "${x[@]}" -e -s 65536 -n 200
    pair "ib_send_lat -c UC -I 64 -s 32 -n 200" "$row" 1 ib_send_lat "${x[@]}" -c UC -I 64 -s 32 -n 200
    pair "ib_send_lat -c UD -s 1024 -n 200" "$row" 1 ib_send_lat "${x[@]}" -c UD -s 1024 -n 200
    pair "ib_write_lat -a -n 20" "$row" 23 ib_write_lat "${x[@]}" -a -n 20
    pair "ib_write_lat -c UC -s 4096 -n 200" "$row" 1 ib_write_lat "${x[@]}" -c UC -s 4096 -n 200
    pair "ib_read_lat -s 65536 -n 200" "$row" 1 ib_read_lat "${x[@]}" -s 65536 -n 200
    pair "ib_atomic_lat" "$row" 1 ib_atomic_lat "${x[@]}"
    pair "ib_atomic_lat -A FETCH_AND_ADD -n 200" "$row" 1 ib_atomic_lat "${x[@]}" -A FETCH_AND_ADD -n 200
    pair "ib_send_lat -a -n 20" "$row" 23 ib_send_lat "${x[@]}" -a -n 20
    pair "ib_read_lat -a -n 20" "$row" 23 ib_read_lat "${x[@]}" -a -n 20
    pair "ib_write_lat -I 128 -s 128 -n 500" "$row" 1 ib_write_lat "${x[@]}" -I 128 -s 128 -n 500
    pair "ib_read_lat -e -s 4096 -n 200" "$row" 1 ib_read_lat "${x[@]}" -e -s 4096 -n 200
    pair "ib_atomic_lat -e -n 200" "$row" 1 ib_atomic_lat "${x[@]}" -e -n 200
    ;;
  perftest-bw)
    pair "ib_write_bw -a -n 20" "$row" 23 ib_write_bw "${x[@]}" -a -n 20
    pair "ib_write_bw -q 4 -s 65536 --report_gbits" "$row" 1 ib_write_bw "${x[@]}" -q 4 -s 65536 --report_gbits
    pair "ib_write_bw -b -s 65536" "$row" 1 ib_write_bw "${x[@]}" -b -s 65536
    pair "ib_write_bw -c UC -s 65536" "$row" 1 ib_write_bw "${x[@]}" -c UC -s 65536
    pair "ib_send_bw -a -n 20" "$row" 23 ib_send_bw "${x[@]}" -a -n 20
    pair "ib_send_bw -e -s 65536" "$row" 1 ib_send_bw "${x[@]}" -e -s 65536
    pair "ib_send_bw -c UC -s 65536" "$row" 1 ib_send_bw "${x[@]}" -c UC -s 65536
    pair "ib_send_bw -c UD -s 2048" "$row" 1 ib_send_bw "${x[@]}" -c UD -s 2048
    pair "ib_send_bw -q 4 -b -s 4096" "$row" 1 ib_send_bw "${x[@]}" -q 4 -b -s 4096
    pair "ib_read_bw -s 65536" "$row" 1 ib_read_bw "${x[@]}" -s 65536
    pair "ib_read_bw -q 4 -s 4096" "$row" 1 ib_read_bw "${x[@]}" -q 4 -s 4096
    pair "ib_atomic_bw" "$row" 1 ib_atomic_bw "${x[@]}"
    pair "ib_atomic_bw -q 4 -A FETCH_AND_ADD" "$row" 1 ib_atomic_bw "${x[@]}" -q 4 -A FETCH_AND_ADD
    pair "ib_write_bw -q 8 -s 65536" "$row" 1 ib_write_bw "${x[@]}" -q 8 -s 65536
    pair "ib_send_bw -q 8 -s 4096" "$row" 1 ib_send_bw "${x[@]}" -q 8 -s 4096
    pair "ib_read_bw -a -n 20" "$row" 23 ib_read_bw "${x[@]}" -a -n 20
    pair "ib_read_bw -b -e -s 65536" "$row" 1 ib_read_bw "${x[@]}" -b -e -s 65536
    pair "ib_write_bw -I 64 -s 64 --report_gbits" "$row" 1 ib_write_bw "${x[@]}" -I 64 -s 64 --report_gbits
    pair "ib_send_bw -b -e -s 65536" "$row" 1 ib_send_bw "${x[@]}" -b -e -s 65536
    pair "ib_atomic_bw -e -A CMP_AND_SWAP" "$row" 1 ib_atomic_bw "${x[@]}" -e -A CMP_AND_SWAP
    # A client killed in the middle of traffic: the daemon destroys what it
    # created and keeps serving (the server, left waiting, is stopped by PID).
    port=$((port + 1))
    "${run_env[@]}" ib_write_bw "${x[@]}" -D 4 -p "$port" > "$rt/server.out" 2>&1 &
    server_pid=$!
    wait_tcp_listen "$port" || true
    "${run_env[@]}" ib_write_bw "${x[@]}" -D 4 -p "$port" 127.0.0.1 > "$rt/client.out" 2>&1 &
    client_pid=$!
    sleep 1.5
    kill -KILL "$client_pid" 2>/dev/null
    wait "$client_pid" 2>/dev/null
    stop_pid "$server_pid"
    server_pid=
    qps=
    for _ in $(seq 50); do
      qps=$("$urnicd" --status --runtime-dir "$rt" | awk '/^objects:/ {print $9}')
      [[ $qps == 0 ]] && break
      sleep 0.1
    done
    if [[ $qps == 0 ]]; then pass "a client killed mid-traffic: its QPs are gone, the daemon serves on"
    else fail "a client killed mid-traffic: status still shows qp ${qps:-?}"; fi
    pair "ib_write_bw after the kill" "$row" 1 ib_write_bw "${x[@]}" -s 4096 -n 1000
    ;;
  *)
    echo "unknown group $group" >&2
    exit 2
    ;;
esac

# The daemon survived everything and, idle, sleeps: at most 5 clock ticks
# (50 ms at 100 Hz) of CPU time over 2 seconds.
d=$(daemon_pid) || true
if alive "$d"; then
  pass "urnicd (pid $d) still serving"
  sleep 0.5  # let it finish its idle spin
  ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
  t0=$(ticks "$d")
  sleep 2
  t1=$(ticks "$d")
  if (( t1 - t0 <= 5 )); then pass "idle urnicd used $((t1 - t0)) ticks in 2 s"; else fail "idle urnicd used $((t1 - t0)) ticks in 2 s"; fi
else
  fail "urnicd is not running after the $group group"
fi

finish
