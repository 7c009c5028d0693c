#!/usr/bin/env bash
# The test suite, as `tools/urnic test` runs it (and CI through .ci/run).
#
#   tools/urnic test                  the CI run, two stages, each built once:
#       release   g++ -Werror: every test (unit, acceptance, hosts, root, interop, slow; of
#                 Google's rdma-unit-test the fixed subset rdma-unit-test-ci)
#       sanitize  clang -Werror with ASan+UBSan and libFuzzer: the unit suites, the
#                 acceptance tests labelled 'sanitize' (chosen by coverage:
#                 docs/TESTING.md says which and why) and the fuzz targets
#   tools/urnic test --quick          unit + smoke suites of the release build (< 1 min once built)
#   tools/urnic test --suite NAME     one suite (repeatable) of the release build; 'fuzz' and
#                                     'sanitize' run in the sanitize stage's build;
#                                     'rdma-unit-test' is all 530 tests of Google's suite (about
#                                     40 min; the release stage runs its fixed subset,
#                                     rdma-unit-test-ci: docs/RDMA-UNIT-TEST.md); 'fabtests' is
#                                     libfabric's fabtests, -t quick and -t all, verbs and
#                                     verbs;ofi_rxm (the release stage runs fabtests-ci:
#                                     docs/MIDDLEWARE.md, "fabtests"); 'spdk' is SPDK's
#                                     NVMe-oF over RDMA on RoCE and iWARP (builds SPDK
#                                     once, about 12 min: docs/MIDDLEWARE.md, "NVMe-oF");
#                                     'ucx-gtest' is UCX 1.13.1's UCT tests for rc_verbs, ud_verbs,
#                                     the IB memory domain and rdmacm (builds UCX's gtest against
#                                     the system's UCX once, about 2 min; root; the release stage
#                                     runs its subset ucx-gtest-ci: docs/MIDDLEWARE.md, "UCX's
#                                     gtest"); 'pfc'
#                                     is acceptance-pfc and acceptance-incast-pfc (issue 50: not reliable
#                                     under load yet); 'tarball'
#                                     is the release tarball on Debian 11, 12 and 13 with their
#                                     own RDMA programs (docs/CI.md, "The tarball"); 'docker'
#                                     builds the Dockerfile with buildah and runs the image with
#                                     podman (docs/CI.md, "What is tested": about an hour, it
#                                     compiles urnic inside the image); 'xdp' is
#                                     acceptance-xdp (issue 47: not yet passed on a quiet machine);
#                                     'ib-fabric' is acceptance-ib-fabric (four InfiniBand hosts, two
#                                     urnic-switches: docs/INFINIBAND.md, "A switch")
#   tools/urnic test --coverage [--suite NAME]...
#                                     a gcov build; runs the suites (default: unit acceptance),
#                                     prints line coverage per layer
#   tools/urnic test --coverage --per-test [--suite NAME]...
#                                     the same, one test at a time: the lines each test reaches
#                                     that the unit suites do not (how 'sanitize' is chosen)
# Suites: unit, smoke, acceptance, hosts, root, interop, slow, sanitize, fuzz, checker,
# rdma-unit-test, fabtests, spdk, ucx-gtest, pfc, tarball, docker, xdp, ib, ib-fabric (tests/meson.build).
# Ends with one line "urnic test summary: ... PASS" or "... FAIL", after one line per stage
# with its wall time and the five slowest tests. A full run over 60 minutes fails: CI's limit
# is 90 and the budget is 40 (docs/TESTING.md).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${URNIC_TEST_BUILD_ROOT:-$root/build-test}
fuzz_seconds=${URNIC_FUZZ_SECONDS:-20}
budget_seconds=${URNIC_TEST_BUDGET_SECONDS:-3600}
jobs=$(nproc)

usage() { sed -n '2,/^set -uo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//' >&2; exit 2; }

mode=ci suites=() per_test=
while [[ $# -gt 0 ]]; do
  case $1 in
    --quick) mode=quick ;;
    --suite) [[ $# -ge 2 ]] || usage; suites+=("$2"); shift ;;
    --suite=*) suites+=("${1#--suite=}") ;;
    --coverage) mode=coverage ;;
    --per-test) per_test=1 ;;
    -h|--help) usage ;;
    *) printf 'urnic test: unknown option %s\n' "$1" >&2; usage ;;
  esac
  shift
done
known_suites=" unit smoke acceptance hosts root interop slow sanitize fuzz checker rdma-unit-test fabtests spdk ucx-gtest pfc tarball docker xdp ib ib-fabric "
for s in "${suites[@]}"; do
  [[ $known_suites == *" $s "* ]] || {
    printf 'urnic test: no suite "%s"; the suites are:%s\n' "$s" "$known_suites" >&2; exit 2; }
