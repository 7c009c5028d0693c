#!/usr/bin/env bash
# interop.sh: urnic against the Linux kernel's Soft-RoCE (rdma_rxe), issue 6,
# and soft-iWARP (siw), issue 8.
#
# Boots one kernel peer VM (tools/peer-vm, built on first use), starts a
# private urnicd in the peer network's host namespace (rxehost, 10.99.0.1,
# udp link) and runs unmodified Debian programs in both directions: urnic as
# server with rxe as client, and the reverse. Prints one line per cell
#   PROGRAM  DIRECTION  GID  MTU  PASS|FAIL  time + result line, or the reason
# and exits 0 only if every cell passes; 77 when the machine cannot run the
# peers (not root, no qemu/apt), with the reason.
#
# usage: tools/interop.sh [options]
#   --build DIR      urnic build directory (default $URNIC_BUILD_DIR or build/)
#   --workdir DIR    peer VM work directory (default $URNIC_PEERVM_DIR or
#                    /tmp/urnic-peervm; grows to ~750 MB)
#   --mtu LIST       path MTUs to run (default "1024 4096")
#   --gid LIST       GID types: ipv4 (::ffff:a.b.c.d, index 1) and/or
#                    ll (IPv6 link-local, index 0) (default "ipv4 ll")
#   --full           every cell at every MTU with every GID type, and every
#                    iwarp-siw cell at every MTU with every CRC setting.
#                    Default: pairwise, every cell once per value of each
#                    factor (MTU 1024 with ipv4, 4096 with ll; siw 1500 with
#                    CRC on, 9000 with CRC off) and a cross subset (RC
#                    SEND/WRITE/READ) in the other combinations; --mtu/--gid/
#                    --iw-mtu/--iw-crc on the command line also mean --full
#   --only REGEX     run only the cells whose program line matches REGEX
#   --no-loss        skip the loss-recovery cells
#   --keep           leave the VM and the namespace up at the end (re-used by
#                    the next run: no boot)
#   --captures DIR   keep the bridge captures there (default: a temp dir)
#   --no-build       use the build directory as it is (the meson test does)
#   --groups LIST    cell groups to run (default "roce gso loss ecn incast-red
#                    iwarp-siw conform"):
#                    roce: the RoCE matrix, gso: urnic with "udp_gso" (64 KiB
#                    messages leave as GSO runs; rxe checks each
#                    segment's ICRC against the IP ID the kernel gave it),
#                    loss: 5 % loss, ecn: CE marks
#                    on rxe's frames and urnic's CNPs to rxe, incast-red:
#                    two urnic senders into one urnic receiver, routed
#                    through the peer VM, whose egress (htb + red ecn) is
#                    the bottleneck that marks, DCQCN on and off (issue 21;
#                    no rxe involved), iwarp-siw:
#                    urnic_iw0 on 10.99.1.1 against siw0 (rdma_cm programs),
#                    conform: `urnic conform` against rxe0 and siw0 (issue
#                    20; their known deviations, docs/CONFORMANCE.md, are
#                    expected); not in the default list: nvme: NVMe-oF
#                    over RDMA, the kernel's nvme-rdma initiator against
#                    SPDK's nvmf_tgt on urnic, and SPDK's initiators on
#                    urnic against the kernel's nvmet-rdma target, on
#                    urnic0/rxe0 and urnic_iw0/siw0 (issue 48; needs SPDK
#                    built, --spdk; else left out, 77 when it is the only
#                    group)
#   --spdk DIR       a built SPDK 26.05 tree for the nvme group (default
#                    $URNIC_SPDK_DIR or BUILD/spdk/spdk-26.05, where
#                    tests/spdk/build_spdk.sh builds it)
#   --iw-mtu LIST    VM eth1 MTUs of the iwarp-siw group (default "1500 9000")
#   --iw-crc LIST    MPA CRC of the iwarp-siw group: on, off (default "on off")
#   --repeat N       run every iwarp-siw cell N times in a row and print
#                    passed/total per cell at the end (default 1)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib/perftest_clock.sh
source "$root/tools/lib/perftest_clock.sh"
# shellcheck source=lib/incast.sh
source "$root/tools/lib/incast.sh"
# shellcheck source=tools/lib/tcp_listen.sh
source "$root/tools/lib/tcp_listen.sh"
build=${URNIC_BUILD_DIR:-$root/build}
W=${URNIC_PEERVM_DIR:-/tmp/urnic-peervm}
mtus="1024 4096"
gids="ipv4 ll"
only=""
loss=1
keep=0
capdir=""
do_build=1
groups="roce gso loss ecn incast-red iwarp-siw conform"
iw_mtus="1500 9000"
iw_crcs="on off"
repeat=1
full=0
spdk_dir=${URNIC_SPDK_DIR:-}
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --workdir) W=$2; shift 2 ;;
    --mtu) mtus=$2; full=1; shift 2 ;;
    --gid) gids=$2; full=1; shift 2 ;;
    --full) full=1; shift ;;
    --only) only=$2; shift 2 ;;
    --no-loss) loss=0; shift ;;
    --keep) keep=1; shift ;;
    --captures) capdir=$2; shift 2 ;;
    --no-build) do_build=0; shift ;;
    --groups) groups=$2; shift 2 ;;
    --iw-mtu) iw_mtus=$2; full=1; shift 2 ;;
    --iw-crc) iw_crcs=$2; full=1; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --spdk) spdk_dir=$2; shift 2 ;;
    -h|--help) sed -n '2,60p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "interop: unknown option $1" >&2; exit 2 ;;
  esac
done

export NS=${URNIC_PEERVM_NS:-rxehost}  # run-peer-vm.sh reads it too; another name: a second peer network beside CI's
PV=$root/tools/peer-vm
VM=1                      # the peer: VM 1, rxe0 on 10.99.0.11, control 10.99.2.11
VM_CTL=10.99.2.11
HOST_CTL=10.99.2.1
T0=$(date +%s.%N)
elapsed() { printf '%.0f' "$(echo "$(date +%s.%N) - $T0" | bc)"; }
log() { printf 'interop: [%4ss] %s\n' "$(elapsed)" "$*" >&2; }
skip() { echo "interop: SKIP: $*"; exit 77; }

# ---------------------------------------------------------------- can we run?
[[ $(id -u) == 0 ]] || skip "needs root (network namespace, tap devices, qemu)"
if ! command -v qemu-system-x86_64 >/dev/null && ! command -v apt-get >/dev/null; then
  skip "no qemu-system-x86_64 and no apt-get to install it"
fi
for t in ip bc python3; do command -v $t >/dev/null || skip "missing $t"; done
# The nvme group runs SPDK's programs, built by tests/spdk/build_spdk.sh
# (over CI's budget): without them the group is left out.
if [[ " $groups " == *" nvme "* ]]; then
  spdk_dir=${spdk_dir:-$build/spdk/spdk-26.05}
  nvme_missing=""
  for a in build/bin/nvmf_tgt build/bin/spdk_nvme_identify build/examples/bdevperf scripts/rpc.py; do
    [[ -e $spdk_dir/$a ]] || nvme_missing+=" $a"
  done
  if [[ -n $nvme_missing ]]; then
    groups=$(tr ' ' '\n' <<< "$groups" | grep -vx nvme | tr '\n' ' ' | sed 's/ *$//')
    why="group nvme: SPDK is not built in $spdk_dir (missing:$nvme_missing; tests/spdk/build_spdk.sh builds it)"
    [[ -n $groups ]] || skip "$why"
    echo "interop: $why: left out" >&2
  fi
fi

mkdir -p "$W"
W=$(cd "$W" && pwd)
rt=$(mktemp -d /tmp/urnic-interop.XXXXXX)
keep_captures=$capdir
[[ -n $capdir ]] || capdir=$rt/captures
mkdir -p "$capdir"
capdir=$(cd "$capdir" && pwd)

# ---------------------------------------------------------------- build
if [[ $do_build == 1 ]]; then
log "building urnic ($build)"
if [[ ! -f $build/build.ninja ]]; then
  "$root/tools/bootstrap.sh" >&2 || { echo "interop: FAIL: bootstrap"; exit 1; }
  meson setup "$build" "$root" >/dev/null || { echo "interop: FAIL: meson setup"; exit 1; }
fi
shim_target=$(ninja -C "$build" -t targets all | sed -n 's/^\(verbs_shim\/libibverbs\.so\.[0-9.]*\): .*/\1/p' | head -1)
ninja -C "$build" engine/urnicd tools/urnic-cli tools/conform/urnic-conform tools/conform/urnic-conform-agent \
  $shim_target >/dev/null ||
  { echo "interop: FAIL: urnic build"; exit 1; }
fi
urnicd=$build/engine/urnicd
shim=$build/verbs_shim
cli=$build/tools/urnic-cli
for f in "$urnicd" "$shim/libibverbs.so.1" "$cli"; do
  [[ -e $f ]] || { echo "interop: FAIL: $f missing (build first)"; exit 1; }
done
log "building the kernel peer VM image ($W)"
"$PV/build-peer-vm.sh" "$W" > "$rt/build-peer-vm.log" 2>&1 ||
  { tail -20 "$rt/build-peer-vm.log" >&2; echo "interop: FAIL: peer VM build (see above)"; exit 1; }
command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 still missing after the peer build"

# ---------------------------------------------------------------- processes
daemon_pid=""
server_pid=""
cap_pid=""
# alive, stop_pid, wait_until, cleanup_* (the EXIT trap), netns_add,
# veth_add, urnicd_start: tools/lib/
# shellcheck source=tools/lib/hosts.sh
source "$root/tools/lib/hosts.sh"
# shellcheck source=tools/lib/daemons.sh
source "$root/tools/lib/daemons.sh"
nsx() { ip netns exec "$NS" "$@"; }
vm() { EXEC_TIMEOUT=${VMT:-30} "$PV/run-peer-vm.sh" "$W" exec "$VM" "$*"; }

vm_up() {
  # Boot with MTU 9000 (virtio-net then has big receive buffers); the cells
  # at path MTU 1024 lower eth0 to 1500 live, which rxe follows.
  if nsx true 2>/dev/null && "$PV/run-peer-vm.sh" "$W" status 2>/dev/null | grep -q "vm$VM .* running" &&
     vm 'echo ok' 2>/dev/null | grep -q ok; then
    log "peer VM already up"
  else
    log "booting the peer VM"
    MTU=9000 "$PV/run-peer-vm.sh" "$W" up 1 > "$rt/vm-up.log" 2>&1 ||
      { cat "$rt/vm-up.log" >&2; echo "interop: FAIL: peer VM did not boot"; exit 1; }
    booted=1
  fi
  # The peer network namespace has IPv6 off; the link-local GID needs it on
  # br-roce (no DAD, so the address is usable at once).
  nsx sysctl -qw net.ipv6.conf.br-roce.accept_dad=0 net.ipv6.conf.br-roce.disable_ipv6=0 ||
    log "could not enable IPv6 on br-roce: the link-local GID cells will fail"
  for _ in $(seq 50); do nsx ip -6 -o addr show dev br-roce scope link | grep -q fe80 && break; sleep 0.1; done
}
booted=0

# At exit (tools/lib/cleanup.sh): server_pid, incast-red's processes
# (daemons, programs, watchers: cleanup_pids), then these, then the
# namespaces and $rt.
cleanup_paths+=("$rt")
cleanup_extra() {
  stop_pid "$cap_pid"
  stop_pid "$daemon_pid"
  [[ $keep == 1 ]] && vm "/sbin/tc qdisc del dev eth0 root; /sbin/tc qdisc del dev eth1 root; sysctl -qw net.ipv4.ip_forward=0" >/dev/null 2>&1
  if [[ $keep == 0 ]]; then "$PV/run-peer-vm.sh" "$W" down >/dev/null 2>&1; fi
  # With --captures, the daemon's log and the failure details stay too.
  if [[ -n $keep_captures ]]; then cp "$rt"/urnicd.log "$rt"/failures.log "$capdir"/ 2>/dev/null; fi
  return 0
}
trap 'exit 130' INT TERM

