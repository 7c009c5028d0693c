#!/usr/bin/env bash
# tests/acceptance/ib_sma_test.sh VERBS_DIR RDMACM_DIR UMAD_DIR URNICD URNIC_SYSFS
#
# InfiniBand ports of urnic managed by unmodified OpenSM and read by
# unmodified infiniband-diags (issue 51, docs/INFINIBAND.md): urnicd in a
# network namespace of its own with three devices of link_layer infiniband,
# urnic_ib0 and urnic_ib1 joined by a cable ("ib_cable"), urnic_ib2 alone;
# the programs load urnic's libibumad.so.3 (and libibverbs.so.1) through
# LD_LIBRARY_PATH.
#   - before any SM: ibstat shows the cabled ports INIT (Initializing),
#     LinkUp, LID 0, the lone one Down, Polling; smpquery -D nodeinfo 0
#     answers (directed route, hop 0), smpquery -D nodeinfo 0,1 reaches the
#     port at the cable's other end
#   - opensm -g <urnic_ib0's port GUID> brings both cabled ports ACTIVE with
#     LIDs within 5 s (OpenSM activates a port only with a link partner:
#     its osm_link_mgr.c)
#   - ibstat: State Active, the LIDs, SM lid = urnic_ib0's; smpquery
#     nodeinfo <lid> (LID-routed, over the cable) and smpquery -D portinfo 0
#     answer with them; sminfo answers from both ports (OpenSM's own SMInfo,
#     passed to it by the port); ibaddr; perfquery (the ports' PMAs count
#     the MADs their cable carried); ibv_devinfo shows the port as
#     verbs see it; ibstatus (a script that reads sysfs) in urnic-sysfs's
#     view, made after the SM's sweep; the lone port stays Down, and
#     ibv_rc_pingpong on it finds no LID
#   - another user the daemon serves ("access"): ibstat answers, smpquery
#     cannot open the port (only root and the daemon's user send MADs)
#   - malformed MADs (ib_bad_mads.py): IBA's status, or dropped, never a
#     crash; OpenSM and urnicd still up
# Needs root (network namespace). Suites ib, acceptance, root: about 5 s.
set -u
verbs_dir=$1 rdmacm_dir=$2 umad_dir=$3 urnicd=$4 urnic_sysfs=$5
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck disable=SC2034  # asan_probe: common.sh's
asan_probe=$umad_dir/libibumad.so.3
# shellcheck source=tests/acceptance/common.sh
source "$here/common.sh"
# shellcheck source=tools/lib/hosts.sh
source "$here/../../tools/lib/hosts.sh"
# shellcheck source=tests/acceptance/ib_common.sh
source "$here/ib_common.sh"
hosts_require_root
require_tools opensm opensm
require_tools infiniband-diags ibstat smpquery sminfo ibaddr perfquery
require_tools ibverbs-utils ibv_devinfo ibv_rc_pingpong

