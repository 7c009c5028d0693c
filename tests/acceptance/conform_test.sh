#!/usr/bin/env bash
# Acceptance (issue 20): `urnic conform` against urnic itself, and against
# urnic with bugs planted on purpose. Two network namespaces joined by a
# veth pair: urnicd (udp link) and urnic-conform-agent (through the drop-in
# libibverbs.so.1) in a, the tester in b on its veth. The whole RoCE v2
# suite must pass (a WARN would be allowed, a recommendation; the UDP
# source port entropy case must pass outright), with a JUnit report
# of every case and a pcap of the exchange; then urnicd again with
# "planted_bugs" (skip-psn-nak, reexecute-duplicate-write, wrong-access-nak)
# and the cases of those rules must FAIL while the others still pass: the
# tester catches what it claims to check. The planted bugs are built only
# into the test daemon URNICD_CONFORM (issue 46): the product urnicd must
# refuse the key. Needs root: exits 77 otherwise.
#
# Then the afpacket link (raw frames): RoCE v1 (--transport roce1: all pass,
# the v2 framing cases N/A) and v2 (all pass, no warning: a UDP source port
# per QP). Last, the iWARP suite (--transport iwarp, the tester as MPA
# initiator over TCP) against an iWARP device, urnic_iw0, in a: all pass;
# and with its planted bug (a wrong Terminate code) iw.err.invalid-stag fails.
#
# usage: conform_test.sh SHIM_DIR URNICD URNIC_CONFORM URNIC_CONFORM_AGENT RDMACM_SHIM_DIR URNICD_CONFORM
set -uo pipefail
shim_dir=$1
urnicd=$2
conform=$3
agent=$4
rdmacm_dir=$5
urnicd_product=$2
urnicd_conform=$6

# shellcheck source=two_hosts.sh
source "$(dirname "$0")/two_hosts.sh"
hosts_require_root
unset LD_PRELOAD URNIC_RUNTIME_DIR
two_hosts_create f 216

agent_pid=
start_urnic() {  # start_urnic DEVICE_JSON: urnicd in a with this one device, and the agent
  [[ -n $agent_pid ]] && stop_pid "$agent_pid"
  [[ -n ${daemon_pid_a:-} ]] && stop_pid "$daemon_pid_a"
  printf '{"devices": [{%s}]}\n' "$1" > "$rt/a.json"
  two_hosts_daemon a
  bg_host a "${run_env[@]}" URNIC_DAEMON="$urnicd" LD_LIBRARY_PATH="$shim_dir:$rdmacm_dir" "$agent" --listen "$ip_a:7471" \
    > "$rt/agent.log" 2>&1
  agent_pid=$!
  cleanup_pids+=("$agent_pid")
}
run_conform() {  # run_conform OUT ARGS...: the tester in b; its exit status
  local out=$1
  shift
  host b timeout 300 "$conform" --peer "$ip_a:7471" --iface "$veth_b" "$@" > "$out" 2> "$out.err"
}
verdict() { awk -v id="$2" '$2 == id { print $1; exit }' "$1"; }
# all_pass RC BASE MIN WHAT: the run whose report is BASE.txt (JUnit BASE.xml)
# exited RC; every case passed or warned, and at least MIN ran
all_pass() {
  local summary cases
  summary=$(grep '^conform:' "$2.txt")
  cases=$(grep -c '<testcase ' "$2.xml" 2>/dev/null || echo 0)
  if [[ $1 -eq 0 && $summary == *" 0 failed, 0 not applicable, 0 errors" && $cases -ge $3 ]]; then
    pass "$4: $summary; $cases JUnit test cases"
  else
    fail "$4: exit $1, $summary, $cases JUnit test cases"
    grep -A12 -E '^(FAIL|ERROR) ' "$2.txt" | head -60 | sed 's/^/    /'
    tail -5 "$2.txt.err" "$rt/agent.log" "$rt/a.log" | sed 's/^/    /'
  fi
}

# --- the whole suite against urnic ---------------------------------------------
udp_dev='"name": "urnic0", "link": "udp", "address": "'$ip_a'"'
start_urnic "$udp_dev"
run_conform "$rt/all.txt" --cc --junit "$rt/all.xml" --json "$rt/all.json" --pcap "$rt/all.pcap"
rc=$?
all_pass "$rc" "$rt/all" 60 "urnic conform against urnic0 (udp link, --cc)"
grep -q '^PASS  roce2.udp-port-entropy' "$rt/all.txt" && pass "udp link: a UDP source port per QP (no entropy warning)" ||
  fail "udp link: $(grep 'roce2.udp-port-entropy' "$rt/all.txt" | head -1)"
groups=$(awk '/^group/ { on = 1; next } on && NF == 6 { printf "%s ", $1 }' "$rt/all.txt")
[[ $groups == *rc.req* && $groups == *rc.resp* && $groups == *uc* && $groups == *ud* && $groups == *roce2* ]] &&
  pass "every group ran: $groups" || fail "groups in the report: $groups"