# urnic_start MTU: a private urnicd on 10.99.0.1 in the namespace, whose
# MAC is br-roce's, so its link-local GID (fe80::EUI-64) is br-roce's
# link-local address: the udp link binds it and the namespace's kernel
# answers neighbour discovery for it.
urnic_start() { # urnic_start MTU [FAULT_JSON] [MORE_JSON_MEMBERS]
  local mtu=$1 fault=${2:-} mac extra=""
  [[ -n $fault ]] && extra=", \"fault\": $fault"
  [[ -n ${3:-} ]] && extra="$extra, $3"
  [[ -n $daemon_pid ]] && stop_pid "$daemon_pid"
  # The MAC whose EUI-64 is br-roce's link-local address (normally
  # br-roce's own MAC; derived from the address in case the bridge's MAC
  # changed after the address was made).
  mac=$(nsx ip -6 -o addr show dev br-roce scope link | awk '{print $4}' | cut -d/ -f1 | head -1 |
        python3 -c 'import sys, ipaddress
a = sys.stdin.read().strip()
if a:
    b = ipaddress.IPv6Address(a).packed[8:]
    print(":".join("%02x" % x for x in [b[0] ^ 2, b[1], b[2], b[5], b[6], b[7]]))')
  [[ -n $mac ]] || mac=$(nsx cat /sys/class/net/br-roce/address)
  cat > "$rt/urnicd.json" <<EOF
{"devices": [{"name": "urnic0", "link": "udp", "address": "10.99.0.1", "udp_port": 4791,
              "mtu": $mtu, "mac": "$mac"$extra}]}
EOF
  rm -rf "$rt/run"
  urnicd_start "$NS" "$rt/run" "$rt/urnicd.log" --config "$rt/urnicd.json"
  daemon_pid=$urnicd_pid
  if [[ ! -S $rt/run/urnicd.sock ]] || grep -q 'same-host traffic only' "$rt/urnicd.log"; then
    cat "$rt/urnicd.log" >&2; echo "interop: FAIL: urnicd did not start on 10.99.0.1:4791"; exit 1
  fi
}

# Programs on the urnic side: the drop-in libibverbs, the private daemon.
host_env=(env "LD_LIBRARY_PATH=$shim:$build/rdmacm_shim" "URNIC_RUNTIME_DIR=$rt/run" "URNIC_NO_AUTOSTART=1" "URNIC_DAEMON=$urnicd")
# A sanitizer build of the shim needs its runtime first in the (uninstrumented)
# Debian programs.
asan_rt=$(ldd "$shim/libibverbs.so.1" | awk '/libasan|libclang_rt\.asan/ {print $3; exit}')
if [[ -n $asan_rt ]]; then
  host_env+=("LD_PRELOAD=$asan_rt" "ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0")
fi

# ---------------------------------------------------------------- one cell
pass=0
fail=0
port=$((21000 + $$ % 20000))
results=$rt/results.txt
: > "$results"
line() { # line PROGRAM DIR GID MTU RESULT DETAIL
  printf '%-40s %-22s %-5s %-5s %-4s %s\n' "$1" "$2" "$3" "$4" "$5" "$6" | tee -a "$results"
  if [[ $5 == PASS ]]; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
}
# urnic0's counters (urnic stats --json) into FILE, and one counter of such
# a file (0 when missing): the groups compare them before and after.
dev_stats() { nsx "${host_env[@]}" "$cli" stats -d urnic0 --json > "$1" 2>/dev/null; }
dev_counter() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["counters"].get(sys.argv[2], 0))' "$1" "$2" 2>/dev/null || echo 0; }
# last error-looking line of a program's output, for the FAIL reason
why() { grep -vE '^ *$|^-+$' "$1" 2>/dev/null | grep -iE 'fail|error|err |couldn|unable|invalid|timeout|mismatch' | tail -1 | cut -c1-110; }

# A server program in the peer VM, in the background: its output and, at
# its end, "rc=N" go to /tmp/s.out there.
vm_server_start() { # vm_server_start "CMD ARGS"
  vm "rm -f /tmp/s.out /tmp/s.pid; (timeout 60 $1 > /tmp/s.out 2>&1 & echo \$! > /tmp/s.pid; wait \$!; echo rc=\$? >> /tmp/s.out) </dev/null >/dev/null 2>&1 &" >/dev/null 2>&1
}
# Waits up to 30 s for it to end; copies its output to FILE and prints its
# exit status, or "hung" (it is then killed).
vm_server_wait() { # vm_server_wait FILE
  local rc=""
  for _ in $(seq 60); do
    vm 'cat /tmp/s.out' > "$1" 2>/dev/null
    rc=$(sed -n 's/^rc=//p' "$1" | tail -1)
    [[ -n $rc ]] && break
    sleep 0.5
  done
  if [[ -z $rc ]]; then vm 'kill $(cat /tmp/s.pid) 2>/dev/null; true' >/dev/null 2>&1; rc=hung; fi
  echo "$rc"
}

# filtered_out NAME: the cell is not run: --only excludes it, or the group
# runs the cross subset (`subset`, a regex set by the pairwise matrix) and
# NAME is not in it.
subset=""
filtered_out() {
  [[ -n $only && ! $1 =~ $only ]] && return 0
  [[ -n $subset && ! $1 =~ $subset ]] && return 0
  return 1
}

# cell NAME SERVER(urnic|rxe) GIDIDX EXPECT PROG ARGS...
#   PROG ARGS run on both sides (the device and GID options are added);
#   the client also gets the server's control address. PASS: both exit 0
#   and the client's output matches EXPECT.
cell() {
  local name=$1 side=$2 gidx=$3 expect=$4; shift 4
  local prog=$1; shift
  local dir gopt dev_u dev_r srv_out=$rt/srv.out cli_out=$rt/cli.out t0 src crc hex
  filtered_out "$name" && return 0
  cells_run=$((cells_run + 1))
  port=$((port + 1)); t0=$(date +%s.%N)
  case $prog in ib_*) gopt="-x $gidx" ;; *) gopt="-g $gidx" ;; esac
  dev_u="-d urnic0 $gopt -p $port"
  dev_r="-d rxe0 $gopt -p $port"
  : > "$srv_out"; : > "$cli_out"
  if [[ $side == urnic ]]; then
    dir="urnic=server,rxe=client"
    ip netns exec "$NS" "${host_env[@]}" timeout 60 "$prog" $dev_u "$@" > "$srv_out" 2>&1 &
    server_pid=$!
    wait_tcp_listen "$port" --ns "$NS" --pid "$server_pid" --timeout 5 || true
    VMT=90 vm "timeout 60 $prog $dev_r $* $HOST_CTL; echo rc=\$?" > "$cli_out" 2>&1
    crc=$(sed -n 's/^rc=//p' "$cli_out" | tail -1)
    wait "$server_pid"; src=$?
    server_pid=""
  else
    dir="rxe=server,urnic=client"
    vm_server_start "$prog $dev_r $*"
    VMT=30 vm "i=0; while [ \$i -lt 100 ]; do netstat -ltn 2>/dev/null | grep -q ':$port ' && exit 0; sleep 0.1; i=\$((i+1)); done" >/dev/null 2>&1
    nsx "${host_env[@]}" timeout 60 "$prog" $dev_u "$@" $VM_CTL > "$cli_out" 2>&1
    crc=$?
    src=$(vm_server_wait "$srv_out")
  fi
  local dt got
  dt=$(printf '%.1f' "$(echo "$(date +%s.%N) - $t0" | bc)")
  got=$(grep -cE "$expect" "$cli_out")
  if [[ $crc == 0 && $src == 0 && $got -ge 1 ]]; then
    line "$name" "$dir" "$gname" "$mtu" PASS "${dt}s ${retried:+(2nd try; 1st: $retried) }$(grep -E "$expect" "$cli_out" | tail -1 | tr -s ' \t' ' ' | cut -c1-60)"
  elif [[ -z ${retried:-} ]] && perftest_clock_failed "$cli_out" "$srv_out"; then
    # perftest's own clock calibration, not the transfer (tools/lib/perftest_clock.sh).
    retried="perftest could not calibrate its clock" cell "$name" "$side" "$gidx" "$expect" "$prog" "$@"
    return
  elif [[ -n ${RETRY_ONCE:-} && -z ${retried:-} ]]; then
    # Loss cells only: the pingpongs end with a race no transport can win
    # (docs/INTEROP.md): when the ACK of the last message is lost and the
    # receiver has already exited, the sender retransmits to a destroyed QP.
    # And once in CI (2026-11-29) "loss5% ib_send_lat -s 2148
    # urnic=server,rxe=client" hung with neither side printing anything:
    # not yet understood (see docs/INTEROP.md, open question). Run a failed
    # loss cell once more and say so on its line; two failures fail it.
    retried="server rc=${src:-?} client rc=${crc:-?}" cell "$name" "$side" "$gidx" "$expect" "$prog" "$@"
    return
  else
    local r
    r=$(why "$cli_out"); [[ -n $r ]] || r=$(why "$srv_out")
    line "$name" "$dir" "$gname" "$mtu" FAIL "${dt}s server rc=${src:-?} client rc=${crc:-?}: ${r:-no result line}"
    { echo "--- $name $dir $gname $mtu"; echo "client:"; tail -15 "$cli_out"; echo "server:"; tail -15 "$srv_out"; } >> "$rt/failures.log"
  fi
}

