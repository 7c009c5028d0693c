#!/usr/bin/env bash
# Acceptance (issue 9): rdma-core's own Python test suite (Debian 12
# python3-pyverbs, rdma-core 44) against urnic's RoCE device through the
# drop-in libibverbs.so.1 and librdmacm.so.1. The suite is copied out of
# /usr/share/doc/rdma-core/tests (shipped gzipped) into a temporary directory
# and run with the distribution's /usr/bin/python3 (the one that has pyverbs);
# the first verbs call starts urnicd in a private runtime directory, and the
# daemon is stopped by PID at the end. Prints the suite's pass / fail / error
# / skip counts, one line per skip reason, and fails if any test failed or
# errored. Skips come from the suite's own capability checks (see
# docs/PYVERBS.md for each and why). Installs nothing: without the suite
# (tools/packages.txt lists python3-pyverbs) the test is skipped (exit 77).
#
# As root, two things of the test host are arranged that the suite reads
# from the kernel rather than through libibverbs:
#   - the run is inside urnic-sysfs (tools/sysfs/): a private mount namespace
#     where /sys/class/infiniband/<dev>/ shows urnic's devices, so the suite
#     finds urnic0's netdev (lo) and its address and runs the rdma_cm tests;
#   - 2 MiB huge pages are reserved for the run (the huge-page ODP tests),
#     and nr_hugepages is put back to its old value on exit, also on failure.
# Not root: both are left out and those tests skip (fewer tests, not a skip
# of the whole run).
#
# usage: pyverbs_test.sh SHIM_DIR URNICD [DEVICE [RDMACM_SHIM_DIR URNIC_SYSFS]]
set -uo pipefail
shim_dir=$1
urnicd=$2
dev=${3:-urnic0}
rdmacm_dir=${4:-}
urnic_sysfs=${5:-}
suite=/usr/share/doc/rdma-core/tests
py=/usr/bin/python3

if [[ ! -f $suite/run_tests.py ]] || ! "$py" -c 'import pyverbs' 2>/dev/null; then
  echo "SKIP: python3-pyverbs (rdma-core's test suite) is not installed"
  exit 77
fi

work=$(mktemp -d /tmp/urnic-pyverbs.XXXXXX)
rt=$work/runtime
mkdir -p "$rt"
export URNIC_RUNTIME_DIR=$rt
export URNIC_DAEMON=$urnicd
export LD_LIBRARY_PATH=$shim_dir${rdmacm_dir:+:$rdmacm_dir}
unset LD_PRELOAD
# run_env (a sanitizer build of the shim needs its runtime first in the
# process), stop_pid, the cleanup lists.
asan_probe="$shim_dir/libibverbs.so.1"
# shellcheck source=tests/acceptance/common.sh
source "$(dirname "$0")/common.sh"
limit=${URNIC_PYVERBS_TIMEOUT:-1200}
pages_file=/proc/sys/vm/nr_hugepages
old_pages=
cleanup_daemon_dirs+=("$rt")
cleanup_paths+=("$work")
cleanup_extra() { [[ -n $old_pages ]] && echo "$old_pages" > "$pages_file"; }
trap 'exit 1' INT TERM

# The huge-page tests map one 2 MiB page per MR, two or three at a time;
# fewer than min_pages would make them fail (ENOMEM) instead of skip.
want_pages=16
min_pages=4
view=()
if (( EUID == 0 )); then
  if [[ -w $pages_file ]] && grep -q '^Hugepagesize: *2048 kB' /proc/meminfo; then
    old_pages=$(cat "$pages_file")
    echo $((old_pages + want_pages)) > "$pages_file"
    got=$(( $(cat "$pages_file") - old_pages ))
    if (( got >= min_pages )); then
      echo "reserved $got huge pages of 2 MiB (nr_hugepages $old_pages -> $((old_pages + got)))"
    else
      echo "$old_pages" > "$pages_file"
      echo "note: the kernel reserved only $got of $want_pages huge pages (memory fragmented): the huge-page tests skip"
    fi
  else
    echo "note: no 2 MiB huge pages on this kernel: the huge-page tests skip"
  fi
  if [[ -x $urnic_sysfs ]]; then
    view=("$urnic_sysfs" --)
    echo "the suite runs in urnic-sysfs's view of /sys/class/infiniband"
  fi
else
  echo "note: not root: no sysfs view (the rdma_cm tests skip) and no huge pages"
fi

cp -r "$suite" "$work/tests"
find "$work/tests" -name '*.gz' -exec gunzip -f {} +

log=$work/suite.log
(cd "$work" && "${run_env[@]}" timeout "$limit" "${view[@]}" "$py" tests/run_tests.py --dev "$dev" -v) > "$log" 2>&1
rc=$?

# unittest's summary: "Ran N tests in Xs" then "OK (skipped=S)" or
# "FAILED (failures=F, errors=E, skipped=S)".
ran=$(sed -n 's/^Ran \([0-9]*\) tests\? in .*/\1/p' "$log" | tail -1)
summary=$(grep -E '^(OK|FAILED)( \(.*\))?$' "$log" | tail -1)
field() { sed -n "s/.*[( ]$1=\([0-9]*\).*/\1/p" <<< "$summary"; }
failures=$(field failures); errors=$(field errors); skipped=$(field skipped)
failures=${failures:-0}; errors=${errors:-0}; skipped=${skipped:-0}
if [[ -z $ran || -z $summary ]]; then
  echo "FAIL the suite did not finish (exit $rc); last lines:"
  tail -40 "$log"
  exit 1
fi
passed=$((ran - failures - errors - skipped))

echo "skips by reason:"
grep -o "skipped .*" "$log" | sort | uniq -c | sort -rn
grep -E '^(FAIL|ERROR): ' "$log"
printf 'pyverbs on %s: %d tests, %d passed, %d failed, %d errors, %d skipped\n' \
  "$dev" "$ran" "$passed" "$failures" "$errors" "$skipped"
if (( failures != 0 || errors != 0 )); then
  echo "---- failing tests"
  sed -n '/^=\{20,\}$/,$p' "$log" | head -400
  exit 1
fi
exit 0
