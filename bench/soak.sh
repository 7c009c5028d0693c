#!/usr/bin/env bash
# bench/soak.sh [MINUTES]: the soak of issue 24 for as long as asked
# (default 60 minutes): tests/acceptance/soak_test.sh against this tree's
# build, which CI runs for 3 minutes. Rounds of RC, SRQ, rdma_cm and iWARP
# programs with 1 % loss on urnic0 and a busy loop on half the cores; at the
# end every program must have passed, the loss must explain every error, and
# the idle daemon's VmRSS and fd count must be where they were after the
# first round. Prints the test's lines and ends with its summary.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
minutes=${1:-60}
[[ $minutes =~ ^[0-9]+$ && $minutes -gt 0 ]] || { echo "usage: bench/soak.sh [MINUTES]" >&2; exit 2; }
"$root/tools/urnic" build > /dev/null
b=${URNIC_BUILD_DIR:-$root/build}
exec "$root/tests/acceptance/soak_test.sh" "$b/verbs_shim" "$b/rdmacm_shim" "$b/engine/urnicd" \
  "$b/tools/urnic-cli" $((minutes * 60))