cells_run=0
# The rdma_cm peers of cm_cell: urnic's and the kernel peer's addresses.
CM_URNIC=10.99.0.1
CM_PEER=10.99.0.11
PEER=rxe
# cm_cell NAME SIDE EXPECT SERVER_CMD... -- CLIENT_CMD...
#   rdma_cm programs: they find the device from the address, so no -d/-g;
#   @A@ in either command is the server's RoCE address (urnic 10.99.0.1,
#   rxe 10.99.0.11), @C@ the client's, @P@ a fresh port, @D@ the device of
#   the side that runs the command (perftest opens the first device unless
#   told, and takes its transport type from it, not from the device rdma_cm
#   picks: see docs/INTEROP.md, iWARP). PASS: both exit 0
#   and, if EXPECT is not empty, the client's output matches it.
CM_DEV_URNIC=urnic0
CM_DEV_PEER=rxe0
cm_retry=""
cm_retries=0  # perftest cells whose connection setup was retried (below)
cm_cell() {
  local orig=("$@")
  local name=$1 side=$2 expect=$3; shift 3
  local scmd=() ccmd=() a c sd cd dir t0 crc src srv_out=$rt/srv.out cli_out=$rt/cli.out
  while [[ $1 != -- ]]; do scmd+=("$1"); shift; done
  shift
  ccmd=("$@")
  filtered_out "$name" && return 0
  cells_run=$((cells_run + 1))
  port=$((port + 1)); t0=$(date +%s.%N)
  if [[ $side == urnic ]]; then a=$CM_URNIC c=$CM_PEER sd=$CM_DEV_URNIC cd=$CM_DEV_PEER
  else a=$CM_PEER c=$CM_URNIC sd=$CM_DEV_PEER cd=$CM_DEV_URNIC; fi
  scmd=("${scmd[@]//@A@/$a}"); scmd=("${scmd[@]//@C@/$c}"); scmd=("${scmd[@]//@P@/$port}"); scmd=("${scmd[@]//@D@/$sd}")
  ccmd=("${ccmd[@]//@A@/$a}"); ccmd=("${ccmd[@]//@C@/$c}"); ccmd=("${ccmd[@]//@P@/$port}"); ccmd=("${ccmd[@]//@D@/$cd}")
  : > "$srv_out"; : > "$cli_out"
  if [[ $side == urnic ]]; then
    dir="urnic=server,$PEER=client"
    nsx "${host_env[@]}" timeout 60 "${scmd[@]}" > "$srv_out" 2>&1 &
    server_pid=$!
    sleep 1  # listening once rdma_listen returned; no port to watch
    VMT=90 vm "timeout 60 ${ccmd[*]}; echo rc=\$?" > "$cli_out" 2>&1
    crc=$(sed -n 's/^rc=//p' "$cli_out" | tail -1)
    wait "$server_pid"; src=$?
    server_pid=""
  else
    dir="$PEER=server,urnic=client"
    vm_server_start "${scmd[*]}"
    if [[ $PEER == siw ]]; then
      # siw listens on a TCP socket of the VM: wait for it (the emulated
      # peer can take seconds to start a program on a loaded host, and a
      # connect before the listen is refused at once).
      VMT=30 vm "i=0; while [ \$i -lt 200 ]; do netstat -ltn 2>/dev/null | grep -q ':$port ' && exit 0; sleep 0.1; i=\$((i+1)); done" >/dev/null 2>&1
    else
      sleep 2  # the emulated peer starts programs slowly
    fi
    nsx "${host_env[@]}" timeout 60 "${ccmd[@]}" > "$cli_out" 2>&1
    crc=$?
    src=$(vm_server_wait "$srv_out")
  fi
  local dt got=1
  dt=$(printf '%.1f' "$(echo "$(date +%s.%N) - $t0" | bc)")
  [[ -z $expect ]] || got=$(grep -cE "$expect" "$cli_out")
  if [[ $crc == 0 && $src == 0 && $got -ge 1 ]]; then
    line "$name" "$dir" "$gname" "$mtu" PASS "${dt}s${cm_retry:+ (2nd attempt)} $( [[ -n $expect ]] && grep -E "$expect" "$cli_out" | tail -1 | tr -s ' \t' ' ' | cut -c1-60)"
  else
    local r
    r=$(why "$cli_out"); [[ -n $r ]] || r=$(why "$srv_out")
    # A failed cell runs once more (the first attempt kept in failures.log)
    # for one of two causes that are the peer program's, not the device's:
    # - perftest refused its own clock calibration (tools/lib/perftest_clock.sh);
    # - perftest -R connects twice and its server listens again in between;
    #   a second connect that comes first meets no listener (the kernel peer
    #   refuses or resets it at once) and Debian's perftest 4.5 then crashes:
    #   a perftest client of urnic whose connection setup failed before any
    #   data moved (no result row).
    local retry_why=""
    if [[ -z $cm_retry ]]; then
      if perftest_clock_failed "$cli_out" "$srv_out"; then
        retry_why="perftest could not calibrate its clock"
      elif [[ $side != urnic && ($name == ib_* || $name == "iw ib_"*) && $got == 0 ]] &&
        grep -qE 'RDMA_CM_EVENT_(CONNECT_ERROR|REJECTED|UNREACHABLE)' "$cli_out"; then
        retry_why="connection setup failed, no data moved"
      elif [[ $name == *rping* && $crc == 0 ]] && rping_teardown_race "$srv_out"; then
        retry_why="the peer's rping server lost its own teardown race"
      fi
    fi
    if [[ -n $retry_why ]]; then
      { echo "--- $name $dir $gname $mtu: attempt 1 (retried: $retry_why)"
        echo "client:"; tail -8 "$cli_out"; echo "server:"; tail -4 "$srv_out"; } >> "$rt/failures.log"
      cm_retries=$((cm_retries + 1))
      cells_run=$((cells_run - 1))
      cm_retry=1
      cm_cell "${orig[@]}"
      cm_retry=""
      return
    fi
    line "$name" "$dir" "$gname" "$mtu" FAIL "${dt}s server rc=${src:-?} client rc=${crc:-?}: ${r:-no result line}"
    { echo "--- $name $dir $gname $mtu"; echo "client:"; tail -15 "$cli_out"; echo "server:"; tail -15 "$srv_out"
      # siw logs a dropped connection; rxe stays quiet.
      [[ $PEER == siw ]] && { echo "peer dmesg:"; vm 'dmesg | tail -6'; }; } >> "$rt/failures.log"
  fi
}

# rping_teardown_race SERVER_OUT: the server's rping exited 255 only because
# of a race inside rping at its end: the client (urnic) had verified every
# ping and disconnected, the server saw DISCONNECTED ("wait for
# RDMA_READ_ADV state 10", which rping counts as success), and then its CM
# thread read the event channel that the main thread had just destroyed
# ("rdma_get_cm_event: Bad file descriptor", exit(-1)). Seen once in 152
# cells (siw server, 2026-12-02); nothing of the device's is involved.
rping_teardown_race() {
  grep -q 'wait for RDMA_READ_ADV state 10' "$1" && grep -q 'rdma_get_cm_event: Bad file descriptor' "$1" &&
    ! grep -vE 'wait for RDMA_READ_ADV state 10|rdma_get_cm_event: Bad file descriptor|DISCONNECT EVENT|^rc=' "$1" | grep -qiE 'error|fail'
}

# cm_reject_cell NAME SIDE: rping to a port nobody listens on at SIDE
#   (urnic: 10.99.0.1, rxe: 10.99.0.11), from the other side: the CM there
#   must answer with a REJ (reason 8, invalid service ID), the client must
#   see RDMA_CM_EVENT_REJECTED and fail, within seconds (no retries to a
#   timeout).
cm_reject_cell() {
  local name=$1 side=$2 a dir t0 rc out=$rt/cli.out
  filtered_out "$name" && return 0
  cells_run=$((cells_run + 1))
  port=$((port + 1)); t0=$(date +%s.%N)
  if [[ $side == urnic ]]; then
    a=10.99.0.1; dir="urnic=server,rxe=client"
    VMT=60 vm "timeout 30 rping -c -a $a -p $port -C 1; echo rc=\$?" > "$out" 2>&1
    rc=$(sed -n 's/^rc=//p' "$out" | tail -1)
  else
    a=10.99.0.11; dir="rxe=server,urnic=client"
    nsx "${host_env[@]}" timeout 30 rping -c -a $a -p $port -C 1 > "$out" 2>&1
    rc=$?
  fi
  local dt
  dt=$(printf '%.1f' "$(echo "$(date +%s.%N) - $t0" | bc)")
  if [[ -n $rc && $rc != 0 && $rc != 124 ]] && grep -qE 'REJECTED.*error 8' "$out"; then
    line "$name" "$dir" "$gname" "$mtu" PASS "${dt}s exit $rc: $(grep -E 'REJECTED' "$out" | tail -1 | cut -c1-50)"
  else
    line "$name" "$dir" "$gname" "$mtu" FAIL "${dt}s exit ${rc:-?}: $(tail -1 "$out" | cut -c1-80)"
  fi
}

capture_start() { # capture_start FILE
  cells_run=0
  ip netns exec "$NS" dumpcap -q -P -i br-roce -w "$1" > /dev/null 2>&1 &
  cap_pid=$!
  for _ in $(seq 50); do [[ -s $1 ]] && break; sleep 0.1; done
}
capture_check() { # capture_check FILE GID MTU: every RoCE frame decodes, every ICRC ok
  sleep 0.3
  stop_pid "$cap_pid"; cap_pid=""
  [[ $cells_run -gt 0 ]] || return 0  # --only left this group empty
  local out=$rt/decode.txt n bad
  "$cli" frame decode "$1" > "$out" 2>&1
  local rc=$?
  n=$(grep -c ' roce2 ' "$out")
  bad=$(grep -cE 'icrc=bad|malformed' "$out")
  if [[ $rc == 0 && $n -gt 0 && $bad == 0 ]]; then
    line "frame decode (br-roce capture)" "both" "$2" "$3" PASS "$n RoCE v2 frames, every ICRC ok"
  else
    line "frame decode (br-roce capture)" "both" "$2" "$3" FAIL "$n RoCE v2 frames, $bad bad (exit $rc): $(grep -E 'icrc=bad|malformed' "$out" | head -1 | cut -c1-80)"
  fi
}

