# Shell functions that run SPDK's NVMe-oF target and initiators on this
# build's urnicd, sourced by tests/spdk/spdk_test.sh and bench/nvmeof.sh
# (docs/MIDDLEWARE.md, "NVMe-oF (SPDK)"). Expects SPDK_DIR (a built
# spdk-26.05 tree) and URNIC_BUILD_ROOT; run inside a network namespace of
# the caller's own, or set SPDK_WRAP (below) and SPDK_RT.
#
# The target runs on core 0 (-m 0x1), each initiator on core 1: SPDK's
# reactors busy-poll their core. Every SPDK process runs without huge pages
# (--no-huge -s 512) and with no shared-memory id, so DPDK names its files
# after the pid and two runs never meet; each has its own RPC socket in the
# run directory.

SPDK_NQN=nqn.2016-06.io.spdk:cnode1
SPDK_PORT=4420
SPDK_MEM=(--no-huge -s 512)
# nvmf_tgt and bdevperf: DPDK probes no PCI device (the host's NICs are not
# ours; spdk_nvme_perf and _identify leave PCI alone for a fabrics target).
SPDK_APP=(--no-pci)
SPDK_LD=$SPDK_DIR/build/lib:$URNIC_BUILD_ROOT/verbs_shim:$URNIC_BUILD_ROOT/rdmacm_shim
SPDK_RUN=
# What every SPDK process is started under, e.g. (ip netns exec NS) to run
# it in another network namespace than the caller's (tools/interop.sh's
# nvme group); empty: this one.
SPDK_WRAP=()
# urnicd's runtime directory when the caller started urnicd itself (set it
# and URNIC_RUNTIME_DIR); empty: spdk_start_urnicd's, SPDK_RUN/rt.
SPDK_RT=
# What spdk_identify expects of the controller and namespace 1: the
# target's serial number and size in blocks (spdk_add_subsystem's).
SPDK_SERIAL=SPDK00000000000001
SPDK_NS_LBAS=16384
spdk_daemon_pid=
spdk_target_pid=

# spdk_start_urnicd DIR: this build's urnicd with urnic0 (RoCE v2) at
# 127.0.0.3 and urnic_iw0 (iWARP) at 127.0.0.2, its runtime directory and
# every log of the run in DIR.
spdk_start_urnicd() {
  SPDK_RUN=$1
  ip link set lo up 2>/dev/null || true
  rm -rf "$SPDK_RUN" && mkdir -p "$SPDK_RUN/rt" || return 1
  cat > "$SPDK_RUN/urnicd.json" <<'JSON'
{"devices": [{"name": "urnic0", "address": "127.0.0.3"},
             {"name": "urnic_iw0", "transport": "iwarp", "address": "127.0.0.2"}]}
JSON
  "$URNIC_BUILD_ROOT/engine/urnicd" --config "$SPDK_RUN/urnicd.json" --runtime-dir "$SPDK_RUN/rt" \
    > "$SPDK_RUN/urnicd.log" 2>&1 &
  spdk_daemon_pid=$!
  local _
  for _ in $(seq 100); do grep -q 'listening on' "$SPDK_RUN/urnicd.log" && break; sleep 0.1; done
  grep -q 'listening on' "$SPDK_RUN/urnicd.log" || { echo "FAIL: urnicd did not start:"; cat "$SPDK_RUN/urnicd.log"; return 1; }
  export URNIC_RUNTIME_DIR=$SPDK_RUN/rt URNIC_NO_AUTOSTART=1
}

# spdk_urnicd_status: urnicd's status, JSON.
spdk_urnicd_status() { "$URNIC_BUILD_ROOT/engine/urnicd" --status --json --runtime-dir "${SPDK_RT:-$SPDK_RUN/rt}"; }

# spdk_objects KIND: how many objects of KIND (pd mr cq qp srq ah; all: their sum) urnicd holds.
spdk_objects() {
  spdk_urnicd_status | python3 -c '
import json, sys
o = json.load(sys.stdin)["objects"]
print(sum(o.values()) if sys.argv[1] == "all" else o[sys.argv[1]])' "$1"
}

# spdk_wait_objects KIND N SECONDS: wait until urnicd holds N objects of KIND.
spdk_wait_objects() {
  local kind=$1 want=$2 secs=$3 have i
  for ((i = 0; i <= secs * 10; i++)); do
    have=$(spdk_objects "$kind") || return 1
    [[ $have == "$want" ]] && return 0
    sleep 0.1
  done
  echo "urnicd holds $have $kind objects after $secs s (want $want):"
  spdk_urnicd_status
  return 1
}

