#!/usr/bin/env bash
# Acceptance (issue 52, bad input): where no daemon can live, and a daemon
# that is another urnic's, with unmodified ibv_devices / ibv_devinfo /
# ibv_rc_pingpong through the drop-in libibverbs.so.1. Root: the file systems
# are tmpfs mounts in a mount namespace of this script's own (unshare), gone
# with it.
#  - the runtime directory to be made on a read-only file system, or one
#    that is there but read-only, or on a file system with no inode left:
#    the program runs, sees no device (as libibverbs without RDMA devices)
#    and one line says where, why (the errno) and what to set instead;
#  - a file system with no block left (a daemon could write neither its pid
#    nor its log): refused likewise; with room again, the daemon starts;
#  - a daemon speaking another control protocol version in the runtime
#    directory (a stand-in written here answers the hello as an older urnicd
#    does: EPROTONOSUPPORT and its version): the program sees no device, one
#    line names that daemon's pid and how to stop it; once it is stopped,
#    the next program starts this urnic's daemon.
#
# usage: runtime_dir_faults_test.sh SHIM_DIR URNICD
set -uo pipefail
shim_dir=$1
urnicd=$2
if [[ -z ${URNIC_FAULTS_IN_NS:-} ]]; then
  [[ $(id -u) == 0 ]] || { echo "SKIP: needs root (tmpfs mounts in a mount namespace)"; exit 77; }
  URNIC_FAULTS_IN_NS=1 exec unshare --mount --propagation private "$0" "$@"
fi
asan_probe=$shim_dir/libibverbs.so.1
# shellcheck source=tests/acceptance/common.sh
source "$(dirname "$0")/common.sh"
export URNIC_DAEMON=$urnicd LD_LIBRARY_PATH=$shim_dir
unset LD_PRELOAD XDG_RUNTIME_DIR
work=$(mktemp -d /tmp/urnic-rtfaults.XXXXXX)
mounts=()
cleanup_extra() { local m; for m in "${mounts[@]}"; do umount -l "$m" 2>/dev/null; done; }
cleanup_paths+=("$work")
# tmpfs DIR OPTIONS: a small file system at DIR.
tmpfs() { mkdir -p "$1" && mount -t tmpfs -o "$2" urnic-test "$1" && mounts+=("$1"); }
# run RT PROG ARGS: PROG with runtime directory RT; its output in `out`, status in `rc`.
run() {
  local dir=$1; shift
  out=$(URNIC_RUNTIME_DIR=$dir "${run_env[@]}" timeout "$limit" "$@" 2>&1); rc=$?
}
# expect NAME REGEX: the last program exited 0 (no crash) and said REGEX.
expect() {
  if [[ $rc == 0 ]] && grep -qE "$2" <<< "$out"; then pass "$1: $(grep -E "$2" <<< "$out" | head -1 | cut -c1-150)"
  else fail "$1 (exit $rc): $(head -3 <<< "$out" | tr '\n' ' ')"; fi
}

# --- read-only -----------------------------------------------------------------
tmpfs "$work/ro" size=1m,mode=0755
install -d -m 0700 "$work/ro/existing"
mount -o remount,ro "$work/ro"
run "$work/ro/urnic" ibv_devices
expect "runtime directory to be made on a read-only file system" \
  "^urnic: no urnicd can start in the runtime directory $work/ro/urnic: cannot make it \(Read-only file system\); set URNIC_RUNTIME_DIR"
grep -q urnic0 <<< "$out" && fail "a device was listed without a daemon"
run "$work/ro/existing" ibv_devices
expect "runtime directory on a read-only file system" \
  "^urnic: no urnicd can start in the runtime directory $work/ro/existing: cannot write start.lock in it \(Read-only file system\)"

# --- full ----------------------------------------------------------------------
tmpfs "$work/noinode" size=1m,nr_inodes=16,mode=0755
i=0
while touch "$work/noinode/f$i" 2>/dev/null && ((i < 100)); do i=$((i + 1)); done
run "$work/noinode/urnic" ibv_devices
expect "runtime directory on a file system with no inode left" \
  "^urnic: no urnicd can start in the runtime directory $work/noinode/urnic: cannot make it \(No space left on device\)"

# No block left, inodes left: the directory can be made, but a daemon could
# write neither its pid nor its log (it would exit, its log empty).
tmpfs "$work/noblock" size=64k,mode=0755
dd if=/dev/zero of="$work/noblock/fill" bs=4k 2>/dev/null
cleanup_daemon_dirs+=("$work/noblock/urnic")
run "$work/noblock/urnic" ibv_devices
expect "runtime directory on a file system with no block left" \
  "^urnic: no urnicd can start in the runtime directory $work/noblock/urnic: its file system is full .*\(No space left on device\)"
# ... and once there is room, the next program starts the daemon there.
rm "$work/noblock/fill"
run "$work/noblock/urnic" ibv_devinfo -d urnic0
expect "... and with room again, the daemon serves" 'state:[[:space:]]+PORT_ACTIVE'

# --- another urnic's daemon ----------------------------------------------------
rt=$work/other
install -d -m 0700 "$rt"
cleanup_daemon_dirs+=("$rt")
/usr/bin/python3 - "$rt/urnicd.sock" "$work/fake.ready" <<'FAKE' &
# Answers every hello as an urnicd of control protocol version 9 would:
# status EPROTONOSUPPORT (93), its HelloRep (magic, version, caps, pid).
import os, socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.bind(sys.argv[1])
s.listen(8)
open(sys.argv[2], "w").close()
while True:
    c, _ = s.accept()
    m = c.recv(65536)
    if len(m) >= 16:
        typ, _, seq, _, _ = struct.unpack_from("<HHIiI", m)
        body = struct.pack("<IHHQII", 0x434E5255, 9, 0, 0, os.getpid(), 0)
        c.send(struct.pack("<HHIiI", typ, 1, seq, 93, len(body)) + body)
    c.close()
FAKE
fake=$!
cleanup_pids+=("$fake")
wait_until 10 test -e "$work/fake.ready" || fail "the stand-in daemon did not start"
run "$rt" ibv_devices
expect "a daemon of another control protocol version: refused, its pid named" \
  "^urnic: the urnicd at $rt/urnicd.sock \(pid $fake\) is another urnic's: it refuses this library's control protocol \(version [0-9]+\); not used. Stop it \(kill $fake\)"
grep -q urnic0 <<< "$out" && fail "a device was listed by another urnic's daemon"
stop_pid "$fake"
run "$rt" ibv_devinfo -d urnic0
expect "once it is stopped, the next program starts this urnic's daemon" 'state:[[:space:]]+PORT_ACTIVE'
finish
