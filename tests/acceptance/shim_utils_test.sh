#!/usr/bin/env bash
# Acceptance (issue 4): unmodified Debian ibverbs-utils and perftest binaries
# against the drop-in libibverbs.so.1 and an auto-started urnicd, with a
# private runtime directory. Every daemon this script causes is stopped by PID
# and the directory removed on exit.
#
# usage: shim_utils_test.sh SHIM_DIR URNICD ABI_SYMBOLS_FILE
set -uo pipefail
shim_dir=$1
urnicd=$2
abi_file=$3

asan_probe=$shim_dir/libibverbs.so.1
# shellcheck source=tests/acceptance/common.sh
source "$(dirname "$0")/common.sh"
check() { local what=$1; shift; if "$@"; then pass "$what"; else fail "$what"; fi; }

one_host_setup acceptance "$urnicd" "$shim_dir"
# urnicd processes serving our runtime directory (scan /proc, match exactly).
count_daemons() {
  local n=0 p
  for p in /proc/[0-9]*; do
    local cmd
    cmd=$( { tr '\0' ' ' < "$p/cmdline"; } 2>/dev/null) || continue
    [[ $cmd == "$urnicd --runtime-dir $rt " ]] && n=$((n + 1))
  done
  echo "$n"
}
stop_daemon() { stop_pid "$(daemon_pid)"; }

# --- the exported ABI: every symbol at its version node, nothing else ----------
exported=$(objdump -T "$shim_dir/libibverbs.so.1" | awk 'NF >= 2 && $(NF-1) ~ /^IBVERBS/ && $0 !~ /UND/ && $(NF-1) != $NF {print $NF, $(NF-1)}' | sort)
wanted=$(awk 'NF >= 2 {print $1, $2}' "$abi_file" | sort)
check "shim exports exactly the $(wc -l <<< "$wanted") versioned symbols of rdma-core 44" [ "$exported" == "$wanted" ]
# ... and those an older rdma-core's programs bind at an older version
# (objdump shows a non-default version in parentheses).
compat=$(sed 's/#.*//' "$(dirname "$abi_file")/libibverbs-compat.symbols" | awk 'NF >= 2 {print $1, "(" $2 ")"}' | sort)
exported_compat=$(objdump -T "$shim_dir/libibverbs.so.1" | awk 'NF >= 2 && $0 !~ /UND/ && $(NF-1) ~ /^\(IBVERBS/ {print $NF, $(NF-1)}' | sort)
check "shim exports the $(wc -l <<< "$compat") symbols of libibverbs-compat.symbols at their older versions" \
  [ -n "$compat" -a "$exported_compat" == "$compat" ]
others=$(objdump -T "$shim_dir/libibverbs.so.1" | awk '$2 == "g" && $0 !~ /UND/ && $0 !~ /IBVERBS/' | wc -l)
check "shim exports no unversioned symbol" [ "$others" -eq 0 ]
check "verbs_allow_disassociate_destroy is a data object" \
  bash -c "objdump -T '$shim_dir/libibverbs.so.1' | grep -q 'DO .bss.*verbs_allow_disassociate_destroy'"
check "shim does not pull in the real libibverbs" \
  bash -c "! readelf -d '$shim_dir/libibverbs.so.1' | grep -q 'NEEDED.*libibverbs'"

# --- zero configuration: the first program starts the daemon -----------------
out=$("${run_env[@]}" timeout 30 ibv_devices 2>&1); rc=$?
check "ibv_devices exits 0" [ "$rc" -eq 0 ]
check "ibv_devices lists urnic0" grep -q 'urnic0' <<< "$out"
pid=$(daemon_pid)
check "a daemon was auto-started (pid ${pid:-none})" alive "$pid"
check "the daemon socket exists" [ -S "$rt/urnicd.sock" ]

out=$("${run_env[@]}" timeout 30 ibv_devinfo -v 2>&1); rc=$?
check "ibv_devinfo -v exits 0" [ "$rc" -eq 0 ]
for pat in 'hca_id:.urnic0' 'transport:.*InfiniBand \(0\)' 'state:.*PORT_ACTIVE \(4\)' \
           'link_layer:.*Ethernet' 'GID\[  0\]:.*fe80::.*RoCE v2' 'GID\[  1\]:.*::ffff:127\.0\.0\.1, RoCE v2' \
           'atomic_cap:.*ATOMIC_HCA' 'max_qp:' 'active_mtu:.*4096'; do
  check "ibv_devinfo -v shows /$pat/" grep -Eq "$pat" <<< "$out"
done
check "the same daemon served the second program" [ "$(daemon_pid)" == "$pid" ]