# ---------------------------------------------------------------- matrix
in_group() { [[ " $groups " == *" $1 "* ]]; }
vm_up
log "peer: $(vm 'rdma link show' | tr -d '\r' | head -1)"
# The pairwise matrix (the default; --full crosses every factor): the i-th
# MTU runs the whole cell list with the i-th GID type (CRC setting), so every
# value of every factor gets every cell once; the other combinations run a
# cross subset (RC SEND/WRITE/READ with segmentation, both directions). The
# factors are independent in the code (GID type: addressing and GRH; MTU:
# segmentation; CRC: the MPA trailer): the subset checks that each crossed
# combination works at all without running every cell again.
roce_cross='^(ibv_rc_pingpong|ib_write_bw -s|ib_read_lat)'
iw_cross='^iw (rping -V -C 10 -S 60000|ib_write_bw)'
nth() { # nth K WORD...: the K-th word (mod their number)
  local k=$1; shift
  local words=("$@")
  printf '%s' "${words[k % ${#words[@]}]}"
}
in_group roce || mtus=""
mtu_i=-1
for mtu in $mtus; do
  mtu_i=$((mtu_i + 1))
  case $mtu in
    1024) vm_mtu=1500 ;;
    4096) vm_mtu=9000 ;;
    *) echo "interop: unsupported MTU $mtu (1024 or 4096)" >&2; exit 2 ;;
  esac
  vm "ip link set eth0 mtu $vm_mtu" >/dev/null
  urnic_start "$mtu"
  multi=$((2 * mtu + 100))   # three packets
  ud=$((mtu - 40))           # UD: one packet (pingpong posts size + 40 GRH)
  # shellcheck disable=SC2086 # word lists
  lead=$(nth "$mtu_i" $gids)
  for g in $gids; do
    subset=""; [[ $full == 0 && $g != "$lead" ]] && subset=$roce_cross
    case $g in ipv4) gidx=1 ;; ll) gidx=0 ;; *) echo "interop: GID type $g?" >&2; exit 2 ;; esac
    gname=$g
    log "MTU $mtu, GID $g${subset:+ (cross subset)}"
    pcap=$capdir/interop-$g-$mtu.pcap
    capture_start "$pcap"
    pp='[0-9]+ iters in [0-9.]+ seconds'
    row='^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+'
    P=(-F -n 20)
    for side in urnic rxe; do
      cell "ibv_rc_pingpong -s $multi -c"  $side $gidx "$pp" ibv_rc_pingpong -m "$mtu" -s "$multi" -n 20 -c
      cell "ibv_uc_pingpong -s $multi -c"  $side $gidx "$pp" ibv_uc_pingpong -m "$mtu" -s "$multi" -n 20 -c
      cell "ibv_ud_pingpong -s $ud -c"     $side $gidx "$pp" ibv_ud_pingpong -s "$ud" -n 20 -c
      cell "ibv_srq_pingpong -q 4 -s $multi -c" $side $gidx "$pp" ibv_srq_pingpong -m "$mtu" -q 4 -s "$multi" -n 20 -c
      cell "ib_send_lat -s 64"             $side $gidx "$row" ib_send_lat -m "$mtu" -s 64 "${P[@]}"
      cell "ib_send_bw -s $multi"          $side $gidx "$row" ib_send_bw -m "$mtu" -s "$multi" "${P[@]}"
      cell "ib_write_lat -s 64"            $side $gidx "$row" ib_write_lat -m "$mtu" -s 64 "${P[@]}"
      cell "ib_write_bw -s $multi"         $side $gidx "$row" ib_write_bw -m "$mtu" -s "$multi" "${P[@]}"
      cell "ib_read_lat -s $multi"         $side $gidx "$row" ib_read_lat -m "$mtu" -s "$multi" "${P[@]}"
      cell "ib_read_bw -s 64"              $side $gidx "$row" ib_read_bw -m "$mtu" -s 64 "${P[@]}"
      cell "ib_atomic_lat FETCH_AND_ADD"   $side $gidx "$row" ib_atomic_lat -m "$mtu" -A FETCH_AND_ADD "${P[@]}"
      cell "ib_atomic_bw CMP_AND_SWAP"     $side $gidx "$row" ib_atomic_bw -m "$mtu" -A CMP_AND_SWAP "${P[@]}"
      cell "ib_write_bw -c UC -s $multi"   $side $gidx "$row" ib_write_bw -c UC -m "$mtu" -s "$multi" "${P[@]}"
      cell "ib_send_bw -c UD -s $ud"       $side $gidx "$row" ib_send_bw -c UD -m "$mtu" -s "$ud" "${P[@]}"
      # RDMA CM (IB CM MADs on QP1 against the kernel's ib_cm/rdma_cm):
      # IPv4 addresses only (urnic's CM speaks IPv4 to other hosts).
      if [[ $g == ipv4 ]]; then
        cm_cell "rping -V -C 20 -S $multi"   $side '' rping -s -a @A@ -p @P@ -V -C 20 -S "$multi" -- \
          rping -c -a @A@ -p @P@ -V -C 20 -S "$multi"
        cm_cell "ucmatose -c 2 -C 10"        $side 'return status 0' ucmatose -p @P@ -c 2 -C 10 -- \
          ucmatose -s @A@ -p @P@ -c 2 -C 10
        cm_cell "udaddy -c 2 -C 10"          $side 'return status 0' udaddy -c 2 -C 10 -- \
          udaddy -s @A@ -c 2 -C 10
        cm_cell "rdma_server / rdma_client"  $side 'rdma_client: end 0' rdma_server -p @P@ -- \
          rdma_client -s @A@ -p @P@
        cm_reject_cell "rping to a port nobody listens on" $side
        # UD multicast: the server side receives (joined first), the client
        # side sends after its join (mckey waits 3 s); urnic's udp link
        # joins the group on br-roce, rxe's rdma_cm sends the IGMP report.
        cm_cell "mckey -C 20 (multicast)"    $side 'return status 0' mckey -m 239.1.2.$((mtu / 1024)) -b @A@ -C 20 -- \
          mckey -m 239.1.2.$((mtu / 1024)) -b @C@ -s -C 20
        # rsockets against the kernel host's librdmacm (rsocket protocol v1).
        cm_cell "rstream -T v -S 65536 -C 100" $side '^custom +' rstream -b @A@ -p @P@ -T v -S 65536 -C 100 -- \
          rstream -s @A@ -p @P@ -T v -S 65536 -C 100
        cm_cell "riostream -T v -S 65536 -C 100" $side '^custom +' riostream -b @A@ -p @P@ -T v -S 65536 -C 100 -- \
          riostream -s @A@ -p @P@ -T v -S 65536 -C 100
      fi
      # perftest -R connects twice; its server listens again in between, and
      # a client whose second REQ comes first gets the kernel's immediate
      # REJ (no listener) and crashes (Debian's perftest 4.5). The emulated
      # peer is slow enough to lose that race, so these run with urnic as
      # server (whose CM lets the REQ wait: engine/cm/README.md); urnic's
      # active side meets the kernel's passive side in the cells above.
      if [[ $g == ipv4 && $side == urnic ]]; then
        cm_cell "ib_send_bw -R -s $multi"    $side "$row" ib_send_bw -R -p @P@ -s "$multi" "${P[@]}" -- \
          ib_send_bw -R -p @P@ -s "$multi" "${P[@]}" @A@
        cm_cell "ib_read_lat -R -s 64"       $side "$row" ib_read_lat -R -p @P@ -s 64 "${P[@]}" -- \
          ib_read_lat -R -p @P@ -s 64 "${P[@]}" @A@
        cm_cell "ib_write_bw -R -s $multi"   $side "$row" ib_write_bw -R -p @P@ -s "$multi" "${P[@]}" -- \
          ib_write_bw -R -p @P@ -s "$multi" "${P[@]}" @A@
      fi
    done
    capture_check "$pcap" "$g" "$mtu"
  done
done

subset=""
# ---------------------------------------------------------------- gso
# urnic with "udp_gso" (issue 23): a 64 KiB message at MTU 4096 leaves as
# runs of up to 15 packets in one UDP GSO send each, and the kernel cuts
# them before the VM's tap (numbering the segments' IP IDs 0, 1, 2, ...),
# so rxe checking every ICRC against the ID it sees is the test of the
# ICRCs urnic computed for them; urnic receives as always (UDP GRO on).
# Data is checked by the pingpongs (-c); the READ cells make urnic's
# responder send the runs. No capture check: dumpcap on br-roce sees the
# runs before the tap cuts them, as one frame each (engine/link/udp_link.hpp).
if in_group gso; then
  mtu=4096; gname=ipv4; gidx=1
  vm "ip link set eth0 mtu 9000" >/dev/null
  urnic_start 4096 '' '"udp_gso": true'
  log "gso: urnic sends runs of packets with UDP GSO"
  cells_run=0
  dev_stats "$rt/gso0.json"
  pp='[0-9]+ iters in [0-9.]+ seconds'
  row='^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+'
  P=(-F -n 50)
  for side in urnic rxe; do
    cell "gso ibv_rc_pingpong -s 65536 -c" $side 1 "$pp" ibv_rc_pingpong -m 4096 -s 65536 -n 50 -c
    cell "gso ib_write_bw -s 65536"        $side 1 "$row" ib_write_bw -m 4096 -s 65536 "${P[@]}"
    cell "gso ib_read_bw -s 65536"         $side 1 "$row" ib_read_bw -m 4096 -s 65536 "${P[@]}"
    cell "gso ib_send_bw -s 65536"         $side 1 "$row" ib_send_bw -m 4096 -s 65536 "${P[@]}"
    # RoCE v2 over IPv6 (GID[0], link-local): runs without IP IDs.
    gname=ll
    cell "gso ib_write_bw -s 65536 (IPv6)" $side 0 "$row" ib_write_bw -m 4096 -s 65536 "${P[@]}"
    gname=ipv4
  done
  dev_stats "$rt/gso1.json"
  gso_delta() { echo $(( $(dev_counter "$rt/gso1.json" "$1") - $(dev_counter "$rt/gso0.json" "$1") )); }
  sends=$(gso_delta link_gso_sends) sent=$(gso_delta tx_pkts) resent=$(gso_delta retransmitted_pkts)
  # RC recovers from segments rxe drops (a wrong ICRC: only the first of
  # each run would pass), so the cells alone would pass slowly; on this
  # lossless bridge, more than 1 % of the packets resent means drops.
  if [[ $cells_run -eq 0 ]]; then
    :  # --only left the group empty
  elif [[ ${sends:-0} -gt 0 && $((100 * ${resent:-0})) -le ${sent:-0} ]]; then
    line "gso: runs sent with UDP GSO" "-" ipv4 4096 PASS "$sends GSO sends, $resent of $sent packets retransmitted"
  else
    line "gso: runs sent with UDP GSO" "-" ipv4 4096 FAIL "$sends GSO sends (link_gso_sends), $resent of $sent packets retransmitted (rxe dropped segments?)"
  fi
fi

# ---------------------------------------------------------------- loss
# 5 % of the frames lost in each direction: urnic's own fault injection on
# its transmit path (the device's "fault" config) and tc netem on the
# peer's eth0 (what rxe sends); this machine's kernel has no sch_netem for
# the namespace bridge. RC must still deliver every message, validated by
# the programs (-c) where they can check data.
if [[ $loss == 1 ]] && in_group loss; then
  mtu=1024; gname=ipv4; gidx=1
  vm "ip link set eth0 mtu 1500" >/dev/null
  urnic_start 1024 '{"loss": 0.05, "seed": 6}'
  if vm "/sbin/tc qdisc replace dev eth0 root netem loss 5% && echo netem-ok" | grep -q netem-ok; then
    log "loss: 5% each way (urnic fault injection + netem in the peer)"
    pcap=$capdir/interop-loss.pcap
    capture_start "$pcap"
    pp='[0-9]+ iters in [0-9.]+ seconds'
    row='^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+'
    # Local ACK timeout 2^18 x 4.096 us (~1.07 s) instead of perftest's 2^14
    # (~67 ms): the emulated peer can stall for over a second while it
    # works through a burst of retransmissions, longer than 7 retries of
    # 67 ms, and urnic (as the IBTA says) gives up after retry_cnt retries
    # where rxe retries for ever (docs/INTEROP.md).
    L=(-F -n 50 -u 18)
    for side in urnic rxe; do
      RETRY_ONCE=1 cell "loss5% ibv_rc_pingpong -s 2148 -c" $side 1 "$pp" ibv_rc_pingpong -m 1024 -s 2148 -n 50 -c
      RETRY_ONCE=1 cell "loss5% ib_send_lat -s 2148"         $side 1 "$row" ib_send_lat -m 1024 -s 2148 "${L[@]}"
      RETRY_ONCE=1 cell "loss5% ib_write_bw -s 8192"         $side 1 "$row" ib_write_bw -m 1024 -s 8192 "${L[@]}"
      RETRY_ONCE=1 cell "loss5% ib_read_bw -s 8192"          $side 1 "$row" ib_read_bw -m 1024 -s 8192 "${L[@]}"
      RETRY_ONCE=1 cell "loss5% ib_send_bw -s 8192"          $side 1 "$row" ib_send_bw -m 1024 -s 8192 "${L[@]}"
      RETRY_ONCE=1 cell "loss5% ib_atomic_bw FETCH_AND_ADD"  $side 1 "$row" ib_atomic_bw -m 1024 -A FETCH_AND_ADD "${L[@]}"
    done
    capture_check "$pcap" ipv4 1024
    drops=$(vm "/sbin/tc -s qdisc show dev eth0" | sed -n 's/.*dropped \([0-9]*\).*/\1/p' | head -1)
    log "loss: netem in the peer dropped ${drops:-?} frames"
  else
    line "loss setup (netem in the peer VM)" "-" ipv4 1024 FAIL "tc netem unavailable in the peer (rebuild: tools/peer-vm/build-peer-vm.sh)"
  fi
  vm "/sbin/tc qdisc del dev eth0 root" >/dev/null 2>&1
fi

