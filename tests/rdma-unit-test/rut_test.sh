#!/usr/bin/env bash
# Builds Google's rdma-unit-test from ../shared/rdma-unit-test into the build
# tree and runs it against this build's urnic (issue 25; docs/RDMA-UNIT-TEST.md).
#
#   rut_test.sh MODE SOURCE_ROOT BUILD_ROOT WORK_DIR [SRC]
#
#   MODE         ci: the fixed subset CI runs (the unit/*_test.cc files and
#                the exclusions of ci-subset.txt, built -O0 -g0), or
#                full: every file and all 530 tests, as the port's CMakeLists builds them
#   SOURCE_ROOT  urnic's source tree (for tools/rdma-unit-test.sh)
#   BUILD_ROOT   urnic's build directory (its urnicd and drop-in libibverbs)
#   WORK_DIR     where the suite is unpacked and built (in the build tree)
#   SRC          the port: the tarball, patches.diff, compat/, CMakeLists.txt
#                (meson option rdma_unit_test_src; empty: $URNIC_RDMA_UNIT_TEST_SRC;
#                neither set: SOURCE_ROOT/../shared/rdma-unit-test, then
#                /work/shared/rdma-unit-test)
#
# Exits 77 (skipped) when the port or a package it builds with is missing,
# naming what and how to get it. The tests run in a network namespace of
# their own (root: unshare -n; otherwise a user namespace with one if the
# kernel allows it), so that the private urnicd's 127.0.0.1:4791 meets no
# other daemon. Per-test limit: URNIC_RUT_TIMEOUT seconds (ci 60, full 300:
# the suite's stress tests take 2-5 minutes each on 2 cores).
set -uo pipefail
mode=${1:?mode}; source_root=${2:?}; build_root=${3:?}; work=${4:?}; src=${5:-}
case $mode in ci|full) ;; *) echo "rut_test: unknown mode $mode" >&2; exit 2 ;; esac
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tools/lib/private_ns.sh
source "$source_root/tools/lib/private_ns.sh"

skip() { printf 'SKIP: %s\n' "$*"; exit 77; }

# The port.
# A place given (the option, then the variable) is the only one looked at.
[[ -n $src ]] || src=${URNIC_RDMA_UNIT_TEST_SRC:-}
if [[ -z $src ]]; then
  for c in "$source_root/../shared/rdma-unit-test" /work/shared/rdma-unit-test; do
    [[ -d $c ]] && { src=$c; break; }
  done
fi
tarball=$(ls "${src:-/nonexistent}"/rdma-unit-test-*.tar.gz 2>/dev/null | head -n 1)
if [[ -z $src || -z $tarball || ! -f $src/patches.diff || ! -f $src/CMakeLists.txt || ! -d $src/compat ]]; then
  skip "the rdma-unit-test port was not found (${src:-looked in $source_root/../shared/rdma-unit-test and /work/shared/rdma-unit-test}): it needs rdma-unit-test-*.tar.gz, patches.diff, compat/ and CMakeLists.txt; set it with 'meson configure -Drdma_unit_test_src=DIR' or URNIC_RDMA_UNIT_TEST_SRC=DIR (docs/RDMA-UNIT-TEST.md)"
fi
src=$(cd "$src" && pwd)

# What it builds with (Debian 12 packages; tools/packages.txt lists them, so
# tools/bootstrap.sh installs them).
missing=()
for p in cmake:cmake make:make patch:patch tar:tar; do
  command -v "${p%%:*}" > /dev/null || missing+=("${p#*:}")
done
for p in gtest/gtest.h:libgtest-dev gmock/gmock.h:libgmock-dev absl/status/status.h:libabsl-dev \
         glog/logging.h:libgoogle-glog-dev gflags/gflags.h:libgflags-dev infiniband/verbs.h:libibverbs-dev; do
  [[ -f /usr/include/${p%%:*} ]] || missing+=("${p#*:}")