# spdk_rpc ARGS...: scripts/rpc.py against the running target (with Debian's
# python3, which has the modules it imports).
spdk_rpc() { /usr/bin/python3 "$SPDK_DIR/scripts/rpc.py" -s "$SPDK_RUN/tgt.sock" -t 30 "$@"; }

# spdk_start_target: nvmf_tgt on core 0, ready for RPCs; its log is
# SPDK_RUN/nvmf_tgt.N.log.
spdk_start_target() {
  local n=0
  while [[ -e $SPDK_RUN/nvmf_tgt.$n.log ]]; do n=$((n + 1)); done
  SPDK_TARGET_LOG=$SPDK_RUN/nvmf_tgt.$n.log
  rm -f "$SPDK_RUN/tgt.sock"
  # env execs nvmf_tgt: $! is the target itself (a function run with &
  # would be a subshell, and SIGTERM would orphan the target).
  "${SPDK_WRAP[@]}" env LD_LIBRARY_PATH="$SPDK_LD" "$SPDK_DIR/build/bin/nvmf_tgt" -m 0x1 "${SPDK_MEM[@]}" "${SPDK_APP[@]}" -r "$SPDK_RUN/tgt.sock" \
    > "$SPDK_TARGET_LOG" 2>&1 &
  spdk_target_pid=$!
  local _
  for _ in $(seq 300); do
    [[ -S $SPDK_RUN/tgt.sock ]] && spdk_rpc framework_wait_init > /dev/null 2>&1 && return 0
    kill -0 "$spdk_target_pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "FAIL: nvmf_tgt did not start:"; tail -n 20 "$SPDK_TARGET_LOG"
  return 1
}

# spdk_add_transport TYPE [OPTIONS...]: nvmf_create_transport -t TYPE.
spdk_add_transport() {
  local t=$1; shift
  spdk_rpc nvmf_create_transport -t "$t" "$@" > /dev/null || { echo "FAIL: nvmf_create_transport -t $t $*"; return 1; }
}

# spdk_add_subsystem TRTYPE ADDR: the subsystem (a 64 MiB malloc bdev of
# 4 KiB blocks as its namespace) once, and a listener on ADDR.
spdk_add_subsystem() {
  local trtype=$1 addr=$2
  if ! spdk_rpc nvmf_get_subsystems 2>/dev/null | grep -q "$SPDK_NQN"; then
    spdk_rpc bdev_malloc_create -b Malloc0 64 4096 > /dev/null &&
      spdk_rpc nvmf_create_subsystem "$SPDK_NQN" -a -s SPDK00000000000001 -m 4 &&
      spdk_rpc nvmf_subsystem_add_ns "$SPDK_NQN" Malloc0 || return 1
  fi
  spdk_rpc nvmf_subsystem_add_listener "$SPDK_NQN" -t "$trtype" -a "$addr" -s "$SPDK_PORT" -f ipv4
}

# spdk_trid TRTYPE ADDR: the transport id the initiators take.
spdk_trid() { printf 'trtype:%s adrfam:IPv4 traddr:%s trsvcid:%s subnqn:%s' "$1" "$2" "$SPDK_PORT" "$SPDK_NQN"; }

# spdk_identify TRID: spdk_nvme_identify; the controller's serial number
# and the namespace's size must be the target's (SPDK_SERIAL, SPDK_NS_LBAS).
spdk_identify() {
  local out
  out=$(timeout 60 "${SPDK_WRAP[@]}" env LD_LIBRARY_PATH="$SPDK_LD" "$SPDK_DIR/build/bin/spdk_nvme_identify" -r "$1" -p 1 "${SPDK_MEM[@]}" 2>&1)
  local rc=$?
  printf '%s\n' "$out"
  [[ $rc -eq 0 ]] || { echo "spdk_nvme_identify exited $rc"; return 1; }
  grep -q "Serial Number: *$SPDK_SERIAL" <<< "$out" || { echo "no serial number $SPDK_SERIAL"; return 1; }
  grep -qE "Size \(in LBAs\): *$SPDK_NS_LBAS " <<< "$out" || { echo "namespace 1 is not $SPDK_NS_LBAS LBAs"; return 1; }
}