# ---------------------------------------------------------------- ecn
# Congestion signals across the two implementations (issue 21): rxe neither
# marks ECT of its own accord nor knows CNPs, and must be unaffected by
# urnic's. urnic's RC frames carry ECT(0) (its default, as hardware); rxe
# sends ECT(0) when its address handle's traffic class says so (perftest
# --tclass 2), and netem in the peer (`loss 10% ecn`) marks 10 % of those
# frames Congestion Experienced instead of dropping them. urnic, the
# notification point, answers the CE marks with CNPs to rxe's QPs, which rxe
# must ignore: the transfers complete, and the CNPs are on the wire (decoded
# in the capture) and counted by urnic. Retransmissions are reported.
if in_group ecn; then
  mtu=1024; gname=ipv4; gidx=1
  vm "ip link set eth0 mtu 1500" >/dev/null
  urnic_start 1024
  # Only RoCE (UDP port 4791) goes through netem: a prio qdisc's third band,
  # which nothing but the filter fills. perftest's TCP is not ECN-capable,
  # and netem would drop it instead of marking it.
  if vm "/sbin/tc qdisc replace dev eth0 root handle 1: prio && /sbin/tc qdisc add dev eth0 parent 1:3 handle 30: netem loss 10% ecn && /sbin/tc filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip protocol 17 0xff match ip dport 4791 0xffff flowid 1:3 && echo netem-ok" | grep -q netem-ok; then
    log "ecn: 10% of rxe's ECT frames marked CE by netem in the peer"
    dev_stats "$rt/ecn0.json"
    pcap=$capdir/interop-ecn.pcap
    capture_start "$pcap"
    row='^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+'
    for side in urnic rxe; do
      cell "ecn ib_write_bw -s 65536 --tclass 2" $side 1 "$row" ib_write_bw -m 1024 -s 65536 -n 300 -F --tclass 2
      cell "ecn ib_send_bw -s 8192 --tclass 2"   $side 1 "$row" ib_send_bw -m 1024 -s 8192 -n 300 -F --tclass 2
    done
    capture_check "$pcap" ipv4 1024
    dev_stats "$rt/ecn1.json"
    ce=$(( $(dev_counter "$rt/ecn1.json" ce_rcvd) - $(dev_counter "$rt/ecn0.json" ce_rcvd) ))
    cnps=$(( $(dev_counter "$rt/ecn1.json" cnps_sent) - $(dev_counter "$rt/ecn0.json" cnps_sent) ))
    retx=$(( $(dev_counter "$rt/ecn1.json" retransmitted_pkts) - $(dev_counter "$rt/ecn0.json" retransmitted_pkts) ))
    if command -v tshark > /dev/null; then
      wire_cnp=$(tshark --disable-protocol rpcordma -r "$pcap" -Y 'infiniband.bth.opcode == 129 && ip.src == 10.99.0.1' 2>/dev/null | wc -l)
      wire_ect=$(tshark --disable-protocol rpcordma -r "$pcap" -Y 'infiniband && ip.src == 10.99.0.1 && ip.dsfield.ecn == 2' 2>/dev/null | wc -l)
      wire_ce=$(tshark --disable-protocol rpcordma -r "$pcap" -Y 'infiniband && ip.dst == 10.99.0.1 && ip.dsfield.ecn == 3' 2>/dev/null | wc -l)
    else
      wire_cnp=$cnps wire_ect=1 wire_ce=$ce
    fi
    detail="urnic: $ce CE received, $cnps CNPs sent to rxe, $retx retransmitted; wire: $wire_ce CE to urnic, $wire_cnp CNPs, $wire_ect ECT(0) from urnic"
    log "ecn: $detail"
    if (( ce > 0 && cnps > 0 && wire_cnp > 0 && wire_ect > 0 )); then
      line "ecn: CNPs to rxe, ECT(0) from urnic" "both" ipv4 1024 PASS "$detail"
    else
      line "ecn: CNPs to rxe, ECT(0) from urnic" "both" ipv4 1024 FAIL "$detail"
    fi
  else
    line "ecn setup (netem in the peer VM)" "-" ipv4 1024 FAIL "tc netem unavailable in the peer (rebuild: tools/peer-vm/build-peer-vm.sh)"
  fi
  vm "/sbin/tc qdisc del dev eth0 root" >/dev/null 2>&1
fi

# ---------------------------------------------------------------- incast-red
# Issue 21's bottleneck that marks, as a kernel qdisc: this host's kernel has
# no sch_red (acceptance-incast uses a user-space switch, ecn_switch), the
# peer VM's Debian kernel has. Two sender namespaces on br-roce
# (10.99.0.21, .22) and one receiver namespace on br-iw (10.99.1.21), each
# with its own urnicd (udp link, the device's defaults: ECT(0), DCQCN with
# the published parameters), route to each other through the VM (eth0
# 10.99.0.11, eth1 10.99.1.11, ip_forward on). The VM's eth1, towards the
# receiver, is the bottleneck: htb limits UDP port 4791 (RoCE v2) to
# $ir_rate and queues it in `red ... ecn`, which marks ECT frames CE by
# its average queue (drops beyond its byte limit); everything else
# (perftest's TCP) passes in a class of its own. Each sender runs unmodified
# ib_write_bw (default size and depth) to its own server in the receiver,
# DCQCN on and then off. The VM under TCG forwards about 480 Mb/s of 4 KiB
# UDP frames (iperf3, 2026-12-05), so the limit is well below what it can
# forward; what the senders offer beyond that is lost at the VM's input
# (its tap queue), counted and reported.
# -u 18 (local ACK timeout ~1.07 s, not perftest's ~67 ms): at 67 ms an
# ib_write_bw ended in IBV_WC_RETRY_EXC_ERR (status 12) in each of 3 runs
# with DCQCN on and in 1 of 2 with it off (2026-12-05): go-back-N into a
# full queue behind an emulated router (the loss group uses the same for
# the same reason). A run can take 16 s instead of 4 (ACK timeouts and
# go-back-N rounds; 25 s in trials with other settings), hence `timeout 90`.
# Checked: every ib_write_bw exits 0 with DCQCN on; in both modes the qdisc
# marked, the receiver counted CE and sent CNPs and every sender received
# some; with DCQCN on every sender cut its rate, off none did. Reported
# (incast_summary.py, as acceptance-incast): per-flow rates, Jain's index,
# the qdisc's marks and drops, the queue sampled in the VM, retransmissions.
# Not asserted, because not so here: fairness, a bounded queue, few resends
# with DCQCN on. Both modes collapse (0.06-2 MB/s per flow; docs/INTEROP.md
# has the figures and why).
ir_rate=200mbit
ir_dur=4
ir_senders=2
ir_tag=$$
ir_nsr=$(netns_name irr)
ir_ns() { # ir_ns H: the namespace of sender H, or the receiver's (r)
  if [[ $1 == r ]]; then echo "$ir_nsr"; else netns_name "irs$1"; fi
}
ir_addr() { if [[ $1 == r ]]; then echo 10.99.1.21; else echo "10.99.0.2$1"; fi; }
# ir_fabric: the namespaces, each a veth into its bridge and a route via the VM
ir_fabric() {
  local h ns dev peer br via to
  for h in r $(seq "$ir_senders"); do
    ns=$(ir_ns "$h")
    if [[ $h == r ]]; then dev=irr$ir_tag peer=irpr$ir_tag br=br-iw via=10.99.1.11 to=10.99.0.0/24
    else dev=irs$h$ir_tag peer=irps$h$ir_tag br=br-roce via=10.99.0.11 to=10.99.1.0/24; fi
    netns_add "$ns" && veth_add "$ns" "$dev" "$NS" "$peer" 9000 "$(ir_addr "$h")/24" || return 1
    nsx ip link set "$peer" master "$br"
    ip -n "$ns" route add "$to" via "$via" || return 1
  done
}
# ir_qdisc: the bottleneck on the VM's eth1, its counters from zero
ir_qdisc() {
  local red="red limit 400000 min 20000 max 100000 avpkt 4000 burst 12 probability 0.2 bandwidth $ir_rate ecn"
  local t=/sbin/tc c  # one line: the VM's agent reads one
  c="$t qdisc del dev eth1 root 2>/dev/null; $t qdisc add dev eth1 root handle 1: htb default 20"
  c+=" && $t class add dev eth1 parent 1: classid 1:10 htb rate $ir_rate ceil $ir_rate"
  c+=" && $t class add dev eth1 parent 1: classid 1:20 htb rate 1gbit"
  c+=" && $t qdisc add dev eth1 parent 1:10 handle 10: $red"
  c+=" && $t filter add dev eth1 parent 1: protocol ip prio 1 u32 match ip protocol 17 0xff match ip dport 4791 0xffff flowid 1:10"
  vm "$c && echo qdisc-ok" 2>&1 | grep -q qdisc-ok
}
ir_daemon_pids=()
ir_start_daemons() { # ir_start_daemons MODE(on|off)
  local h dc=""
  [[ $1 == off ]] && dc=', "dcqcn": {"enabled": false}'
  for h in r $(seq "$ir_senders"); do
    rm -rf "$rt/ir/d$h"
    printf '{"devices": [{"name": "urnic0", "link": "udp", "address": "%s"%s}]}\n' "$(ir_addr "$h")" "$dc" > "$rt/ir/d$h.json"
    urnicd_start "$(ir_ns "$h")" "$rt/ir/d$h" "$rt/ir/$1.d$h.log" --config "$rt/ir/d$h.json" ||
      { tail -3 "$rt/ir/$1.d$h.log" >&2; return 1; }
    ir_daemon_pids+=("$urnicd_pid")
  done
}
ir_stop_daemons() {
  local p
  for p in "${ir_daemon_pids[@]}"; do stop_pid "$p"; done
  ir_daemon_pids=()
}
ir_stats() { # ir_stats H FILE
  ip netns exec "$(ir_ns "$1")" env "URNIC_RUNTIME_DIR=$rt/ir/d$1" "$cli" stats -d urnic0 --json > "$2" 2>/dev/null
}
# ir_incast MODE: one run; its files in $rt/ir/MODE.*; returns 1 if a program failed
ir_incast() {
  local mode=$1 i p rc bad=0 hex tap0 tap1 port1
  local svs=() cls=() wats=() senv renv
  local P=(-d urnic0 -x 1 -F -D "$ir_dur" -u 18)
  ir_qdisc || { log "incast-red: could not set up the qdisc"; return 2; }
  ir_start_daemons "$mode" || { log "incast-red: an urnicd did not start"; return 2; }
  # the queue's backlog, sampled in the VM every 0.25 s until told to stop
  vm "rm -f /tmp/ir-bl.txt /tmp/ir-bl.stop; (while [ ! -e /tmp/ir-bl.stop ]; do /sbin/tc -s qdisc show dev eth1 handle 10: | sed -n 's/^ backlog \([0-9]*\)b.*/\1/p'; sleep 0.25; done > /tmp/ir-bl.txt) </dev/null >/dev/null 2>&1 &" >/dev/null 2>&1
  tap0=$(nsx cat "/sys/class/net/vm$VM-roce/statistics/tx_dropped")
  port1=$((port + 1))
  port=$((port + ir_senders))
  renv=("${host_env[@]}" "URNIC_RUNTIME_DIR=$rt/ir/dr")  # the later value wins
  for ((i = 1; i <= ir_senders; i++)); do
    ip netns exec "$ir_nsr" "${renv[@]}" timeout 90 ib_write_bw "${P[@]}" -p $((port1 + i - 1)) \
      > "$rt/ir/$mode.server$i.out" 2>&1 &
    svs+=($!)
    cleanup_pids+=($!)
  done
  incast_wait_servers "$ir_nsr" "$port1" "$ir_senders"
  for ((i = 1; i <= ir_senders; i++)); do
    ip netns exec "$(ir_ns "$i")" env "URNIC_RUNTIME_DIR=$rt/ir/d$i" "$cli" stats -d urnic0 --watch 100 --json \
      > "$rt/ir/$mode.watch$i.jsonl" 2> /dev/null &
    wats+=($!)
    cleanup_pids+=($!)
  done
  for ((i = 1; i <= ir_senders; i++)); do
    senv=("${host_env[@]}" "URNIC_RUNTIME_DIR=$rt/ir/d$i")
    ip netns exec "$(ir_ns "$i")" "${senv[@]}" timeout 90 ib_write_bw "${P[@]}" -p $((port1 + i - 1)) 10.99.1.21 \
      > "$rt/ir/$mode.client$i.out" 2>&1 &
    cls+=($!)
    cleanup_pids+=($!)
  done
  for ((i = 1; i <= ir_senders; i++)); do
    wait "${cls[i - 1]}"; rc=$?
    echo "$rc" > "$rt/ir/$mode.exit$i"
    [[ $rc -ne 0 ]] && { bad=1; log "incast-red dcqcn $mode: client $i exit $rc: $(why "$rt/ir/$mode.client$i.out")"; }
    wait "${svs[i - 1]}"; rc=$?
    [[ $rc -ne 0 ]] && { bad=1; log "incast-red dcqcn $mode: server $i exit $rc: $(why "$rt/ir/$mode.server$i.out")"; }
  done
  for p in "${wats[@]}"; do stop_pid "$p"; done
  tap1=$(nsx cat "/sys/class/net/vm$VM-roce/statistics/tx_dropped")
  vm "touch /tmp/ir-bl.stop; sleep 0.5; cat /tmp/ir-bl.txt" > "$rt/ir/$mode.backlog.txt" 2>/dev/null
  vm "/sbin/tc -s -j qdisc show dev eth1 handle 10:" > "$rt/ir/$mode.tc.json" 2>/dev/null
  python3 - "$rt/ir/$mode.tc.json" "$rt/ir/$mode.backlog.txt" $((tap1 - tap0)) > "$rt/ir/$mode.qdisc.json" << 'PYEOF'
import json, sys
q = [x for x in json.load(open(sys.argv[1])) if x.get("kind") == "red"][0]
bl = [int(l) for l in open(sys.argv[2]) if l.strip().isdigit()]
print(json.dumps({"sent_pkts": q["packets"], "marked": q["marked"], "early": q["early"], "pdrop": q["pdrop"],
                  "dropped": q["drops"], "overlimits": q["overlimits"], "tap_dropped": int(sys.argv[3]),
                  "backlog_samples": bl}))
PYEOF
  ir_stats r "$rt/ir/$mode.r.json"
  for ((i = 1; i <= ir_senders; i++)); do ir_stats "$i" "$rt/ir/$mode.s$i.json"; done
  ir_stop_daemons
  return $bad
}
if in_group incast-red && ! filtered_out "incast-red"; then  # --only selects it by that name
  mtu=4096; gname=ipv4
  mkdir -p "$rt/ir"
  vm "ip link set eth0 mtu 9000; ip link set eth1 mtu 9000; sysctl -qw net.ipv4.ip_forward=1" >/dev/null
  if ! ir_fabric; then
    line "incast-red fabric" "-" ipv4 4096 FAIL "could not build the namespaces"
  elif ! ir_qdisc; then
    line "incast-red setup (htb + red in the peer VM)" "-" ipv4 4096 FAIL "tc htb/red unavailable in the peer (rebuild: tools/peer-vm/build-peer-vm.sh)"
  else
    log "incast-red: 2 senders -> VM (htb $ir_rate, red ecn) -> 1 receiver"
    for mode in on off; do
      attempt=1
      while :; do
        ir_incast "$mode"
        rc=$?
        if [[ $rc == 1 && $attempt == 1 ]] && perftest_clock_failed "$rt/ir/$mode".*.out; then
          log "incast-red dcqcn $mode: perftest could not calibrate its clock; once more"
          attempt=2
          continue
        fi
        break
      done
      name="incast-red dcqcn $mode"
      dir="2 urnic -> urnic"
      if [[ $rc == 2 ]]; then line "$name" "$dir" ipv4 4096 FAIL "set-up failed (see the log above)"; continue; fi
      echo "interop: incast-red, DCQCN $mode (2 x ib_write_bw -D $ir_dur -u 18 through htb $ir_rate + red ecn):"
      python3 "$root/tests/acceptance/incast_summary.py" "$rt/ir" "$mode" "$ir_senders" "$ir_dur" ||
        { line "$name" "$dir" ipv4 4096 FAIL "no figures"; continue; }
      [[ -n $keep_captures ]] && { mkdir -p "$capdir/incast-red"; cp "$rt/ir/$mode".* "$capdir/incast-red/"; }
      get() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$rt/ir/$mode.summary.json" "$1"; }
      incast_counts "$rt/ir/$mode.summary.json" qdisc || { line "$name" "$dir" ipv4 4096 FAIL "its summary cannot be read"; continue; }
      retx=$(get '" + ".join(str(f["retransmitted_pkts"]) for f in d["flows"])')
      mbps=$(get '" + ".join(str(f["perftest_MBps"]) for f in d["flows"])')
      jain=$(get 'd["jain"]')
      drops=$(get 'd["qdisc"]["dropped"]')
      tapd=$(get 'd["qdisc"]["tap_dropped"]')
      detail="qdisc marked $marked, dropped $drops (+$tapd at the VM's input); receiver CE $ce, CNPs $cnps; senders CNPs >= $rcvd, cuts >= $cuts; $mbps MB/s, Jain $jain; retransmitted $retx"
      ok=1
      (( marked > 0 && ce > 0 && cnps > 0 && rcvd > 0 )) || ok=0
      if [[ $mode == on ]]; then
        (( rc == 0 && cuts > 0 )) || ok=0
      else
        # Without congestion control an RC QP may run out of retries (the
        # collapse DCQCN is for): reported, not failed, as acceptance-incast.
        [[ $rc != 0 ]] && detail="an ib_write_bw failed (reported); $detail"
        (( allcuts == 0 )) || ok=0
      fi
      if [[ $ok == 1 ]]; then line "$name" "$dir" ipv4 4096 PASS "$detail"
      else line "$name" "$dir" ipv4 4096 FAIL "$([[ $rc != 0 ]] && echo "an ib_write_bw failed; ")$detail"; fi
    done
  fi
  vm "/sbin/tc qdisc del dev eth1 root; sysctl -qw net.ipv4.ip_forward=0" >/dev/null 2>&1
  for n in "${cleanup_netns[@]}"; do ip netns del "$n" 2>/dev/null; done
  cleanup_netns=()
