#!/usr/bin/env bash
# SPDK 26.05's NVMe-oF over RDMA on urnic (issue 48; docs/MIDDLEWARE.md,
# "NVMe-oF (SPDK)"): SPDK's own target (nvmf_tgt, RDMA transport, a malloc
# bdev) and initiators (spdk_nvme_identify, spdk_nvme_perf, bdevperf),
# unmodified, over one urnic device.
#
#   spdk_test.sh TRANSPORT SOURCE_ROOT BUILD_ROOT WORK_DIR [SRC]
#
#   TRANSPORT    roce: urnic0 (RoCE v2) at 127.0.0.3; iwarp: urnic_iw0 at
#                127.0.0.2
#   SOURCE_ROOT  urnic's source tree
#   BUILD_ROOT   urnic's build directory (its urnicd and drop-in libraries)
#   WORK_DIR     where SPDK is built (tests/spdk/build_spdk.sh; cached) and
#                where the run's logs go (WORK_DIR/run-TRANSPORT)
#   SRC          the directory with SPDK's sources (meson option spdk_src;
#                empty: $URNIC_SPDK_SRC; neither: SOURCE_ROOT/../shared/spdk,
#                then /work/shared/spdk)
#
# For the RDMA transport with a shared receive queue (its default) and
# without (--no-srq), each against a fresh nvmf_tgt: identify; perf 4 KiB
# randread, write and 50/50 randrw, and 128 KiB reads; bdevperf -w verify
# (every block written and read back and compared); CYCLES connect /
# verify / disconnect cycles (bdevperf, 1 s each). Then, with the target
# still running, urnicd must hold no QP (the target freed every
# disconnected one: an SRQ-attached QP only after its Last WQE Reached
# event), nvmf_tgt must end on SIGTERM, and urnicd must hold no object at
# all. SPDK runs without huge pages (--no-huge -s 512). The daemon is this
# build's urnicd in a network namespace of its own (root: unshare -n;
# otherwise a user namespace). Exits 77 (skipped) when SPDK's sources or
# the packages to build it are missing.
set -uo pipefail
transport=${1:?transport}; source_root=${2:?}; build_root=${3:?}; work=${4:?}; src=${5:-}
case $transport in
  roce) addr=127.0.0.3 ;;
  iwarp) addr=127.0.0.2 ;;
  *) echo "spdk_test: unknown transport $transport" >&2; exit 2 ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tools/lib/private_ns.sh
source "$source_root/tools/lib/private_ns.sh"
cycles=${SPDK_TEST_CYCLES:-10}
S=$work/spdk-26.05

if [[ ${SPDK_INNER:-} == 1 ]]; then
  # shellcheck source=tests/spdk/spdk_lib.sh
  source "$here/spdk_lib.sh"
  spdk_start_urnicd "$work/run-$transport" || exit 1
  trap 'spdk_stop_all' EXIT
  rc=0
  for srq in srq no-srq; do
    echo "=== $transport, RDMA transport with $srq ==="
    topt=(); [[ $srq == no-srq ]] && topt=(--no-srq)
    spdk_start_target && spdk_add_transport RDMA "${topt[@]}" || { rc=1; spdk_stop_target; continue; }
    spdk_add_subsystem rdma "$addr" || { rc=1; spdk_stop_target; continue; }
    trid=$(spdk_trid rdma "$addr")
    spdk_step "identify" spdk_identify "$trid" || rc=1
    spdk_step "perf 4 KiB randread qd 32" spdk_perf "$trid" -q 32 -o 4096 -w randread -t 2 || rc=1
    spdk_step "perf 4 KiB write qd 32" spdk_perf "$trid" -q 32 -o 4096 -w write -t 2 || rc=1
    spdk_step "perf 4 KiB randrw 50% qd 16" spdk_perf "$trid" -q 16 -o 4096 -w randrw -M 50 -t 2 || rc=1
    spdk_step "perf 128 KiB read qd 8" spdk_perf "$trid" -q 8 -o 131072 -w read -t 2 || rc=1
    spdk_step "bdevperf verify 4 KiB qd 32" spdk_bdevperf rdma "$addr" -q 32 -o 4096 -w verify -t 3 || rc=1
    spdk_step "bdevperf verify 64 KiB qd 8" spdk_bdevperf rdma "$addr" -q 8 -o 65536 -w verify -t 2 || rc=1
    fails=0
    for i in $(seq "$cycles"); do
      spdk_bdevperf rdma "$addr" -q 8 -o 4096 -w verify -t 1 > "$SPDK_RUN/cycle.$srq.$i.log" 2>&1 ||
        { fails=$((fails + 1)); echo "  cycle $i FAILED:"; grep -E 'ERROR|error|rc -' "$SPDK_RUN/cycle.$srq.$i.log" | head -n 5 | sed 's/^/    /'; }
    done
    if [[ $fails -eq 0 ]]; then echo "ok: $cycles connect/verify/disconnect cycles"
    else echo "FAIL: $fails of $cycles connect/verify/disconnect cycles"; rc=1; fi
    spdk_step "no QP left in urnicd with the target running" spdk_wait_objects qp 0 10 || rc=1
    spdk_step "nvmf_tgt ends on SIGTERM" spdk_stop_target || rc=1
    spdk_step "no object left in urnicd" spdk_wait_objects all 0 5 || rc=1
  done
  spdk_urnicd_warnings
  exit $rc
fi

# The sources and the build (cached).
"$here/build_spdk.sh" "$src" "$work" || exit $?

inner=(env SPDK_INNER=1 SPDK_DIR="$S" URNIC_BUILD_ROOT="$build_root" bash "$0" "$transport" "$source_root" "$build_root" "$work")
t0=$SECONDS
if private_ns_cmd -n; then
  "${private_ns[@]}" "${inner[@]}"
else
  printf 'SKIP: no private network namespace (not root, no user namespaces): the target would listen on the host\n'
  exit 77
fi
rc=$?
echo "spdk_test: $transport ran in $((SECONDS - t0)) s (logs: $work/run-$transport)"
exit $rc
