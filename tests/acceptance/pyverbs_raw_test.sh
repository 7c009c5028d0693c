#!/usr/bin/env bash
# Acceptance (issue 49): rdma-core's own raw packet QP, flow steering and
# RSS tests (Debian 12 python3-pyverbs: test_flow's five *_spec_flow_traffic,
# test_rss_traffic, test_qp's raw packet QP creation and query tests) on an
# afpacket urnic0. pyverbs_test.sh runs the whole suite on the default
# device, whose udp link loops raw QPs' frames back to the device's own
# rules (the same tests run there, without a wire); here urnic0 is
# an afpacket device on one end of a veth pair in a namespace of its own, so
# the frames the suite sends from one raw QP to another's rule on the same
# device are steered by urnic (the other end of the veth only takes what
# goes out on the wire). Fails on any failing or erroring test, and if any
# of these tests skips. Needs root: skipped (77) otherwise, and without the
# suite. About 10 s.
#
# usage: pyverbs_raw_test.sh SHIM_DIR URNICD
set -uo pipefail
shim_dir=$1
urnicd=$2
suite=/usr/share/doc/rdma-core/tests
py=/usr/bin/python3
if [[ ! -f $suite/run_tests.py ]] || ! "$py" -c 'import pyverbs' 2>/dev/null; then
  echo "SKIP: python3-pyverbs (rdma-core's test suite) is not installed"
  exit 77
fi
# shellcheck source=two_hosts.sh
source "$(dirname "$0")/two_hosts.sh"
two_hosts_env "$shim_dir"

veth_mtu=1500
two_hosts_create y 150
urnicd_config_ab a afpacket > "$rt/a.json"
two_hosts_daemon a
work=$rt/suite
cp -r "$suite" "$work"
find "$work" -name '*.gz' -exec gunzip -f {} +
tests=(
  tests.test_flow.FlowTest.test_eth_spec_flow_traffic
  tests.test_flow.FlowTest.test_ipv4_spec_flow_traffic
  tests.test_flow.FlowTest.test_ipv6_spec_flow_traffic
  tests.test_flow.FlowTest.test_udp_spec_flow_traffic
  tests.test_flow.FlowTest.test_tcp_spec_flow_traffic
  tests.test_rss_traffic.RSSTrafficTest.test_rss_traffic
  tests.test_qp.QPTest.test_create_raw_qp_no_attr
  tests.test_qp.QPTest.test_create_raw_qp_with_attr
  tests.test_qp.QPTest.test_create_raw_qp_ex_no_attr
  tests.test_qp.QPTest.test_create_raw_qp_ex_with_attr
  tests.test_qp.QPTest.test_query_raw_qp
  tests.test_qp.QPTest.test_create_raw_qp_ex_with_illegal_caps_max_send_wr
  tests.test_qp.QPTest.test_create_raw_qp_ex_with_illegal_caps_max_send_sge
  tests.test_qp.QPTest.test_create_raw_qp_ex_with_illegal_caps_max_recv_sge
  tests.test_qp.QPTest.test_create_raw_qp_ex_with_illegal_caps_max_recv_wr
)
log=$rt/suite.log
(cd "$rt" && host a "${run_env[@]}" timeout "$limit" "$py" suite/run_tests.py --dev urnic0 -v "${tests[@]}") > "$log" 2>&1
ran=$(sed -n 's/^Ran \([0-9]*\) tests\? in .*/\1/p' "$log" | tail -1)
summary=$(grep -E '^(OK|FAILED)( \(.*\))?$' "$log" | tail -1)
field() { sed -n "s/.*[( ]$1=\([0-9]*\).*/\1/p" <<< "$summary"; }
failures=$(field failures); errors=$(field errors); skipped=$(field skipped)
failures=${failures:-0}; errors=${errors:-0}; skipped=${skipped:-0}
if [[ -z $ran || -z $summary ]]; then
  fail "the suite did not finish; last lines: $(tail -n 5 "$log" | tr '\n' ' ')"
  finish
  exit 1
fi
passed=$((ran - failures - errors - skipped))
grep -o "skipped .*" "$log" | sort | uniq -c
if (( ran == ${#tests[@]} && passed == ran )); then
  pass "pyverbs raw packet tests on afpacket urnic0: $ran tests, $passed passed"
else
  fail "pyverbs raw packet tests: $ran tests, $passed passed, $failures failed, $errors errors, $skipped skipped"
  sed -n '/^=\{20,\}$/,$p' "$log" | head -120
fi
finish