dev=urnic_ib0 peer=urnic_ib1 lone=urnic_ib2
# A user the daemon serves ("access") but who is neither root nor the
# daemon's: it may ask about ports, not send MADs.
user=urnib$$
useradd -M -r -s /usr/sbin/nologin "$user" 2> /dev/null || user=
cleanup_extra() { [[ -z $user ]] || userdel "$user" 2> /dev/null; }
access=
[[ -z $user ]] || access=", \"access\": {\"uids\": [\"$user\"]}"
ib_libs=$verbs_dir:$rdmacm_dir:$umad_dir
ib_daemon ib "
  {\"name\": \"$dev\", \"link_layer\": \"infiniband\", \"address\": \"127.0.0.1\", \"ib_cable\": \"$peer\"},
  {\"name\": \"$peer\", \"link_layer\": \"infiniband\", \"address\": \"127.0.0.2\", \"ib_cable\": \"$dev\"},
  {\"name\": \"$lone\", \"link_layer\": \"infiniband\", \"address\": \"127.0.0.3\"}" "$access"

# Before an SM.
in_ns ibstat "$dev" > "$rt/ibstat0" 2>&1
if grep -q 'State: Initializing' "$rt/ibstat0" && grep -q 'Physical state: LinkUp' "$rt/ibstat0" &&
  grep -q 'Base lid: 0' "$rt/ibstat0" && grep -q 'Link layer: InfiniBand' "$rt/ibstat0"; then
  pass "ibstat before an SM: Initializing, LinkUp, LID 0, InfiniBand"
else
  fail "ibstat before an SM: $(tr '\n' ' ' < "$rt/ibstat0" | cut -c1-300)"
fi
guid=$(field 'Port GUID' "$rt/ibstat0")
in_ns ibstat "$peer" > "$rt/ibstat0-peer" 2>&1
peer_guid=$(field 'Port GUID' "$rt/ibstat0-peer")
in_ns ibstat "$lone" > "$rt/ibstat0-lone" 2>&1
if grep -q 'State: Down' "$rt/ibstat0-lone" && grep -q 'Physical state: Polling' "$rt/ibstat0-lone"; then
  pass "ibstat: the port without a cable is Down, Polling"
else
  fail "ibstat of the lone port: $(tr '\n' ' ' < "$rt/ibstat0-lone" | cut -c1-300)"
fi
if in_ns smpquery -C "$dev" -D nodeinfo 0 > "$rt/nodeinfo0" 2>&1 && grep -q 'NodeType:.*Channel Adapter' "$rt/nodeinfo0" &&
  grep -qi "PortGuid:\.*$guid" "$rt/nodeinfo0"; then
  pass "smpquery -D nodeinfo 0 before an SM: a CA, port GUID $guid"
else
  fail "smpquery -D nodeinfo 0: $(tr '\n' ' ' < "$rt/nodeinfo0" | cut -c1-300)"
fi
if [[ -n $peer_guid && $peer_guid != "$guid" ]] && in_ns smpquery -C "$dev" -D nodeinfo 0,1 > "$rt/nodeinfo01" 2>&1 &&
  grep -qi "PortGuid:\.*$peer_guid" "$rt/nodeinfo01"; then
  pass "smpquery -D nodeinfo 0,1: the port at the cable's other end ($peer_guid)"
else
  fail "smpquery -D nodeinfo 0,1: $(tr '\n' ' ' < "$rt/nodeinfo01" | cut -c1-300)"
fi

# OpenSM on the port: its cache and log in the runtime directory.
start=$(date +%s%N)
ib_opensm "$guid"
if wait_until 5 ports_active; then
  pass "opensm brought both cabled ports ACTIVE in $(( ($(date +%s%N) - start) / 1000000 )) ms"
else
  fail "port not ACTIVE 5 s after opensm started: $(tr '\n' ' ' < "$rt/ibstat1" | cut -c1-200); opensm log: $(grep -m3 ERR "$rt/opensm.log" | tr '\n' ' ' | cut -c1-300)"
fi
lid=$(field 'Base lid' "$rt/ibstat1")
sm_lid=$(field 'SM lid' "$rt/ibstat1")
peer_lid=$(field 'Base lid' "$rt/ibstat1-peer")
peer_sm_lid=$(field 'SM lid' "$rt/ibstat1-peer")
if [[ -n $lid && $lid != 0 && $sm_lid == "$lid" && -n $peer_lid && $peer_lid != 0 && $peer_lid != "$lid" &&
  $peer_sm_lid == "$lid" ]] && grep -q 'Physical state: LinkUp' "$rt/ibstat1"; then
  pass "ibstat: both Active, LIDs $lid and $peer_lid, SM lid $lid (the SM runs on $dev)"
else
  fail "ibstat after opensm: LIDs '$lid' '$peer_lid', SM lids '$sm_lid' '$peer_sm_lid'"
fi
if in_ns smpquery -C "$dev" nodeinfo "$peer_lid" > "$rt/nodeinfo1" 2>&1 && grep -qi "PortGuid:\.*$peer_guid" "$rt/nodeinfo1"; then
  pass "smpquery nodeinfo $peer_lid (LID-routed, over the cable): $peer"
else
  fail "smpquery nodeinfo $peer_lid: $(tr '\n' ' ' < "$rt/nodeinfo1" | cut -c1-300)"
fi
if in_ns smpquery -C "$dev" -D portinfo 0 > "$rt/portinfo" 2>&1 && grep -q "^Lid:\.*$lid$" "$rt/portinfo" &&
  grep -q "^SMLid:\.*$lid$" "$rt/portinfo" && grep -q 'LinkState:\.*Active' "$rt/portinfo" &&
  grep -A3 '^CapMask:' "$rt/portinfo" | grep -q 'IsSM$'; then
  pass "smpquery -D portinfo 0: Lid $lid, SMLid $lid, Active, IsSM"
else
  fail "smpquery -D portinfo 0: $(grep -E '^(Lid|SMLid|LinkState|CapMask)' "$rt/portinfo" | tr '\n' ' ' | cut -c1-300)"
fi
shopt -s extglob
digits=${guid#0x}
short_guid=0x${digits##+(0)}  # as sminfo prints it: no leading zeros
for d in "$dev" "$peer"; do
  if in_ns sminfo -C "$d" > "$rt/sminfo" 2>&1 && grep -qi "sm lid $lid sm guid $short_guid,.*SMINFO_MASTER" "$rt/sminfo"; then
    pass "sminfo on $d: $(cut -c1-120 "$rt/sminfo")"
  else
    fail "sminfo on $d: $(tr '\n' ' ' < "$rt/sminfo" | cut -c1-300)"
  fi
done
in_ns ibstat "$lone" > "$rt/ibstat1-lone" 2>&1
if grep -q 'State: Down' "$rt/ibstat1-lone" && grep -q 'Base lid: 0' "$rt/ibstat1-lone"; then
  pass "the port without a cable is still Down, LID 0"
else
  fail "the lone port after opensm: $(tr '\n' ' ' < "$rt/ibstat1-lone" | cut -c1-300)"
fi
if in_ns ibaddr -C "$dev" > "$rt/ibaddr" 2>&1 && grep -q "LID start $(printf '0x%x' "$lid")" "$rt/ibaddr"; then
  pass "ibaddr: $(cut -c1-120 "$rt/ibaddr")"
else
  fail "ibaddr: $(tr '\n' ' ' < "$rt/ibaddr" | cut -c1-300)"
fi
if in_ns ibv_devinfo -d "$dev" -v > "$rt/devinfo" 2>&1 && grep -q 'link_layer:.*InfiniBand' "$rt/devinfo" &&
  grep -q "port_lid:[[:space:]]*$lid$" "$rt/devinfo" && grep -q 'state:.*PORT_ACTIVE' "$rt/devinfo"; then
  pass "ibv_devinfo: InfiniBand, port_lid $lid, PORT_ACTIVE"
else
  fail "ibv_devinfo: $(grep -E 'link_layer|port_lid|state' "$rt/devinfo" | tr '\n' ' ' | cut -c1-300)"
fi

# PerfMgt: each port's own PMA (OpenSM's PerfMgr is off) counts the MADs
# its cable carried: the SM's sweep went out of urnic_ib0 into urnic_ib1.
counter() { sed -n "s/^$1:\.*//p" "$2"; }
if in_ns perfquery -C "$dev" > "$rt/perf0" 2>&1 && in_ns perfquery -C "$dev" "$peer_lid" 1 > "$rt/perf1" 2>&1 &&
  (($(counter PortXmitPkts "$rt/perf0") > 0 && $(counter PortRcvPkts "$rt/perf1") > 0)) &&
  (($(counter PortXmitData "$rt/perf0") == $(counter PortXmitPkts "$rt/perf0") * 72)); then
  pass "perfquery: $dev sent $(counter PortXmitPkts "$rt/perf0") packets (72 words each), $peer (LID $peer_lid, over the cable) received $(counter PortRcvPkts "$rt/perf1")"
else
  fail "perfquery: $(tr '\n' ' ' < "$rt/perf0" | cut -c1-200) / $(tr '\n' ' ' < "$rt/perf1" | cut -c1-200)"
fi

# ibstatus reads /sys/class/infiniband: urnic-sysfs's view, a snapshot taken now.
if in_ns "$urnic_sysfs" -- ibstatus "$peer" > "$rt/ibstatus" 2>&1 && grep -q "base lid:.*$(printf '0x%x' "$peer_lid")" "$rt/ibstatus" &&
  grep -q 'state:.*4: ACTIVE' "$rt/ibstatus" && grep -q 'link_layer:.*InfiniBand' "$rt/ibstatus"; then
  pass "ibstatus $peer in urnic-sysfs's view: base lid $(printf '0x%x' "$peer_lid"), 4: ACTIVE, InfiniBand"
else
  fail "ibstatus $peer: $(tr '\n' ' ' < "$rt/ibstatus" | cut -c1-300)"
fi

# The lone port has no LID (no SM reached it): ibv_rc_pingpong, which
# addresses by LID on an InfiniBand port, refuses to start (data over LIDs
# between the cabled ports: ib_data_test.sh).
if ! in_ns ibv_rc_pingpong -d "$lone" > "$rt/pingpong" 2>&1 && grep -q "Couldn't get local LID" "$rt/pingpong"; then
  pass "ibv_rc_pingpong on $lone: no local LID"
else
  fail "ibv_rc_pingpong on $lone: $(tr '\n' ' ' < "$rt/pingpong" | cut -c1-200)"
fi

# Another user: umad_get_ca answers (sysfs shows it to everyone), opening
# the port to send MADs is refused (the kernel's umad devices are root's).
if [[ -n $user ]]; then
  chmod 711 "$rt"
  as_user() {
    ip netns exec "$ns" setpriv --reuid="$user" --regid="$user" --clear-groups "${run_env[@]}" "URNIC_RUNTIME_DIR=$rt" \
      URNIC_NO_AUTOSTART=1 "LD_LIBRARY_PATH=$verbs_dir:$rdmacm_dir:$umad_dir" timeout "$limit" "$@"
  }
  if as_user ibstat "$dev" > "$rt/ibstat-user" 2>&1 && grep -q 'State: Active' "$rt/ibstat-user" &&
    ! as_user smpquery -C "$dev" -D portinfo 0 > "$rt/smpquery-user" 2>&1; then
    pass "another user: ibstat answers, smpquery cannot open the port ($(head -c 100 "$rt/smpquery-user" | tr '\n' ' '))"
  else
    fail "another user: ibstat $(head -c 150 "$rt/ibstat-user" | tr '\n' ' ') / smpquery $(head -c 200 "$rt/smpquery-user" | tr '\n' ' ')"
  fi
fi

# Malformed and unanswerable MADs.
in_ns python3 "$here/ib_bad_mads.py" "$dev" > "$rt/bad_mads" 2>&1
bad_rc=$?
sed 's/^/  /' "$rt/bad_mads"
if ((bad_rc == 0)); then pass "malformed MADs: IBA's status or dropped"; else fail "malformed MADs: $(grep -m2 FAIL "$rt/bad_mads" | tr '\n' ' ')"; fi
if alive "$urnicd_pid" && alive "$opensm_pid"; then
  pass "urnicd and opensm still up"
else
  fail "urnicd alive: $(alive "$urnicd_pid" && echo yes || echo no), opensm: $(alive "$opensm_pid" && echo yes || echo no)"
fi
stop_pid "$opensm_pid"
if ! finish; then
  echo "--- opensm log (errors)"
  grep -E 'ERR|error' "$rt/opensm.log" | head -n 20
  echo "--- urnicd log"
  tail -n 20 "$rt/urnicd.log"
  exit 1
fi
