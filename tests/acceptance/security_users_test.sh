#!/bin/bash
# tests/acceptance/security_users_test.sh SHIM_DIR URNICD EXEC_TEST HOLDER
# (issue 18, root):
# other users against the shim and the daemon, with an unprivileged user
# this script creates (and removes):
#  - a runtime directory that user planted, with a listening socket in it:
#    the shim refuses it with one line saying why, and never connects;
#  - a runtime directory writable by others: refused likewise;
#  - a root daemon whose socket that user can reach (modes opened by hand)
#    but whose config does not allow it: EACCES, a one-line message, and the
#    daemon goes on serving root;
#  - the same daemon with "access": {"uids": [USER]}: the user is served;
#  - that user's process registers memory, keeps its session across exec and
#    execs a setuid-root program (HOLDER, installed so here): the exec does
#    not elevate (the shim set no_new_privs) and no privileged image's memory
#    is written; a non-dumpable process gets EPERM for ibv_reg_mr
#    (EXEC_TEST, run as the user).
set -u
shim=$1
urnicd=$2
exec_test=$3
holder_src=$4
asan_probe=$shim/libibverbs.so.1
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"

if [[ $(id -u) != 0 ]]; then
  echo "SKIP: needs root (creates a user)"
  exit 77
fi
user=urnsec$$
if ! useradd -M -r -s /usr/sbin/nologin "$user"; then
  echo "SKIP: useradd failed"
  exit 77
fi
work=$(mktemp -d /tmp/urnic-security.XXXXXX)
chmod 755 "$work"
dpid= fpid=
cleanup_paths+=("$work")
cleanup_extra() {
  stop_pid "$dpid"
  stop_pid "$fpid"
  userdel "$user" 2>/dev/null
}

as_user() {  # as_user RUNTIME_DIR CMD...
  local dir=$1
  shift
  setpriv --reuid="$user" --regid="$user" --clear-groups \
    "${run_env[@]}" LD_LIBRARY_PATH="$shim" URNIC_RUNTIME_DIR="$dir" URNIC_NO_AUTOSTART=1 "$@"
}
as_root() {  # as_root RUNTIME_DIR CMD...
  local dir=$1
  shift
  "${run_env[@]}" LD_LIBRARY_PATH="$shim" URNIC_RUNTIME_DIR="$dir" URNIC_NO_AUTOSTART=1 "$@"
}
wait_socket() { wait_until 10 test -S "$1"; }

# 1. A planted runtime directory with a "daemon" in it.
plant=$work/planted
setpriv --reuid="$user" --regid="$user" --clear-groups mkdir -m 700 "$plant" 2>/dev/null ||
  { mkdir "$plant" && chown "$user:" "$plant"; }
setpriv --reuid="$user" --regid="$user" --clear-groups /usr/bin/python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.bind(sys.argv[1] + "/urnicd.sock")
s.listen(4)
c, _ = s.accept()
open(sys.argv[1] + "/connected", "w").write("yes")
c.recv(4096)
' "$plant" &
fpid=$!
wait_socket "$plant/urnicd.sock" || fail "the planted socket did not appear"
chmod 755 "$plant" "$work"
out=$(as_root "$plant" ibv_devices 2>&1)
sleep 0.2
if [[ $out == *"belongs to uid"* && ! -e $plant/connected ]]; then
  pass "a runtime directory of another user is refused without connecting ($(grep -m1 'urnic:' <<< "$out"))"
else
  fail "planted runtime directory: $out; connected: $(cat "$plant/connected" 2>/dev/null || echo no)"
fi
stop_pid "$fpid"
fpid=

# 2. A runtime directory others can write to.
open_dir=$work/open
mkdir "$open_dir"
chmod 777 "$open_dir"
out=$(as_root "$open_dir" ibv_devices 2>&1)
if [[ $out == *"writable by others"* ]]; then pass "a runtime directory writable by others is refused"
else fail "world-writable runtime directory: $out"; fi

# 3. A root daemon, its socket reachable by the user, no access for it.
rt=$work/daemon
mkdir -m 700 "$rt"
"${run_env[@]}" "$urnicd" --runtime-dir "$rt" > "$work/urnicd.log" 2>&1 &
dpid=$!
wait_socket "$rt/urnicd.sock" || fail "urnicd did not start"
chmod 711 "$rt"
chmod 666 "$rt/urnicd.sock"
out=$(as_user "$rt" ibv_devices 2>&1)
if [[ $out != *urnic0* && $out == *"does not serve uid"* ]]; then
  pass "a user the daemon does not serve gets EACCES and one line ($(grep -m1 'urnic:' <<< "$out"))"
else
  fail "an unlisted user was served or got no reason: $out"
fi
grep -q "refused" "$work/urnicd.log" && pass "urnicd logs the refusal" || fail "no refusal in urnicd's log"
out=$(as_root "$rt" ibv_devices 2>&1)
[[ $out == *urnic0* ]] && pass "the daemon still serves its own uid" || fail "root not served after the refusal: $out"
stop_pid "$dpid"
dpid=

# 4. The same with the user allowed by the config.
cat > "$work/allow.json" <<JSON
{"devices": [{"name": "urnic0", "link": "udp", "address": "127.0.0.1"}], "access": {"uids": ["$user"]}}
JSON
rm -rf "$rt"
mkdir -m 700 "$rt"
"${run_env[@]}" "$urnicd" --config "$work/allow.json" --runtime-dir "$rt" > "$work/urnicd2.log" 2>&1 &
dpid=$!
wait_socket "$rt/urnicd.sock" || fail "urnicd (access config) did not start"
out=$(as_user "$rt" ibv_devices 2>&1)
[[ $out == *urnic0* ]] && pass "a user listed in \"access\" is served (socket and directory opened by the daemon)" ||
  fail "a listed user was not served: $out"

# 5. That user's process execs a setuid-root program with its MRs registered.
holder=$work/setuid_holder
install -o root -g root -m 4755 "$holder_src" "$holder"
if out=$(as_user "$rt" env URNIC_SETUID_HOLDER="$holder" "$exec_test" 2>&1); then
  pass "an exec'd setuid program is not privileged and no privileged memory is written; a non-dumpable process cannot register"
else
  fail "setuid exec / non-dumpable registration: $(tail -n 25 <<< "$out")"
fi
grep -q "memory registration refused (EPERM): it is not dumpable" "$work/urnicd2.log" &&
  pass "urnicd logs why it refused the registration" || fail "no registration refusal in urnicd's log"
stop_pid "$dpid"
dpid=
finish