fi

# ---------------------------------------------------------------- iwarp-siw
# urnic_iw0 on 10.99.1.1 (br-iw) against siw0 on the VM's eth1 (10.99.1.11),
# rdma_cm programs in both directions, at VM MTU 1500 and 9000, with MPA
# CRC on (urnic asks: a siw responder turns it on only when asked, and a
# siw initiator follows urnic's Reply) and off. No atomics or immediate
# data: siw has neither. Each CRC setting is checked in a capture of br-iw
# (every MPA Reply's C flag, every FPDU's CRC).
urnic_iw_start() { # urnic_iw_start CRC(on|off)
  local crc=request
  [[ $1 == off ]] && crc=off
  [[ -n $daemon_pid ]] && stop_pid "$daemon_pid"
  printf '{"devices": [{"name": "urnic_iw0", "transport": "iwarp", "address": "10.99.1.1", "mpa_crc": "%s", "mpa_markers": "off"}]}\n' \
    "$crc" > "$rt/urnicd.json"
  rm -rf "${rt:?}/run"
  urnicd_start "$NS" "$rt/run" "$rt/urnicd.log" --config "$rt/urnicd.json" || { cat "$rt/urnicd.log" >&2; echo "interop: FAIL: urnicd did not start on 10.99.1.1"; exit 1; }
}
# iw_cell NAME SIDE EXPECT SERVER_CMD -- CLIENT_CMD: cm_cell, $repeat times
# in a row; passed/total per cell go to $rt/repeat.txt.
iw_cell() {
  local name=$1 side=$2 p0=$pass r d=urnic=server,siw=client
  filtered_out "$name" && return 0
  [[ $side == siw ]] && d=siw=server,urnic=client
  for r in $(seq "$repeat"); do cm_cell "$@"; done
  printf '%-40s %-22s %-7s %-5s %s/%s\n' "$name" "$d" "$gname" "$mtu" "$((pass - p0))" "$repeat" >> "$rt/repeat.txt"
}
iw_capture_start() { # iw_capture_start FILE
  cells_run=0
  ip netns exec "$NS" dumpcap -q -P -i br-iw -f tcp -w "$1" > /dev/null 2>&1 &
  cap_pid=$!
  for _ in $(seq 50); do [[ -s $1 ]] && break; sleep 0.1; done
}
iw_capture_check() { # iw_capture_check FILE CRC(on|off) MTU
  sleep 0.3
  stop_pid "$cap_pid"; cap_pid=""
  [[ $cells_run -gt 0 ]] || return 0
  local out=$rt/decode.txt c=0 word=off reps bad n good errs
  [[ $2 == on ]] && { c=1; word=ok; }
  "$cli" frame decode "$1" > "$out" 2>&1
  reps=$(grep -c 'MPA_REP' "$out")
  bad=$(grep -o 'MPA_REP rev=[0-9] M=[01] C=[01] R=0' "$out" | grep -vc "M=0 C=$c")
  n=$(grep -oE 'crc=[a-z]+[(]?' "$out" | wc -l)
  good=$(grep -oE "crc=$word[(]?" "$out" | grep -vc '(')
  errs=$(grep -c 'FPDU error\|DDP malformed' "$out")
  if [[ $reps -gt 0 && $bad == 0 && $n -gt 0 && $good == "$n" && $errs == 0 ]]; then
    line "frame decode (br-iw capture)" "both" "crc-$2" "$3" PASS "$reps MPA Replies with C=$c, $n FPDUs all crc=$word"
  else
    line "frame decode (br-iw capture)" "both" "crc-$2" "$3" FAIL "$reps Replies ($bad not C=$c), $good/$n FPDUs crc=$word, $errs errors"
  fi
}
if in_group iwarp-siw; then
  CM_URNIC=10.99.1.1
  CM_PEER=10.99.1.11
  CM_DEV_URNIC=urnic_iw0
  CM_DEV_PEER=siw0
  PEER=siw
  row='^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+'
  # Latency rows may read "inf" when the client is in the VM: perftest
  # derives its clock rate from a regression of TSC against gettimeofday,
  # which an emulated CPU on a loaded host can fail (then 0 MHz); the row
  # still says all iterations completed (docs/INTEROP.md).
  lat_row='^ *[0-9]+ +[0-9]+ +([0-9.]+|inf) +([0-9.]+|inf)'
  P=(-F -n 20)
  iw_i=-1
  for mtu in $iw_mtus; do
    iw_i=$((iw_i + 1))
    vm "ip link set eth1 mtu $mtu" >/dev/null
    big=$((3 * mtu + 100))   # several segments
    # shellcheck disable=SC2086 # word lists
    lead=$(nth "$iw_i" $iw_crcs)
    for crc in $iw_crcs; do
      subset=""; [[ $full == 0 && $crc != "$lead" ]] && subset=$iw_cross
      gname=crc-$crc
      log "iwarp-siw: VM MTU $mtu, CRC $crc${subset:+ (cross subset)}"
      urnic_iw_start "$crc"
      pcap=$capdir/interop-iw-$crc-$mtu.pcap
      iw_capture_start "$pcap"
      for side in urnic siw; do
        iw_cell "iw rping -V -C 20"               $side '' rping -s -a @A@ -p @P@ -V -C 20 -- \
          rping -c -a @A@ -p @P@ -V -C 20
        iw_cell "iw rping -V -C 10 -S 60000"      $side '' rping -s -a @A@ -p @P@ -V -C 10 -S 60000 -- \
          rping -c -a @A@ -p @P@ -V -C 10 -S 60000
        iw_cell "iw ucmatose -c 2 -C 10"          $side 'return status 0' ucmatose -p @P@ -c 2 -C 10 -- \
          ucmatose -s @A@ -p @P@ -c 2 -C 10
        # -d @D@ on every perftest: ib_send_bw's iWARP credit Writes are
        # used only if the device it opens first is iWARP (docs/INTEROP.md).
        iw_cell "iw ib_send_bw -R -s $big"        $side "$row" ib_send_bw -R -d @D@ -p @P@ -s "$big" "${P[@]}" -- \
          ib_send_bw -R -d @D@ -p @P@ -s "$big" "${P[@]}" @A@
        iw_cell "iw ib_write_bw -R -s $big"       $side "$row" ib_write_bw -R -d @D@ -p @P@ -s "$big" "${P[@]}" -- \
          ib_write_bw -R -d @D@ -p @P@ -s "$big" "${P[@]}" @A@
        iw_cell "iw ib_read_bw -R -s $big"        $side "$row" ib_read_bw -R -d @D@ -p @P@ -s "$big" "${P[@]}" -- \
          ib_read_bw -R -d @D@ -p @P@ -s "$big" "${P[@]}" @A@
        iw_cell "iw ib_send_lat -R -s 64"         $side "$lat_row" ib_send_lat -R -d @D@ -p @P@ -s 64 "${P[@]}" -- \
          ib_send_lat -R -d @D@ -p @P@ -s 64 "${P[@]}" @A@
        iw_cell "iw ib_write_lat -R -s 64"        $side "$lat_row" ib_write_lat -R -d @D@ -p @P@ -s 64 "${P[@]}" -- \
          ib_write_lat -R -d @D@ -p @P@ -s 64 "${P[@]}" @A@
        iw_cell "iw ib_read_lat -R -s $big"       $side "$lat_row" ib_read_lat -R -d @D@ -p @P@ -s "$big" "${P[@]}" -- \
          ib_read_lat -R -d @D@ -p @P@ -s "$big" "${P[@]}" @A@
      done
      iw_capture_check "$pcap" "$crc" "$mtu"
    done
  done
  vm "ip link set eth1 mtu 9000" >/dev/null