frames=$(wc -c < "$rt/all.pcap" 2>/dev/null || echo 0)  # (two_hosts.sh has its own `stat`)
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert len(d["cases"]) >= 60 and all("transcript" in c for c in d["cases"])' \
  "$rt/all.json" && [[ $frames -gt 10000 ]] && pass "JSON report with transcripts; pcap of the exchange ($frames bytes)" ||
  fail "JSON report or pcap missing ($frames bytes of pcap)"

# --- planted bugs: the cases of those rules fail, the others do not -----------
# The product urnicd has none and refuses the key, naming the test build.
printf '{"devices": [{%s, "planted_bugs": ["skip-psn-nak"]}]}\n' "$udp_dev" > "$rt/product.json"
out=$("$urnicd_product" --config "$rt/product.json" --runtime-dir "$rt/product" 2>&1)
rc=$?
[[ $rc -ne 0 && $out == *"product build"*"urnicd-conform"* ]] && pass "urnicd refuses planted_bugs (exit $rc)" ||
  fail "urnicd took planted_bugs: exit $rc, $out"
urnicd=$urnicd_conform
start_urnic "$udp_dev"', "planted_bugs": ["skip-psn-nak", "reexecute-duplicate-write", "wrong-access-nak"]'
grep -q 'PLANTED BUGS ON' "$rt/a.log" && pass "urnicd-conform says its planted bugs are on" ||
  fail "urnicd-conform did not warn about its planted bugs: $(tail -3 "$rt/a.log")"
run_conform "$rt/planted.txt" --suite rc.resp
rc=$?
for id in rc.resp.psn-sequence-nak rc.resp.dup-write rc.resp.write-bad-rkey rc.resp.read-no-access; do
  v=$(verdict "$rt/planted.txt" "$id")
  [[ $v == FAIL ]] && pass "planted bug caught: $id FAIL ($(grep -A2 "^FAIL  $id" "$rt/planted.txt" | sed -n 3p | sed 's/^ *//'))" ||
    fail "planted bug not caught: $id is ${v:-missing}"
done
for id in rc.resp.write-ack rc.resp.read-multi rc.resp.atomic-replay rc.resp.rnr-nak; do
  v=$(verdict "$rt/planted.txt" "$id")
  [[ $v == PASS ]] && pass "unaffected rule still passes: $id" || fail "$id is ${v:-missing} with planted bugs"
done
[[ $rc -eq 1 ]] && pass "the tester exits 1 when a case fails" || fail "tester exit $rc with failing cases"
urnicd=$urnicd_product

# --- RoCE v1 and v2 through the afpacket link (raw frames, per-QP UDP ports) --
start_urnic '"name": "urnic0", "link": "afpacket", "interface": "'$veth_a'"'
run_conform "$rt/v1.txt" --transport roce1 --junit "$rt/v1.xml"
rc=$?
# RoCE v1: the five roce2.* framing cases do not apply
v1=$(grep '^conform:' "$rt/v1.txt")
[[ $rc -eq 0 && $v1 == *" 0 warnings, 0 failed, 5 not applicable, 0 errors" ]] &&
  pass "urnic conform --transport roce1 against urnic0 (afpacket link): $v1" ||
  fail "urnic conform --transport roce1 against urnic0 (afpacket link): exit $rc, $v1"
run_conform "$rt/af.txt" --cc --junit "$rt/af.xml"
rc=$?
all_pass "$rc" "$rt/af" 60 "urnic conform against urnic0 (afpacket link, --cc)"
grep -q '^PASS  roce2.udp-port-entropy' "$rt/af.txt" && pass "afpacket link: a UDP source port per QP (no entropy warning)" ||
  fail "afpacket link: $(grep 'roce2.udp-port-entropy' "$rt/af.txt" | head -1)"

# --- the iWARP suite against urnic_iw0 -----------------------------------------
start_urnic '"name": "urnic_iw0", "transport": "iwarp", "address": "'$ip_a'"'
run_conform "$rt/iw.txt" --transport iwarp --junit "$rt/iw.xml"
rc=$?
all_pass "$rc" "$rt/iw" 20 "urnic conform --transport iwarp against urnic_iw0"

# --- an iWARP planted bug: a Terminate with the wrong error code ---------------
urnicd=$urnicd_conform
start_urnic '"name": "urnic_iw0", "transport": "iwarp", "address": "'$ip_a'", "planted_bugs": ["wrong-terminate-code"]'
run_conform "$rt/iwp.txt" --transport iwarp --suite iw.err.invalid-stag --suite iw.ddp.write
v=$(verdict "$rt/iwp.txt" iw.err.invalid-stag)
[[ $v == FAIL ]] && pass "planted bug caught: iw.err.invalid-stag FAIL ($(grep -A2 '^FAIL  iw.err.invalid-stag' "$rt/iwp.txt" | sed -n 3p | sed 's/^ *//'))" ||
  fail "planted bug not caught: iw.err.invalid-stag is ${v:-missing}"
v=$(verdict "$rt/iwp.txt" iw.ddp.write)
[[ $v == PASS ]] && pass "unaffected rule still passes: iw.ddp.write" || fail "iw.ddp.write is ${v:-missing} with the planted bug"

finish
