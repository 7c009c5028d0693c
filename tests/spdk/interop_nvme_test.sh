#!/usr/bin/env bash
# The kernel-initiator and kernel-target NVMe-oF interop cells (issue 48):
# tools/interop.sh --groups nvme, the Linux kernel's nvme-rdma and
# nvmet-rdma in the peer VM (tools/peer-vm, rdma_rxe on its eth0, siw on
# its eth1) against SPDK 26.05's nvmf_tgt, spdk_nvme_identify and bdevperf
# on urnic0 and urnic_iw0 in the peer network's namespace. Builds SPDK first (tests/spdk/build_spdk.sh,
# cached in WORK_DIR; about 12 minutes on 2 idle cores the first time).
#
#   interop_nvme_test.sh SOURCE_ROOT BUILD_ROOT WORK_DIR [SRC]
#
# Exit 77 (skipped, with the reason) when not root, without qemu and
# apt-get, with URNIC_SKIP_INTEROP set, or when SPDK's sources or the
# packages to build it are missing. The peer VM's work directory is
# $URNIC_PEERVM_DIR (default /tmp/urnic-peervm), its namespace
# $URNIC_PEERVM_NS (default rxehost).
set -uo pipefail
source_root=${1:?}; build_root=${2:?}; work=${3:?}; src=${4:-}
here=$(cd "$(dirname "$0")" && pwd)
if [[ -n ${URNIC_SKIP_INTEROP:-} ]]; then echo "SKIP: $URNIC_SKIP_INTEROP"; exit 77; fi
if [[ $(id -u) != 0 ]]; then
  echo "SKIP: the interop run needs root (network namespace, tap devices, qemu)"; exit 77
fi
if ! command -v qemu-system-x86_64 > /dev/null && ! command -v apt-get > /dev/null; then
  echo "SKIP: no qemu-system-x86_64 and no apt-get to install it"; exit 77
fi
"$here/build_spdk.sh" "$src" "$work" || exit $?
start=$(date +%s)
"$source_root/tools/interop.sh" --build "$build_root" --no-build --groups nvme --spdk "$work/spdk-26.05"
rc=$?
echo "interop_nvme_test: exit $rc after $(($(date +%s) - start)) s"
exit $rc
