#!/usr/bin/env bash
# Line coverage of urnic's own code (tools/urnic test --coverage; run-tests.sh
# calls this). A gcov build (-Db_coverage=true, -O0) runs the given suites,
# then gcovr reads the counters and tools/coverage_report.py prints line
# coverage per layer (wire, transport, hostif, engine/<part>, the shims,
# tools). Tests, fuzz targets and system headers are not counted.
#
#   coverage.sh ROOT BUILD_DIR PER_TEST SUITE...
#     PER_TEST empty: one run of all SUITEs together, the per-layer table.
#     PER_TEST set:   the unit suite first (the baseline), then every other
#                     test of the SUITEs alone, and for each the lines of the
#                     daemon and the shims it reaches that the unit suite does
#                     not; ends with a greedy choice of tests that covers
#                     most of those lines (what the sanitize stage runs).
# The counters of a process are written when it exits normally: the daemon
# flushes them at SIGTERM (its orderly stop), programs killed with SIGKILL
# add nothing.
set -uo pipefail
root=$1 dir=$2 per_test=$3; shift 3
suites=("$@")
jobs=$(nproc)
report=$root/tools/coverage_report.py

command -v gcovr >/dev/null || { echo "coverage: gcovr is missing (apt-get install gcovr; tools/packages.txt lists it)" >&2; exit 1; }

if [[ ! -f $dir/build.ninja ]]; then
  meson setup "$dir" "$root" -Db_coverage=true --buildtype=debug || exit 1
fi
ninja -C "$dir" -j "$jobs" || exit 1

suite_args=()
for s in "${suites[@]}"; do suite_args+=(--suite "$s"); done

# gcovr's JSON of what the counters in DIR say now.
snapshot() {
  gcovr --root "$root" --object-directory "$dir" -j "$jobs" \
    --filter "$root/(wire|transport|hostif|engine|verbs_shim|rdmacm_shim|tools)/" \
    --exclude '.*/tests/.*' --exclude '.*/fuzz/.*' \
    --gcov-ignore-parse-errors --json "$1" >/dev/null 2>"$1.log" \
    || { echo "coverage: gcovr failed (see $1.log)" >&2; return 1; }
}
reset_counters() { find "$dir" -name '*.gcda' -delete; }

out=$dir/coverage
mkdir -p "$out"
if [[ -z $per_test ]]; then
  reset_counters
  meson test -C "$dir" --no-rebuild --num-processes "$jobs" "${suite_args[@]}"
  rc=$?
  snapshot "$out/all.json" || exit 1
  echo
  echo "line coverage, suites: ${suites[*]}"
  python3 "$report" layers "$root" "$out/all.json"
  exit $rc
fi

reset_counters
meson test -C "$dir" --no-rebuild --num-processes "$jobs" --suite unit || echo "coverage: a unit test failed (counted anyway)"
snapshot "$out/unit.json" || exit 1
list_tests() { meson test -C "$dir" --no-rebuild --list "$@" 2>/dev/null | grep -v -e '^ninja:' -e '^No suitable' | sed 's|.* / ||'; }
mapfile -t unit_tests < <(list_tests --suite unit)
mapfile -t tests < <(list_tests "${suite_args[@]}")
runs=()
for t in "${tests[@]}"; do
  # The unit suite is the baseline.
  [[ " ${unit_tests[*]} " == *" $t "* ]] && continue
  reset_counters
  echo "coverage: $t"
  meson test -C "$dir" --no-rebuild "$t" >/dev/null 2>&1 || echo "coverage: $t did not pass (counted anyway)"
  snapshot "$out/test-$t.json" && runs+=("$t=$out/test-$t.json")
done
python3 "$report" select "$root" "$out/unit.json" "${runs[@]}"