done
[[ $mode == ci && ${#suites[@]} -gt 0 ]] && mode=suites
[[ -n $per_test && $mode != coverage ]] && { echo "urnic test: --per-test goes with --coverage" >&2; exit 2; }

total_ok=0 total_fail=0 total_skip=0
failed_stages=() stage_lines=() stage_dirs=()
run_start=$SECONDS

log() { printf '\n=== %s ===\n' "$*"; }
mmss() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

# Build configurations: the meson setup options and the environment of each.
# CI's builds carry no full debug information (-g costs a fifth of the build
# time): release none, the sanitizer build line tables (-g1), which is what
# ASan, UBSan and libFuzzer need for file:line in their reports. Assertions
# stay on in both (NDEBUG only for buildtype=release).
# Two builds, two compilers: g++ -Werror for the release build, clang -Werror
# for the sanitizer build, which also builds the libFuzzer targets (they
# need clang) and runs them; one build instead of a g++ sanitizer build and a
# clang build saves CI a build and a second run of the unit suites (about 6
# minutes). clang links ASan's runtime statically into executables unless
# told otherwise; the drop-in libraries are loaded by Debian's uninstrumented
# programs, which find the runtime only as a shared library (LD_PRELOAD in
# tests/acceptance/common.sh), so the whole build links the shared runtime
# (-shared-libasan) and finds it through an rpath. -O1 is libFuzzer's usual
# level and compiles a third faster than -O2.
# The sanitizer build is a unity build (-Dunity=on: meson joins each
# target's sources four at a time), which saves it a quarter to a third of
# its compile time (the standard and project headers are parsed once per four
# files); the release build is not, so every file still has to compile on its
# own (its own includes, no name clashes hidden).
no_interop="URNIC_SKIP_INTEROP=the rxe interop matrix runs in the release stage only"
# The release build has prefix /usr (nothing is installed from it) so that
# package-deb-chroot can make the Debian package from it (tests/package/).
release_env=() release_opts=(-Dwerror=true -Ddebug=false -Doptimization=2 --prefix=/usr)
asan_runtime_dir=$(dirname "$(clang++ -print-file-name=libclang_rt.asan-x86_64.so 2>/dev/null || echo .)")
sanitize_env=("$no_interop" CC=clang CXX=clang++ "URNIC_FUZZ_SECONDS=$fuzz_seconds"
              ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
              UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1)
sanitize_opts=(-Db_sanitize=address,undefined -Db_lundef=false -Dfuzz=true -Dwerror=true
               -Ddebug=false -Doptimization=1 -Dtest_optimization=0 -Dunity=on
               "-Dcpp_args=-g1 -fno-sanitize-recover=all"
               "-Dcpp_link_args=-shared-libasan -Wl,-rpath,$asan_runtime_dir")

# stage NAME DIR ENV_ARRAY OPTS_ARRAY [meson test selection args...]
# Builds DIR once (ninja decides what is stale), then runs the selected tests.
stage() {
  local name=$1 dir=$2 envname=$3 optname=$4; shift 4
  local -n envs=$envname opts=$optname
  local t0=$SECONDS t1
  log "$name: build ($dir)"
  if [[ ! -f $dir/build.ninja ]]; then
    if ! env "${envs[@]}" meson setup "$dir" "$root" "${opts[@]}"; then
      failed_stages+=("$name:setup"); total_fail=$((total_fail + 1)); return 1
    fi
  fi
  if ! env "${envs[@]}" ninja -C "$dir" -j "$jobs"; then
    failed_stages+=("$name:build"); total_fail=$((total_fail + 1))
    stage_lines+=("$name: build FAILED after $(mmss $((SECONDS - t0)))")
    return 1
  fi
  t1=$SECONDS
  log "$name: test ${*:-(all)}"
  # --no-rebuild: the build above is the stage's only build.
  env "${envs[@]}" meson test -C "$dir" --no-rebuild --print-errorlogs \
      --num-processes "$jobs" --test-args="${URNIC_TEST_ARGS:-}" "$@"
  local rc=$?
  local ok fail skip
  ok=$(meson_count "$dir" OK); fail=$(meson_count "$dir" FAIL); skip=$(meson_count "$dir" SKIP)
  total_ok=$((total_ok + ok)); total_fail=$((total_fail + fail)); total_skip=$((total_skip + skip))
  [[ $rc -eq 0 ]] || failed_stages+=("$name")
  stage_dirs+=("$name=$dir")
  stage_lines+=("$(printf '%s: %s (build %s, tests %s): %d ok, %d failed, %d skipped' "$name" \
      "$(mmss $((SECONDS - t0)))" "$(mmss $((t1 - t0)))" "$(mmss $((SECONDS - t1)))" "$ok" "$fail" "$skip")")
  return $rc
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

# The five slowest tests over every stage that ran (meson's testlog.json).
slowest() {
  python3 - "${stage_dirs[@]}" <<'EOF'
import json, sys
rows = []
for arg in sys.argv[1:]:
    stage, d = arg.split('=', 1)
    try:
        with open(d + '/meson-logs/testlog.json') as f:
            for line in f:
                t = json.loads(line)
                rows.append((t.get('duration', 0.0), stage, t['name'], t['result']))
    except OSError:
        pass
rows.sort(reverse=True)
if rows:
    print('slowest: ' + '; '.join(f'{s}/{n} {d:.0f} s' + ('' if r == 'OK' else f' ({r})')
                                  for d, s, n, r in rows[:5]))
EOF
}

# What each failed test said, short, just above the summary: CI keeps only the
# tail of a run's output, and meson's --print-errorlogs prints a failure where
# it happened, far above. Per failed test: its lines that say FAIL (at most
# 12) and its last 8 lines.
failure_excerpts() {
  python3 - "${stage_dirs[@]}" <<'PY'
import json, re, sys
for arg in sys.argv[1:]:
    stage, d = arg.split('=', 1)
    try:
        lines = open(d + '/meson-logs/testlog.json').read().splitlines()
    except OSError:
        continue
    for line in lines:
        t = json.loads(line)
        if t['result'] in ('OK', 'SKIP', 'EXPECTEDFAIL'):
            continue
        out = (t.get('stdout') or '').splitlines()
        said = [l for l in out if re.search(r'\bFAIL|^not ok|^FAILED', l)][:12]
        print(f"--- {stage}/{t['name']} ({t['result']}, {t.get('duration', 0):.0f} s)")
        for l in said + ['  ...'] + out[-8:]:
            print('  ' + l[:200])
PY
}

summary() {
  local elapsed=$((SECONDS - run_start))
  echo
  failure_excerpts
  local l
  for l in "${stage_lines[@]}"; do echo "$l"; done
  slowest
  echo "total: $(mmss "$elapsed")"
  if [[ $mode == ci && $elapsed -gt $budget_seconds ]]; then
    printf 'urnic test: the run took %s, over its %d-minute budget (CI stops at 90): make the slowest tests faster or move them (docs/TESTING.md)\n' \
      "$(mmss "$elapsed")" $((budget_seconds / 60))
    failed_stages+=("over-budget")
  fi
  if [[ ${#failed_stages[@]} -eq 0 && $total_fail -eq 0 ]]; then
    printf 'urnic test summary: %d passed, %d failed, %d skipped: PASS\n' "$total_ok" "$total_fail" "$total_skip"
    exit 0
  fi
  printf 'urnic test summary: %d passed, %d failed, %d skipped (failing: %s): FAIL\n' \
    "$total_ok" "$total_fail" "$total_skip" "${failed_stages[*]}"
  exit 1
}

suite_args() { local s; for s in "$@"; do printf -- '--suite\n%s\n' "$s"; done; }

case $mode in
  ci)
    stage release "$out/release" release_env release_opts
    # Not the 'checker' tests under the sanitizers: the parsers that
    # frame-decode-vs-tshark drives with the reference captures run on every
    # frame of those captures here anyway (the fuzz targets' seeds), and
    # layering checks includes; Python checkers' verdicts do not depend on the
    # compiler (they ran in release).
    san_suites=(unit sanitize); [[ $fuzz_seconds -gt 0 ]] && san_suites+=(fuzz)
    mapfile -t sel < <(suite_args "${san_suites[@]}")
    stage sanitize "$out/sanitize" sanitize_env sanitize_opts "${sel[@]}" --no-suite checker
    ;;
  quick)
    mapfile -t sel < <(suite_args unit smoke)
    stage quick "$out/release" release_env release_opts "${sel[@]}"
    ;;
  suites)
    rel=() san=()
    for s in "${suites[@]}"; do
      case $s in fuzz) san+=(fuzz) ;; sanitize) san+=(unit sanitize) ;; *) rel+=("$s") ;; esac
    done
    if [[ ${#rel[@]} -gt 0 ]]; then
      mapfile -t sel < <(suite_args "${rel[@]}")
      stage release "$out/release" release_env release_opts "${sel[@]}"
    fi
    if [[ ${#san[@]} -gt 0 ]]; then
      mapfile -t sel < <(suite_args "${san[@]}")
      # As the CI stage: the checkers need one compile command per file,
      # which a unity build does not have.
      stage sanitize "$out/sanitize" sanitize_env sanitize_opts "${sel[@]}" --no-suite checker
    fi
    ;;
  coverage)
    [[ ${#suites[@]} -gt 0 ]] || suites=(unit acceptance)
    exec "$root/tools/coverage.sh" "$root" "$out/coverage" "${per_test:-}" "${suites[@]}"
    ;;
esac
summary
