#!/usr/bin/env bash
# Runs Google's rdma-unit-test (built outside the repository, see
# docs/RDMA-UNIT-TEST.md) against urnic, one test per process with a time
# limit, so that a crash or a hang costs one verdict and not the rest.
#
#   tools/rdma-unit-test.sh [OPTIONS] BINARY [-- SUITE-ARGS...]
#
#   --urnic-build DIR   use urnic from this build directory: its libibverbs
#                       (LD_LIBRARY_PATH) and its urnicd (URNIC_DAEMON), in a
#                       private runtime directory whose daemon is stopped at
#                       the end (what a meson test would pass). Without it the
#                       caller's environment is used as it is, e.g.
#                       tools/urnic run -- tools/rdma-unit-test.sh BINARY
#   --timeout S         limit per test in seconds (default 120)
#   --filter PATTERN    gtest filter selecting the tests (default '*')
#   --log-dir DIR       keep each failed test's output in DIR/<test>.log
#   --jobs N            run up to N tests at once (default 1). Most of the
#                       suite's time is tests waiting for a timer (a retry
#                       timeout, the suite's 10 ms completion polls), so N
#                       above the core count still pays; tests matching
#                       --serial run alone, after the others
#   --serial PATTERN    gtest pattern of the tests that must run alone
#                       (default: those that use up a device-wide limit or
#                       load every core: DeviceLimitTest, the stress and
#                       threaded tests)
#
# Prints one line per test (PASS / FAIL / SKIP / TIMEOUT, seconds, and for a
# failure its first failure message), then the summary line
#   rdma-unit-test: P passed, F failed, S skipped
# (a timeout counts as failed). Exits 0 when nothing failed, 1 otherwise,
# 2 on a usage error.
set -uo pipefail

usage() { sed -n '2,/^set -uo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//' >&2; exit 2; }

timeout_s=120
filter='*'
log_dir=
urnic_build=
jobs=1
serial='DeviceLimitTest.*:*Stress*:*MultiThread*:Threaded*'

while [[ $# -gt 0 ]]; do
  case $1 in
    --timeout) timeout_s=${2:?}; shift 2 ;;
    --filter) filter=${2:?}; shift 2 ;;
    --log-dir) log_dir=${2:?}; shift 2 ;;
    --urnic-build) urnic_build=${2:?}; shift 2 ;;
    --jobs) jobs=${2:?}; shift 2 ;;
    --serial) serial=${2:?}; shift 2 ;;
    -h|--help) usage ;;
    --) shift; break ;;
    -*) echo "rdma-unit-test: unknown option $1" >&2; usage ;;
    *) [[ -z ${binary:-} ]] || usage; binary=$1; shift ;;
  esac