# --- an idle daemon sleeps -----------------------------------------------------
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
t0=$(ticks "$pid"); sleep 1; t1=$(ticks "$pid")
check "idle daemon used $((t1 - t0)) clock ticks in 1 s (< 3)" [ $((t1 - t0)) -lt 3 ]

# --- every RDMA program starts (BIND_NOW: no symbol lookup error) -------------
for b in ibv_devices ibv_devinfo ibv_rc_pingpong ibv_uc_pingpong ibv_ud_pingpong ibv_srq_pingpong \
         ibv_xsrq_pingpong ibv_asyncwatch ib_send_bw ib_send_lat ib_write_bw ib_write_lat \
         ib_read_bw ib_read_lat ib_atomic_bw ib_atomic_lat; do
  command -v "$b" >/dev/null || { fail "$b not installed"; continue; }
  out=$("${run_env[@]}" timeout 10 "$b" -h 2>&1)
  check "$b starts without a symbol lookup error" \
    bash -c "! grep -Eq 'symbol lookup error|undefined symbol|error while loading' <<< \"\$1\"" _ "$out"
done

# --- ibv_asyncwatch opens the device and blocks on its async-event fd --------
# (async events belong to the context that caused them, so this process sees
# none; it must wait, not fail, until it is stopped)
out=$("${run_env[@]}" timeout 2 ibv_asyncwatch -d urnic0 2>&1); rc=$?
check "ibv_asyncwatch waits on the async event fd until stopped (exit $rc: 124)" \
  bash -c "[ $rc -eq 124 ] && grep -Eq '^urnic0: async event FD [0-9]+' <<< \"\$1\"" _ "$out"

# --- two programs starting at once start exactly one daemon -------------------
stop_daemon
check "the daemon stopped on SIGTERM" bash -c "! kill -0 $pid 2>/dev/null"
check "the daemon removed its socket" [ ! -e "$rt/urnicd.sock" ]
: > "$rt/urnicd.log"
"${run_env[@]}" timeout 30 ibv_devices > "$rt/a.out" 2>&1 & a=$!
"${run_env[@]}" timeout 30 ibv_devinfo > "$rt/b.out" 2>&1 & b=$!
wait "$a"; ra=$?; wait "$b"; rb=$?
check "concurrent ibv_devices and ibv_devinfo exit 0 ($ra, $rb)" [ "$ra" -eq 0 -a "$rb" -eq 0 ]
check "both saw urnic0" bash -c "grep -q urnic0 '$rt/a.out' && grep -q urnic0 '$rt/b.out'"
check "exactly one daemon runs for the directory" [ "$(count_daemons)" -eq 1 ]
check "exactly one daemon was started" [ "$(grep -c 'listening on' "$rt/urnicd.log")" -eq 1 ]

# --- urnicd as a foreground service: signals, exit status, one per directory --
stop_daemon
"$urnicd" --runtime-dir "$rt" 2> "$rt/fg.log" & fg=$!
wait_until 5 test -S "$rt/urnicd.sock"
"$urnicd" --runtime-dir "$rt" 2>/dev/null; second=$?
check "a second urnicd for the same directory exits 3" [ "$second" -eq 3 ]
"$urnicd" --status --runtime-dir "$rt" > "$rt/status.out"; st=$?
check "urnicd --status exits 0 and lists urnic0" bash -c "[ $st -eq 0 ] && grep -q urnic0 '$rt/status.out'"
"$urnicd" --status --json --runtime-dir "$rt" > "$rt/status.json"
check "urnicd --status --json: one object, urnic0 up on udp, the daemon's pid" python3 -c "
import json, sys
s = json.load(open(sys.argv[1]))
d = {x['name']: x for x in s['devices']}
sys.exit(0 if s['running'] and s['pid'] == int(sys.argv[2]) and d['urnic0']['up'] and d['urnic0']['link'] == 'udp' else 1)
" "$rt/status.json" "$fg"
kill -INT "$fg"; wait "$fg"; fgrc=$?
check "urnicd stops on SIGINT with exit status 0" [ "$fgrc" -eq 0 ]
"$urnicd" --status --runtime-dir "$rt" > /dev/null; st=$?
check "urnicd --status exits 3 when no daemon runs" [ "$st" -eq 3 ]
"$urnicd" --status --json --runtime-dir "$rt" > "$rt/status.json"; st=$?
check "urnicd --status --json exits 3 and says not running" bash -c "[ $st -eq 3 ] && grep -q '\"running\":false' '$rt/status.json'"
echo '{"devices": [{"name": "urnic0", "mtu": 999}]}' > "$rt/bad.json"
"$urnicd" --runtime-dir "$rt" --config "$rt/bad.json" 2>/dev/null; badrc=$?
check "a bad config exits 1" [ "$badrc" -eq 1 ]

finish