# spdk_perf TRID PERF_OPTIONS...: spdk_nvme_perf on core 1; passes when it
# exits 0, completed I/O and logged no error.
spdk_perf() {
  local trid=$1; shift
  local out
  out=$(timeout 120 "${SPDK_WRAP[@]}" env LD_LIBRARY_PATH="$SPDK_LD" "$SPDK_DIR/build/bin/spdk_nvme_perf" -r "$trid" -c 0x2 "${SPDK_MEM[@]}" "$@" 2>&1)
  local rc=$?
  printf '%s\n' "$out"
  [[ $rc -eq 0 ]] || { echo "spdk_nvme_perf exited $rc"; return 1; }
  ! grep -qE '\*ERROR\*|errors? (occurred|detected)' <<< "$out" || { echo "spdk_nvme_perf logged errors"; return 1; }
  tr -d '\r' <<< "$out" | awk '$1 == "Total" { found = 1; if ($3 + 0 <= 0) bad = 1 } END { exit !(found && !bad) }' ||
    { echo "no I/O completed"; return 1; }
}

# spdk_bdevperf TRTYPE ADDR BDEVPERF_OPTIONS...: bdevperf on core 1 over
# an NVMe-oF bdev attached to the target; -w verify compares every block it
# reads back with what it wrote.
spdk_bdevperf() {
  local trtype=$1 addr=$2; shift 2
  local cfg=$SPDK_RUN/bdevperf.json
  cat > "$cfg" <<JSON
{"subsystems": [{"subsystem": "bdev", "config": [{"method": "bdev_nvme_attach_controller",
  "params": {"name": "Nvme0", "trtype": "$trtype", "adrfam": "ipv4", "traddr": "$addr",
             "trsvcid": "$SPDK_PORT", "subnqn": "$SPDK_NQN"}}]}]}
JSON
  local out
  out=$(timeout 120 "${SPDK_WRAP[@]}" env LD_LIBRARY_PATH="$SPDK_LD" "$SPDK_DIR/build/examples/bdevperf" --json "$cfg" -m 0x2 \
          "${SPDK_MEM[@]}" "${SPDK_APP[@]}" -r "$SPDK_RUN/bdevperf.sock" "$@" 2>&1)
  local rc=$?
  printf '%s\n' "$out"
  [[ $rc -eq 0 ]] || { echo "bdevperf exited $rc"; return 1; }
  ! grep -q '\*ERROR\*' <<< "$out" || { echo "bdevperf logged errors"; return 1; }
  # " Total : IOPS MiB/s Fail/s TO/s Average min max" (after a \r)
  tr -d '\r' <<< "$out" | awk '$1 == "Total" && $2 == ":" { found = 1; if ($3 + 0 <= 0 || $5 + 0 != 0 || $6 + 0 != 0) bad = 1 }
                               END { exit !(found && !bad) }' ||
    { echo "no I/O completed, or some failed or timed out"; return 1; }
}

# spdk_step NAME COMMAND...: runs COMMAND, its output into SPDK_RUN/step.N.log;
# prints "ok: NAME", or "FAIL: NAME" and the output's error lines and tail.
spdk_step_n=0
spdk_step() {
  local name=$1; shift
  spdk_step_n=$((spdk_step_n + 1))
  local log=$SPDK_RUN/step.$spdk_step_n.log t0=$SECONDS
  if "$@" > "$log" 2>&1; then
    echo "ok: $name ($((SECONDS - t0)) s)"
    return 0
  fi
  echo "FAIL: $name ($((SECONDS - t0)) s; $log):"
  { grep -E 'ERROR|error|FAIL' "$log" | head -n 10; echo '  ...'; tail -n 8 "$log"; } | sed 's/^/    /'
  return 1
}

# spdk_stop_target: SIGTERM; it must end within 20 s (then SIGKILL, and fail).
spdk_stop_target() {
  [[ -n $spdk_target_pid ]] || return 0
  local pid=$spdk_target_pid _
  spdk_target_pid=
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 200); do kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null; return 0; }; sleep 0.1; done
  echo "nvmf_tgt did not end 20 s after SIGTERM; killed"
  tail -n 20 "$SPDK_TARGET_LOG"
  kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  return 1
}

# spdk_urnicd_warnings: what urnicd logged beyond sessions opening and closing.
spdk_urnicd_warnings() {
  local w
  w=$(grep -vE 'listening on|session [0-9]+ (from pid|\(pid [0-9]+\) (closed|exited|the process exited))|^urnicd: device |SIGTERM received|stopped$' \
         "$SPDK_RUN/urnicd.log")
  [[ -z $w ]] || { echo "urnicd logged:"; head -n 20 <<< "$w" | sed 's/^/    /'; }
}

spdk_stop_all() {
  spdk_stop_target > /dev/null
  if [[ -n $spdk_daemon_pid ]]; then
    kill "$spdk_daemon_pid" 2>/dev/null; wait "$spdk_daemon_pid" 2>/dev/null
    spdk_daemon_pid=
  fi
}