done
[[ $# -gt 0 && ${1:-} == -- ]] && shift
[[ -n ${binary:-} ]] || usage
if [[ ! -x $binary ]]; then
  echo "rdma-unit-test: $binary is not an executable (build the suite first: docs/RDMA-UNIT-TEST.md)" >&2
  exit 2
fi
suite_args=("$@")

if [[ -n $urnic_build ]]; then
  urnic_build=$(cd "$urnic_build" && pwd) || exit 2
  [[ -x $urnic_build/engine/urnicd ]] || { echo "rdma-unit-test: no urnicd in $urnic_build/engine" >&2; exit 2; }
  rt=$(mktemp -d /tmp/urnic-rut.XXXXXX)
  export URNIC_RUNTIME_DIR=$rt URNIC_DAEMON=$urnic_build/engine/urnicd
  export LD_LIBRARY_PATH=$urnic_build/verbs_shim:$urnic_build/rdmacm_shim
  # shellcheck source=tools/lib/cleanup.sh
  source "$(dirname "$0")/lib/cleanup.sh"
  cleanup_daemon_dirs+=("$rt")
  cleanup_paths+=("$rt")
  trap 'exit 143' TERM INT  # so that the EXIT trap runs when the runner is stopped
fi
[[ -n $log_dir ]] && mkdir -p "$log_dir"

# --gtest_list_tests: "Suite." lines, then indented test names (a
# parameterised one is followed by "  # GetParam() = ...").
list_tests() {
  "$binary" --gtest_list_tests "--gtest_filter=$1" "${suite_args[@]}" 2>/dev/null |
    awk '/^[^ ]/ { suite = $1; next } /^  [^ ]/ { print suite $1 }'
}
mapfile -t tests < <(list_tests "$filter")
if [[ ${#tests[@]} -eq 0 ]]; then
  echo "rdma-unit-test: no tests listed by $binary for filter '$filter'" >&2
  exit 2
fi
alone=()
if (( jobs > 1 )); then
  declare -A is_alone=()
  while read -r t; do [[ -n $t ]] && is_alone[$t]=1; done < <(list_tests "$serial")
  shared=()
  for t in "${tests[@]}"; do
    if [[ -n ${is_alone[$t]:-} ]]; then alone+=("$t"); else shared+=("$t"); fi
  done
  tests=("${shared[@]}")
fi

work=$(mktemp -d /tmp/rut-run.XXXXXX)
# run_one INDEX TEST: runs it, and writes its verdict line to $work/INDEX.
run_one() {
  local i=$1 t=$2 out=$work/$1.out start rc secs why= verdict
  start=$(date +%s.%N)
  timeout -k 5 "$timeout_s" "$binary" "--gtest_filter=$t" "${suite_args[@]}" > "$out" 2>&1
  rc=$?
  secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  if [[ $rc -eq 124 || $rc -eq 137 ]]; then
    verdict=TIMEOUT why="after ${timeout_s} s"
  elif [[ $rc -eq 0 ]] && grep -q '^\[  SKIPPED \]' "$out"; then
    verdict=SKIP
  elif [[ $rc -eq 0 ]] && grep -q '^\[  PASSED  \] 1 test' "$out"; then
    verdict=PASS
  else
    verdict=FAIL
    # The first gtest failure location and message, or why the process died.
    why=$(grep -m1 -A2 -E '^[^ ]+:[0-9]+: Failure' "$out" | tr '\n' ' ' | cut -c1-200)
    [[ -n $why ]] || why="exit status $rc: $(tail -n 1 "$out" | cut -c1-150)"
  fi
  [[ $verdict != PASS && $verdict != SKIP && -n $log_dir ]] && cp "$out" "$log_dir/${t//\//_}.log"
  rm -f "$out"
  printf '%-7s %s (%s s)%s\n' "$verdict" "$t" "$secs" "${why:+  $why}" > "$work/$i"
}

passed=0 failed=0 skipped=0
# report INDEX: prints a finished test's line and counts it.
report() {
  local line
  line=$(cat "$work/$1")
  echo "$line"
  case $line in
    PASS*) passed=$((passed + 1)) ;;
    SKIP*) skipped=$((skipped + 1)) ;;
    *) failed=$((failed + 1)) ;;
  esac
}

# The shared tests, up to $jobs at once (each line printed when its test
# ends, so in the order they end), then the serial ones one by one.
declare -A running=()
i=0
for t in "${tests[@]}"; do
  while (( ${#running[@]} >= jobs )); do
    wait -n
    for k in "${!running[@]}"; do
      [[ -f $work/$k ]] || continue  # its last act is writing its line
      unset "running[$k]"
      report "$k"
    done
  done
  run_one "$i" "$t" &
  running[$i]=1
  i=$((i + 1))
done
wait
for k in "${!running[@]}"; do report "$k"; done
for t in "${alone[@]}"; do
  run_one "$i" "$t"
  report "$i"
  i=$((i + 1))
done
rm -rf "$work"
echo "rdma-unit-test: $passed passed, $failed failed, $skipped skipped"
[[ $failed -eq 0 ]]
