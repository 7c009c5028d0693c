#!/usr/bin/env bash
# The whole test suite, as `tools/urnic test` runs it (and CI through .ci/run):
#   1. the normal build with warnings as errors: unit and acceptance tests
#   2. an AddressSanitizer + UndefinedBehaviorSanitizer build: the same tests
#   3. a clang libFuzzer build: every fuzz target for URNIC_FUZZ_SECONDS each
# Ends with one summary line: "urnic test summary: ... PASS" or "... FAIL".
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${URNIC_TEST_BUILD_ROOT:-$root/build-test}
fuzz_seconds=${URNIC_FUZZ_SECONDS:-30}
jobs=$(nproc)

total_ok=0 total_fail=0 total_skip=0
failed_stages=()

log() { printf '\n=== %s ===\n' "$*"; }

# stage NAME BUILD_DIR [env...] -- [meson setup options...]
stage() {
  local name=$1 dir=$2; shift 2
  local envs=()
  while [[ $# -gt 0 && $1 != -- ]]; do envs+=("$1"); shift; done
  shift  # --
  log "$name: build ($dir)"
  if [[ ! -f $dir/build.ninja ]]; then
    if ! env "${envs[@]}" meson setup "$dir" "$root" "$@"; then
      failed_stages+=("$name:setup"); total_fail=$((total_fail + 1)); return
    fi
  fi
  if ! ninja -C "$dir" -j "$jobs"; then
    failed_stages+=("$name:build"); total_fail=$((total_fail + 1)); return
  fi
  log "$name: test"
  env "${envs[@]}" meson test -C "$dir" --print-errorlogs --num-processes "$jobs" \
      --test-args="${URNIC_TEST_ARGS:-}" 
  local rc=$?
  local ok fail skip
  ok=$(meson_count "$dir" OK); fail=$(meson_count "$dir" FAIL); skip=$(meson_count "$dir" SKIP)
  total_ok=$((total_ok + ok)); total_fail=$((total_fail + fail)); total_skip=$((total_skip + skip))
  [[ $rc -eq 0 ]] || failed_stages+=("$name")
  printf '%s: %d ok, %d failed, %d skipped\n' "$name" "$ok" "$fail" "$skip"
}

# Count results of one kind from meson's JSON test log.
meson_count() {
  local dir=$1 kind=$2
  local f=$dir/meson-logs/testlog.json
  [[ -f $f ]] || { echo 0; return; }
  case $kind in
    OK) grep -c '"result": "OK"' "$f" ;;
    SKIP) grep -c '"result": "SKIP"' "$f" ;;
    FAIL) grep -cE '"result": "(FAIL|TIMEOUT|ERROR|UNEXPECTEDPASS)"' "$f" ;;
  esac
}

stage release "$out/release" -- -Dwerror=true
# The kernel-peer interop matrix boots VMs under emulation and takes minutes:
# it runs in the release stage; the other stages report it skipped, saying so.
no_interop="URNIC_SKIP_INTEROP=the rxe interop matrix runs in the release stage only"
stage sanitize "$out/asan" "$no_interop" ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 -- \
    -Db_sanitize=address,undefined -Db_lundef=false -Dcpp_args=-fno-sanitize-recover=all
if [[ $fuzz_seconds -gt 0 ]]; then
  stage fuzz "$out/fuzz" "$no_interop" CC=clang CXX=clang++ URNIC_FUZZ_SECONDS="$fuzz_seconds" -- \
      -Dfuzz=true -Db_lundef=false --buildtype=debugoptimized
fi

echo
if [[ ${#failed_stages[@]} -eq 0 && $total_fail -eq 0 ]]; then
  printf 'urnic test summary: %d passed, %d failed, %d skipped: PASS\n' "$total_ok" "$total_fail" "$total_skip"
  exit 0
fi
printf 'urnic test summary: %d passed, %d failed, %d skipped (failing: %s): FAIL\n' \
  "$total_ok" "$total_fail" "$total_skip" "${failed_stages[*]}"
exit 1