done
[[ ${#missing[@]} -eq 0 ]] ||
  skip "the packages to build rdma-unit-test are missing: ${missing[*]} (apt-get install ${missing[*]}, or tools/bootstrap.sh)"

# The CI subset (ci-subset.txt): the "files:" built, and a filter of "*-" and the "exclude:" patterns.
# Tests at once (tools/rdma-unit-test.sh --jobs): most of the suite's time
# is tests waiting for a timer, not using a core. The device-wide limit and
# stress tests still run alone.
exclude= filter='*' timeout_s=${URNIC_RUT_TIMEOUT:-300} jobs=${URNIC_RUT_JOBS:-1}
if [[ $mode == ci ]]; then
  timeout_s=${URNIC_RUT_TIMEOUT:-60}
  jobs=${URNIC_RUT_JOBS:-4}
  subset=$here/ci-subset.txt
  files=$(sed -e 's/#.*//' -n -e 's/^files: *//p' "$subset" | tr -s ' \n' ' ')
  filter="*-$(sed -e 's/#.*//' -n -e 's/^exclude: *//p' "$subset" | tr -d ' ' | paste -sd:)"
fi

# The deviations (deviations.txt: KIND SUITE TEST REASON) as the suite's
# introspection for urnic keys them, in place of the template's marker line.
deviations=$here/deviations.txt
write_introspection() {
  local entries
  entries=$(sed -e '/^#/d' -e '/^[[:space:]]*$/d' "$deviations" |
    awk '{ r = $0; sub(/^[^ ]+ [^ ]+ [^ ]+ /, "", r); gsub(/\\/, "\\\\", r); gsub(/"/, "\\\"", r)
           printf "        {{\"%s\", \"%s\"}, \"%s: %s\"},\n", $2, $3, $1, r }')
  ENTRIES=$entries awk '/@DEVIATIONS@/ { print ENVIRON["ENTRIES"]; next } { print }' "$here/introspection_urnic.h.in"
}
# The deviations as gtest patterns (every parameter of a registered
# parameterised test): all of them are left out of the run, and the timing
# ones make the second pass below. The suite's own skip is not enough: a
# fixture whose SetUp does not call BasicFixture's (MwType2AdvancedTest)
# never consults the list.
deviation_patterns() {  # deviation_patterns AWK-CONDITION
  awk "!/^#/ && NF >= 3 && ($1)"' { printf "%s*%s.%s:*%s.%s/*", sep, $2, $3, $2, $3; sep = ":" }' "$deviations"
}
timing_filter=$(deviation_patterns '$1 == "timing"')
if [[ $filter == '*' ]]; then filter="*-$(deviation_patterns 1)"; else filter="$filter:$(deviation_patterns 1)"; fi
echo "rut_test: $(grep -cvE '^#|^[[:space:]]*$' "$deviations") registered deviations left out ($deviations; docs/RDMA-UNIT-TEST.md)"

# Unpack (again when the port changed) and build.
t0=$SECONDS
stamp=$(cat "$tarball" "$src/patches.diff" "$src/CMakeLists.txt" $(find "$src/compat" -type f | sort) \
          "$here/introspection_urnic.h.in" "$here/deviations.txt" | sha256sum | cut -c1-16)
W=$work/W
if [[ ! -f $work/unpacked.$stamp ]]; then
  rm -rf "$work" && mkdir -p "$W" || exit 2
  tar -xzf "$tarball" -C "$W" && mv "$W"/rdma-unit-test* "$W/src" &&
    patch -s -d "$W/src" -p1 < "$src/patches.diff" &&
    write_introspection > "$W/src/internal/introspection_urnic.h" &&
    cp -r "$src/compat" "$src/CMakeLists.txt" "$W/" && chmod -R u+w "$W" ||
    { echo "rut_test: unpacking $tarball failed"; exit 1; }
  touch "$work/unpacked.$stamp"
fi
cmake_args=()
if [[ $mode == ci ]]; then
  # Only the test files of the subset (the helpers, internal/, public/ and
  # unit/'s fixtures and main, always), unoptimised and without debug
  # information: less than half the compile time of -O2 -g.
  for f in "$W"/src/unit/*_test.cc; do
    b=${f##*/}
    [[ " $files " == *" $b "* ]] || exclude+="$b;"
  done
  cmake_args=(-DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O0 -g0" "-DRUT_EXCLUDE=${exclude%;}")
else
  cmake_args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DRUT_EXCLUDE=)
fi
# Through ccache when it is installed, as meson compiles urnic itself; its
# base directory makes CMake's absolute paths relative, so that another
# checkout's build finds the same objects.
if command -v ccache > /dev/null; then
  cmake_args+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR=$W
fi
log=$work/build.log
if ! { cmake -S "$W" -B "$W/build" "${cmake_args[@]}" && make -C "$W/build" -j "$(nproc)"; } > "$log" 2>&1; then
  tail -n 30 "$log"
  echo "rut_test: building rdma-unit-test failed (whole log: $log)"
  exit 1
fi
echo "rut_test: built rdma-unit-test ($mode) in $((SECONDS - t0)) s"

# run_suite FILTER LOG_DIR JOBS [SUITE-ARGS...]: one process per test
# (tools/rdma-unit-test.sh), in a private network namespace with its loopback up.
run_suite() {
  local filter=$1 log_dir=$2 jobs=$3; shift 3
  local run=("$source_root/tools/rdma-unit-test.sh" --urnic-build "$build_root" --timeout "$timeout_s" --jobs "$jobs"
             --filter "$filter" --log-dir "$log_dir" "$W/build/rdma_unit_test" -- --device_name=urnic0 "$@")
  local inner='ip link set lo up 2>/dev/null || ifconfig lo up 2>/dev/null; exec "$@"'
  rm -rf "$log_dir"
  if private_ns_cmd -n; then
    "${private_ns[@]}" bash -c "$inner" rut "${run[@]}"
  else
    echo "rut_test: no private network namespace (not root, no user namespaces): running in the host's"
    "${run[@]}"
  fi
}

t1=$SECONDS
run_suite "$filter" "$work/failed" "$jobs"
rc=$?
echo "rut_test: ran the $mode set in $((SECONDS - t1)) s (failed tests' output: $work/failed)"

# The timing deviations again, registered deviations off and the suite's
# waits five times as long (10 s for its 2 s): each must pass, so that the
# deviation excuses the wait and nothing else (deviations.txt).
if [[ -n $timing_filter ]]; then
  echo "rut_test: the timing deviations again, with --completion_wait_multiplier=5"
  t2=$SECONDS
  # All of them wait on retry timers: twice the jobs.
  RUT_URNIC_NO_DEVIATIONS=1 run_suite "$timing_filter" "$work/failed-timing" $((jobs * 2)) --completion_wait_multiplier=5
  rc2=$?
  echo "rut_test: ran the timing deviations in $((SECONDS - t2)) s"
  [[ $rc -eq 0 ]] && rc=$rc2
fi
exit $rc
