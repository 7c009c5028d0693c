#!/usr/bin/env bash
# Acceptance (issue 6): urnic interoperates with the Linux kernel's Soft-RoCE
# (rdma_rxe) on the wire. Runs tools/interop.sh, which boots a kernel peer VM
# (tools/peer-vm, built on first use into $URNIC_PEERVM_DIR, default
# /tmp/urnic-peervm), starts a private urnicd in the peer network namespace
# and runs the matrix: ibv_{rc,uc,ud,srq}_pingpong and perftest
# send/write/read/atomic lat+bw (RC), UC write, UD send, both directions,
# IPv4-mapped and IPv6 link-local GIDs, path MTU 1024 and 4096, RC under
# loss, and checks every ICRC of the bridge capture. One line per cell.
#
# Exit 77 (skipped, with the reason) when the machine cannot run the peers:
# not root, or no qemu and no apt-get to install it. Never a silent pass.
#
# usage: interop_test.sh SOURCE_ROOT BUILD_ROOT
set -uo pipefail
src=$1
build=$2
if [[ -n ${URNIC_SKIP_INTEROP:-} ]]; then
  echo "SKIP: $URNIC_SKIP_INTEROP"
  exit 77
fi
if [[ $(id -u) != 0 ]]; then
  echo "SKIP: the interop run needs root (network namespace, tap devices, qemu)"
  exit 77
fi
if ! command -v qemu-system-x86_64 >/dev/null && ! command -v apt-get >/dev/null; then
  echo "SKIP: no qemu-system-x86_64 and no apt-get to install it"
  exit 77
fi
start=$(date +%s)
"$src/tools/interop.sh" --build "$build" --no-build
rc=$?
echo "interop_test: exit $rc after $(($(date +%s) - start)) s"
exit $rc