fi

# ---------------------------------------------------------------- nvme
# NVMe over Fabrics, RDMA transport, between the kernel's and SPDK's (issue
# 48; docs/MIDDLEWARE.md, "NVMe-oF (SPDK)"): urnic0 at 10.99.0.1 (path MTU
# 1024, the IPv4 GID rdma_cm takes) against rxe0 on the VM's eth0, then
# urnic_iw0 at 10.99.1.1 against siw0 on its eth1 (MTU 1500, MPA CRC on),
# the same two cells ("iw ..."), each transport's bridge captured.
# - kernel initiator -> urnic target: SPDK's nvmf_tgt (RDMA transport at
#   its defaults, a 64 MiB malloc bdev of 4 KiB blocks) in the namespace;
#   the VM's nvme-rdma connects through /dev/nvme-fabrics (what `nvme
#   connect -t rdma` writes), writes random data with dd O_DIRECT in 4 KiB
#   (in-capsule) and 128 KiB blocks (the target reads them with RDMA READ),
#   reads it back in the other size (RDMA WRITE) and compares, deletes the
#   controller; then the target must hold no QP in urnicd while it runs,
#   end on SIGTERM and leave nothing in urnicd.
# - kernel target -> urnic initiator: nvmet-rdma in the VM (configfs) with
#   a 64 MiB file on the VM's tmpfs as namespace 1, a port on 10.99.0.11
#   (10.99.1.11);
#   spdk_nvme_identify (serial number, namespace size) and bdevperf -w
#   verify (every block written, read back and compared) over urnic0; then
#   nothing left in urnicd.
# Needs SPDK built (tests/spdk/build_spdk.sh; --spdk): the interop-nvme
# test of the spdk suite runs the group.
# nvme_vm_script SECONDS SCRIPT: runs the multi-line SCRIPT in the VM (the
# command agent reads one line: the script goes base64-encoded) and prints
# its output and, last, "rc=N".
nvme_vm_script() {
  local b64
  b64=$(base64 -w0 <<< "$2")
  VMT=$1 vm "echo $b64 | base64 -d > /tmp/nvme.sh; sh /tmp/nvme.sh; echo rc=\$?"
}
nvme_objects() { spdk_objects "$1" 2>/dev/null || echo '?'; }
# nvme_fail NAME DIR T0 WHY LOG...: the cell's FAIL line; the logs' tails
# to failures.log.
nvme_fail() {
  local name=$1 dir=$2 t0=$3 why=$4 f
  shift 4
  line "$name" "$dir" "$gname" "$mtu" FAIL "$(printf '%.1f' "$(echo "$(date +%s.%N) - $t0" | bc)")s $why"
  { echo "--- $name $dir"; for f in "$@"; do echo "$f:"; tail -n 25 "$f" 2>/dev/null; done; } >> "$rt/failures.log"
}
NVME_KINIT_NQN=nqn.2016-06.io.spdk:cnode1   # spdk_lib.sh's SPDK_NQN
NVME_KTGT_NQN=nqn.2026-12.org.urnic:kernel-target
NVME_KTGT_SERIAL=URNICKTGT0001
nvme_kernel_initiator_cell() {
  local name="${NVME_PFX}nvme-rdma (kernel) -> nvmf_tgt (SPDK)" dir="urnic=target,$PEER=host"
  local t0 out=$rt/nvme-kinit.vm tlog why="" r
  filtered_out "$name" && return 0
  cells_run=$((cells_run + 1)); t0=$(date +%s.%N)
  SPDK_NQN=$NVME_KINIT_NQN SPDK_SERIAL=SPDK00000000000001
  if ! spdk_start_target > "$rt/nvme-tgt-start.log" 2>&1 || ! spdk_add_transport RDMA >> "$rt/nvme-tgt-start.log" 2>&1 ||
     ! spdk_add_subsystem rdma "$NVME_U" >> "$rt/nvme-tgt-start.log" 2>&1; then
    spdk_stop_target > /dev/null 2>&1
    nvme_fail "$name" "$dir" "$t0" "nvmf_tgt did not start or take its subsystem" "$rt/nvme-tgt-start.log" "$SPDK_TARGET_LOG"
    return
  fi
  tlog=$SPDK_TARGET_LOG
  cleanup_pids+=("$spdk_target_pid")  # if this script ends first (spdk_stop_target below, normally)
  nvme_vm_script 300 "
NQN=$NVME_KINIT_NQN; ADDR=$NVME_U
$(cat <<'EOV'
up() { cut -d' ' -f1 /proc/uptime; }
modprobe nvme_rdma || { echo 'modprobe nvme_rdma failed'; exit 10; }
for c in /sys/class/nvme/nvme*; do [ -e $c/delete_controller ] && echo 1 > $c/delete_controller; done  # an earlier run's
t0=$(up)
exec 3<>/dev/nvme-fabrics || exit 11
if ! echo "transport=rdma,traddr=$ADDR,trsvcid=4420,nqn=$NQN,nr_io_queues=1" >&3; then
  echo "connect failed"; dmesg | grep -i nvme | tail -n 5; exit 12
fi
read -r r <&3; exec 3>&-
i=${r#instance=}; i=${i%%,*}; c=/sys/class/nvme/nvme$i
echo "connected ($r) in $(echo "$(up) - $t0" | bc) s: $(cat $c/transport) $(cat $c/address | tr '\n' ' ')serial=$(cat $c/serial) model=$(cat $c/model | tr -s ' ') state=$(cat $c/state)"
n=0; dev=""
while [ $n -lt 100 ] && [ -z "$dev" ]; do dev=$(ls /sys/block | grep -E '^nvme[0-9]+n1$' | head -1); [ -n "$dev" ] || sleep 0.1; n=$((n + 1)); done
[ -n "$dev" ] || { echo "no namespace block device"; exit 13; }
echo "namespace /dev/$dev: $(cat /sys/block/$dev/size) sectors, logical block $(cat /sys/block/$dev/queue/logical_block_size)"
fail=0
dd if=/dev/urandom of=/tmp/p1 bs=4096 count=1024 2>/dev/null; dd if=/dev/urandom of=/tmp/p2 bs=4096 count=1024 2>/dev/null
t1=$(up)
dd if=/tmp/p1 of=/dev/$dev bs=4096 oflag=direct 2>/dev/null || { echo "write 4 KiB blocks failed"; fail=1; }
dd if=/tmp/p2 of=/dev/$dev bs=128k seek=64 oflag=direct 2>/dev/null || { echo "write 128 KiB blocks failed"; fail=1; }
dd if=/dev/$dev of=/tmp/b1 bs=128k count=32 iflag=direct 2>/dev/null || { echo "read 128 KiB blocks failed"; fail=1; }
dd if=/dev/$dev of=/tmp/b2 bs=4096 skip=2048 count=1024 iflag=direct 2>/dev/null || { echo "read 4 KiB blocks failed"; fail=1; }
echo "8 MiB written and read back with O_DIRECT in $(echo "$(up) - $t1" | bc) s"
if cmp /tmp/p1 /tmp/b1 && cmp /tmp/p2 /tmp/b2; then echo "DATA-OK $(md5sum < /tmp/p1 | cut -c1-8) $(md5sum < /tmp/p2 | cut -c1-8)"; else echo "data differs"; fail=1; fi
echo 1 > $c/delete_controller
n=0; while [ -e $c ] && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
[ -e $c ] && { echo "controller still there after delete_controller"; fail=1; }
rm -f /tmp/p1 /tmp/p2 /tmp/b1 /tmp/b2
dmesg | grep -E 'nvme nvme[0-9]' | tail -n 4
exit $fail
EOV
)" > "$out" 2>&1
  r=$(sed -n 's/^rc=//p' "$out" | tail -1)
  [[ $r == 0 ]] && grep -q '^DATA-OK' "$out" || why="VM script rc=${r:-none}: $(grep -vE '^(rc=|connected|namespace|8 MiB)' "$out" | head -n 2 | tr '\n' ' ' | cut -c1-120)"
  if [[ -z $why ]] && ! spdk_wait_objects qp 0 20 > "$rt/nvme-objects.log" 2>&1; then
    why="QPs left in urnicd with the target running ($(nvme_objects qp))"
  fi
  spdk_stop_target > "$rt/nvme-tgt-stop.log" 2>&1 || why="${why:+$why; }nvmf_tgt did not end on SIGTERM"
  spdk_wait_objects all 0 5 >> "$rt/nvme-objects.log" 2>&1 || why="${why:+$why; }$(nvme_objects all) objects left in urnicd"
  if [[ -z $why ]]; then
    line "$name" "$dir" "$gname" "$mtu" PASS "$(printf '%.1f' "$(echo "$(date +%s.%N) - $t0" | bc)")s $(grep -o 'connected (.*) in [0-9.]* s' "$out" | sed 's/(.*) //'), $(grep -o '8 MiB.* s$' "$out"), compared; nothing left"
  else
    nvme_fail "$name" "$dir" "$t0" "$why" "$out" "$tlog" "$rt/nvme-objects.log"
  fi
}
nvme_kernel_target_cell() {
  local name="${NVME_PFX}SPDK initiator -> nvmet-rdma (kernel)"
  local dir="$PEER=target,urnic=host" t0 out=$rt/nvme-ktgt.vm why="" r trid
  filtered_out "$name" && return 0
  cells_run=$((cells_run + 1)); t0=$(date +%s.%N)
  nvme_vm_script 120 "
N=$NVME_KTGT_NQN; SERIAL=$NVME_KTGT_SERIAL; ADDR=$NVME_V
$(cat <<'EOV'
modprobe nvmet_rdma || { echo 'modprobe nvmet_rdma failed'; exit 10; }
# what an earlier run may have left
(cd /sys/kernel/config/nvmet && rm -f ports/1/subsystems/* ; rmdir ports/1; for n in subsystems/*/namespaces/*; do echo 0 > $n/enable; rmdir $n; done; rmdir subsystems/*) 2>/dev/null
dd if=/dev/zero of=/tmp/nvmet.img bs=1M count=64 2>/dev/null || exit 11
cd /sys/kernel/config/nvmet || exit 12
S=subsystems/$N
mkdir $S && echo 1 > $S/attr_allow_any_host && echo $SERIAL > $S/attr_serial &&
  mkdir $S/namespaces/1 && echo /tmp/nvmet.img > $S/namespaces/1/device_path &&
  echo 1 > $S/namespaces/1/buffered_io && echo 1 > $S/namespaces/1/enable &&
  mkdir ports/1 && echo rdma > ports/1/addr_trtype && echo ipv4 > ports/1/addr_adrfam &&
  echo $ADDR > ports/1/addr_traddr && echo 4420 > ports/1/addr_trsvcid &&
  ln -s /sys/kernel/config/nvmet/$S ports/1/subsystems/$N || { echo "nvmet configfs setup failed"; dmesg | tail -n 5; exit 13; }
echo "nvmet: $N on rdma $ADDR:4420, namespace 1 /tmp/nvmet.img (64 MiB)"
EOV
)" > "$out" 2>&1
  r=$(sed -n 's/^rc=//p' "$out" | tail -1)
  if [[ $r != 0 ]]; then
    nvme_fail "$name" "$dir" "$t0" "nvmet setup in the VM: rc=${r:-none} $(grep -v '^rc=' "$out" | head -n 1)" "$out"
  else
    SPDK_NQN=$NVME_KTGT_NQN SPDK_SERIAL=$NVME_KTGT_SERIAL
    trid=$(spdk_trid rdma "$NVME_V")
    spdk_identify "$trid" > "$rt/nvme-identify.log" 2>&1 || why="spdk_nvme_identify: $(tail -n 1 "$rt/nvme-identify.log")"
    spdk_bdevperf rdma "$NVME_V" -q 8 -o 4096 -w verify -t 5 > "$rt/nvme-bdevperf4k.log" 2>&1 ||
      why="${why:+$why; }bdevperf verify 4 KiB: $(tail -n 1 "$rt/nvme-bdevperf4k.log")"
    spdk_bdevperf rdma "$NVME_V" -q 4 -o 131072 -w verify -t 5 > "$rt/nvme-bdevperf128k.log" 2>&1 ||
      why="${why:+$why; }bdevperf verify 128 KiB: $(tail -n 1 "$rt/nvme-bdevperf128k.log")"
    spdk_wait_objects all 0 5 > "$rt/nvme-objects.log" 2>&1 || why="${why:+$why; }$(nvme_objects all) objects left in urnicd"
    nvme_vm_script 60 "
N=$NVME_KTGT_NQN
$(cat <<'EOV'
cd /sys/kernel/config/nvmet && rm ports/1/subsystems/$N && rmdir ports/1 && echo 0 > subsystems/$N/namespaces/1/enable &&
  rmdir subsystems/$N/namespaces/1 && rmdir subsystems/$N && rm -f /tmp/nvmet.img || { echo "nvmet teardown failed"; exit 1; }
dmesg | grep -E 'nvmet' | tail -n 4
EOV
)" >> "$out" 2>&1 || true
    [[ $(sed -n 's/^rc=//p' "$out" | tail -1) == 0 ]] || why="${why:+$why; }nvmet teardown in the VM failed"
    local idn bp4 bp128
    idn=$(grep -m1 -E 'Model Number:' "$rt/nvme-identify.log" | sed 's/.*: *//' | tr -s ' ')
    bp4=$(tr -d '\r' < "$rt/nvme-bdevperf4k.log" | awk '$1 == "Total" && $2 == ":" { printf "%.0f IOPS", $3 }')
    bp128=$(tr -d '\r' < "$rt/nvme-bdevperf128k.log" | awk '$1 == "Total" && $2 == ":" { printf "%.1f MiB/s", $4 }')
    if [[ -z $why ]]; then
      line "$name" "$dir" "$gname" "$mtu" PASS "$(printf '%.1f' "$(echo "$(date +%s.%N) - $t0" | bc)")s identify (model ${idn:-?}, serial $NVME_KTGT_SERIAL); verify 4 KiB qd 8 $bp4, 128 KiB qd 4 $bp128; nothing left"
    else
      nvme_fail "$name" "$dir" "$t0" "$why" "$out" "$rt/nvme-identify.log" "$rt/nvme-bdevperf4k.log" "$rt/nvme-bdevperf128k.log" "$rt/nvme-objects.log"
    fi
  fi
}
if in_group nvme; then
  log "nvme: NVMe-oF RDMA, kernel and SPDK ($spdk_dir)"
  SPDK_DIR=$spdk_dir URNIC_BUILD_ROOT=$build
  # shellcheck source=tests/spdk/spdk_lib.sh
  source "$root/tests/spdk/spdk_lib.sh"
  SPDK_RUN=$rt/spdk SPDK_RT=$rt/run
  SPDK_WRAP=(ip netns exec "$NS")
  mkdir -p "$SPDK_RUN"
  export URNIC_RUNTIME_DIR=$rt/run URNIC_NO_AUTOSTART=1 URNIC_DAEMON=$urnicd
  # RoCE v2: urnic0 against rxe0.
  nvme_peer_was=$PEER
  gname=ipv4 mtu=1024 NVME_U=10.99.0.1 NVME_V=10.99.0.11 NVME_PFX="" PEER=rxe
  vm "ip link set eth0 mtu 1500" > /dev/null
  urnic_start 1024
  capture_start "$capdir/interop-nvme.pcap"
  nvme_kernel_initiator_cell
  nvme_kernel_target_cell
  capture_check "$capdir/interop-nvme.pcap" ipv4 1024
  # iWARP: urnic_iw0 against siw0 (MPA CRC on; the iwarp-siw group's setup).
  gname=crc-on mtu=1500 NVME_U=10.99.1.1 NVME_V=10.99.1.11 NVME_PFX="iw " PEER=siw
  vm "ip link set eth1 mtu 1500" > /dev/null
  urnic_iw_start on
  iw_capture_start "$capdir/interop-nvme-iw.pcap"
  nvme_kernel_initiator_cell
  nvme_kernel_target_cell
  iw_capture_check "$capdir/interop-nvme-iw.pcap" on 1500
  PEER=$nvme_peer_was
  unset URNIC_RUNTIME_DIR URNIC_NO_AUTOSTART URNIC_DAEMON
  # The logs (SPDK's own, the VM's script output) with --captures.
  [[ -n $keep_captures ]] && cp -r "$rt/spdk" "$rt"/nvme-* "$capdir"/ 2>/dev/null
fi

# ---------------------------------------------------------------- conform
# urnic conform (issue 20) against the kernel's devices: the agent copied
# into the VM (a one-shot HTTP server on br-ctl, wget there); the tester on
# br-roce (10.99.0.1; urnicd stays bound there, so rxe's answers meet a
# socket and no ICMP) for rxe0, over TCP from 10.99.1.1 for siw0. Each
# device's deviations found so far (docs/CONFORMANCE.md) are expected to
# fail; any other failure or error, or one of them passing, fails the cell
# (the list or the tester needs a look). A case that fails only sometimes
# (a race in the peer) may go either way. Last of the groups: the cases send
# malformed traffic on purpose, which must not reach the peers before the
# interop matrix has run.
rxe_deviations="rc.resp.send-too-long uc.gap-drops-message"
siw_deviations="iw.mpa.pd-512 iw.err.crc iw.err.invalid-stag iw.err.base-bounds iw.err.no-buffer iw.err.invalid-qn
                iw.err.msn-range iw.err.too-long iw.err.read-access iw.err.read-invalid-stag iw.err.read-bounds"
siw_races="iw.mpa.rtr-immediate"
# conform_cell DEVICE KNOWN RACES TESTER-ARGS...: one run of the tester
conform_cell() {
  local dev=$1 known=$2 races=$3 t0=$SECONDS r
  shift 3
  local cout=$rt/conform-$dev.txt
  # --wait-ms 1000: the peer is an emulated (TCG) VM on a busy machine
  nsx timeout 300 "$build/tools/conform/urnic-conform" --peer "10.99.2.1$VM:7471" --device "$dev" --wait-ms 1000 \
    --pcap "$capdir/conform-$dev.pcap" --junit "$capdir/conform-$dev.xml" "$@" > "$cout" 2> "$cout.err"
  local failed want summary
  failed=$(awk '$1 == "FAIL" || $1 == "ERROR" { print $2 }' "$cout" | sort)
  for r in $races; do failed=$(grep -vx "$r" <<< "$failed"); done
  failed=$(tr '\n' ' ' <<< "$failed" | sed 's/ *$//')
  # shellcheck disable=SC2086 # word lists
  want=$(printf '%s\n' $known | sort | tr '\n' ' ' | sed 's/ *$//')
  summary=$(grep '^conform:' "$cout")
  if [[ -n $summary && $failed == "$want" ]]; then
    line "urnic conform ($dev)" "tester -> $dev" ipv4 - PASS "$((SECONDS - t0)) s: $summary; the known deviations are the failures"
  else
    line "urnic conform ($dev)" "tester -> $dev" ipv4 - FAIL "${summary:-no report: $(tail -1 "$cout.err"); agent start: $(tr "\n" " " < "$rt/agent-start.log")}; failing: ${failed:-none}; known: $want"
    local id  # the report of each unexpected failure, and of each expected one that passed
    for id in $(comm -3 <(tr ' ' '\n' <<< "$failed" | sed '/^$/d') <(tr ' ' '\n' <<< "$want" | sed '/^$/d')); do
      grep -A8 -E "^[A-Z/]+ +$id " "$cout" | head -12 | sed 's/^/    /' >&2
    done
  fi
}
if in_group conform; then
  vm "ip link set eth0 mtu 1500; ip link set eth1 mtu 1500" >/dev/null
  urnic_start 1024  # the udp device on 10.99.0.1 (in place of the iWARP one the last group started)
  srv=$rt/agent-srv
  mkdir -p "$srv"
  strip -o "$srv/urnic-conform-agent" "$build/tools/conform/urnic-conform-agent" 2>/dev/null ||
    cp "$build/tools/conform/urnic-conform-agent" "$srv/"
  hport=$((18000 + $$ % 1000))  # a port of this run's own: an earlier run's server may still be going
  nsx timeout 30 python3 -m http.server "$hport" --bind 10.99.2.1 --directory "$srv" > "$rt/agent-srv.log" 2>&1 &
  http_pid=$!
  wait_tcp_listen "$hport" --ns "$NS" --timeout 5 || true
  # One line (the VM's command agent reads one); a pid file (its busybox has
  # no pkill, and killall misses the 15-character name); a new file renamed
  # over a running one.
  start="[ -f /tmp/agent.pid ] && kill \$(cat /tmp/agent.pid); wget -q -O /tmp/agent.new http://10.99.2.1:$hport/urnic-conform-agent"
  start+=" && chmod +x /tmp/agent.new && mv -f /tmp/agent.new /tmp/urnic-conform-agent"
  start+=" && (/tmp/urnic-conform-agent --listen 10.99.2.1$VM:7471 > /tmp/agent.log 2>&1 </dev/null & echo \$! > /tmp/agent.pid)"
  vm "$start </dev/null >/dev/null 2>&1" > "$rt/agent-start.log" 2>&1
  stop_pid "$http_pid"
  conform_cell rxe0 "$rxe_deviations" "" --iface br-roce
  conform_cell siw0 "$siw_deviations" "$siw_races" --transport iwarp --peer-ip "10.99.1.1$VM" --iface br-iw
  vm "[ -f /tmp/agent.pid ] && kill \$(cat /tmp/agent.pid); rm -f /tmp/agent.pid; true" >/dev/null 2>&1
fi

total=$((pass + fail))
if [[ $repeat -gt 1 && -s $rt/repeat.txt ]]; then
  echo "--- iwarp-siw repeat counts (passed/total per cell)"; cat "$rt/repeat.txt"
fi
if [[ -s $rt/failures.log ]]; then
  echo "--- failure details"; cat "$rt/failures.log"
fi
echo "interop: $pass/$total cells passed in $(elapsed)s (peer VM $([[ $booted == 1 ]] && echo booted || echo reused))$( ((cm_retries > 0)) && echo "; $cm_retries rdma_cm perftest cells run twice (connection setup or perftest's clock calibration), see failures.log")"
[[ $fail == 0 && $total -gt 0 ]]
