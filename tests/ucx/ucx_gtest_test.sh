#!/usr/bin/env bash
# Builds UCX 1.13.1's own unit tests (test/gtest/gtest, from
# ../shared/ucx/ucx-1.13.1.tar.gz: the release Debian 12 ships) against
# Debian's UCX libraries (libucx0, libucx-dev) inside the build tree once,
# and runs its UCT tests for the verbs transports on urnic0 (RoCE v2, udp
# link) with Debian's UCX and urnic's drop-in libibverbs/librdmacm (issue
# 53; docs/MIDDLEWARE.md, "UCX's gtest"). No UCX library is built.
#
#   ucx_gtest_test.sh SET SOURCE_ROOT BUILD_ROOT WORK_DIR URNIC_SYSFS [SRC]
#
#   SET          rc_verbs | ud_verbs (the UCT tests parametrised over that
#                transport), ib (the IB memory domain: ib/test_md.*,
#                ib/test_ib_md.*, ib/test_md_fork.*, and
#                test_uct_ib_utils.*), rdmacm (the sockaddr
#                connection-manager tests), all (the four, one after the
#                other, with one table at the end), or ci (the fixed subset
#                of ci-subset.txt, from a binary of only the sources it
#                needs: the CI run's ucx-gtest-ci)
#   SOURCE_ROOT  urnic's source tree
#   BUILD_ROOT   urnic's build directory (its urnicd and drop-in libraries)
#   WORK_DIR     where the tests are unpacked, built and run (in the build
#                tree; ci and the full sets use directories of their own)
#   URNIC_SYSFS  the urnic-sysfs binary (UCX reads /sys/class/infiniband and
#                opens /dev/infiniband/uverbsN: its view, root only)
#   SRC          the directory with ucx-1.13.1.tar.gz (meson option ucx_src;
#                empty: $URNIC_UCX_SRC; neither: SOURCE_ROOT/../shared/ucx,
#                then /work/shared/ucx)
#
# The build (once; later runs reuse it while nothing it depends on
# changed): the tarball's src/ (UCX's internal headers, which the tests
# use) and test/gtest are unpacked, config.h is Debian's own (`ucx_info -b`
# prints every #define of the config.h Debian's UCX was built with: struct
# layouts depend on them), the two headers configure generates are Debian's
# (libucx-dev), and gtest.mk compiles the test sources at -O0 and links
# them against Debian's libucs, libuct, libucp and libuct_ib (the module
# UCX itself loads from the same file: one copy). Which sources:
# trim_gtest_sources.py (the harness, the UCT tests and the IB lists of
# test/gtest/Makefile.am, with libucxperf for the perf tests) for the
# sets, the `src` lines of ci-subset.txt for ci. Debian's UCX must be the
# tarball's release (else: skipped).
#
# Each set runs in a network namespace of its own against this build's
# urnicd with urnic0 at 127.0.0.1, inside urnic-sysfs's view, with a time
# limit ($UCX_GTEST_TIMEOUT seconds a set, default 1800, 600 for ci); the
# binary is checked to run Debian's UCX, one libuct_ib and urnic's
# libibverbs and librdmacm. deviations.txt lists the tests left out, each
# with its reason. A test that crashes the binary is counted as crashed
# and the run goes on with the tests after it. Every test's result is
# printed (PASS, SKIP: UCX's own UCS_TEST_SKIP_COND, FAIL, CRASH); any
# failure or crash fails the run.
# Exits 77 (skipped) when the sources or the packages to build them are
# missing, when Debian's UCX is another release, or when not root.
set -uo pipefail
set_arg=${1:?set}; source_root=${2:?}; build_root=${3:?}; work=${4:?}; sysfs=${5:?}; src=${6:-}
here=$(cd "$(dirname "$0")" && pwd)
skip() { printf 'SKIP: %s\n' "$*"; exit 77; }
all_sets=(rc_verbs ud_verbs ib rdmacm)
case $set_arg in
  all) sets=("${all_sets[@]}") ;;
  rc_verbs|ud_verbs|ib|rdmacm|ci) sets=("$set_arg") ;;
  *) echo "ucx_gtest_test: unknown set $set_arg" >&2; exit 2 ;;
esac
S=$work/src
gtest=$work/obj/gtest
libdir=/usr/lib/x86_64-linux-gnu

# filter SET: the gtest filter of a set (positive part).
filter() {
  case $1 in
    rc_verbs) echo 'rc_verbs/*' ;;
    ud_verbs) echo 'ud_verbs/*' ;;
    ib) echo 'ib/*:test_uct_ib_utils.*' ;;
    rdmacm) echo 'rdmacm/*' ;;
    ci) awk '$1 == "test" { print $2 }' "$here/ci-subset.txt" | paste -sd: - ;;
  esac
}
# deviations SET: the set's excluded tests (deviations.txt; ci: every
# set's), ':'-joined.
deviations() {
  awk -v s="$1" '!/^#/ && NF >= 2 && ($1 == s || s == "ci") { print $2 }' "$here/deviations.txt" | paste -sd: -
}
# check_libs LD_DEBUG_LOG: the binary ran Debian's UCX (libucs, one
# libuct_ib: the one it links is the module UCX loads) and urnic's
# libibverbs and librdmacm (the rdmacm module's), by the objects the
# dynamic loader initialised (LD_DEBUG=files).
check_libs() {
  local inits ok=0 l want got
  inits=$(awk '/calling init: / { print $NF }' "$1")
  for l in libucs.so.0:"$libdir/libucs.so.0" libuct.so.0:"$libdir/libuct.so.0" \
           libuct_ib.so.0:"$libdir/ucx/libuct_ib.so.0" libuct_rdmacm.so.0:"$libdir/ucx/libuct_rdmacm.so.0" \
           libibverbs.so.1:"$build_root/verbs_shim/libibverbs.so.1" librdmacm.so.1:"$build_root/rdmacm_shim/librdmacm.so.1"; do
    got=$(grep "/${l%%:*}\$" <<< "$inits")
    want=$(realpath "${l#*:}")
    if [[ $(wc -l <<< "$got") -ne 1 || $(realpath "$got" 2>/dev/null) != "$want" ]]; then
      echo "FAIL: gtest does not load one ${l%%:*}, $want: it loads ${got:-none}"; ok=1
    fi
  done
  return $ok
}

# Inside the namespace (the script runs itself again there).
if [[ ${UCX_GTEST_INNER:-} == 1 ]]; then
  ip link set lo up 2>/dev/null || true
  rt=$work/run; rm -rf "$rt"; mkdir -p "$rt"; chmod 755 "$rt"
  cat > "$work/urnicd.json" <<'JSON'
{"devices": [{"name": "urnic0", "address": "127.0.0.1"}]}
JSON
  "$build_root/engine/urnicd" --config "$work/urnicd.json" --runtime-dir "$rt" > "$work/urnicd.log" 2>&1 &
  dpid=$!
  trap 'kill "$dpid" 2>/dev/null; wait "$dpid" 2>/dev/null' EXIT
  for _ in $(seq 100); do grep -q 'listening on' "$work/urnicd.log" && break; sleep 0.1; done
  grep -q 'listening on' "$work/urnicd.log" || { echo "FAIL: urnicd did not start:"; cat "$work/urnicd.log"; exit 1; }
  export URNIC_RUNTIME_DIR=$rt URNIC_NO_AUTOSTART=1
  export LD_LIBRARY_PATH=$build_root/verbs_shim:$build_root/rdmacm_shim
  # UCX's own defaults for its tests (test/gtest/Makefile.am), but a crash
  # prints a backtrace and ends instead of freezing for a debugger.
  export UCX_HANDLE_ERRORS=bt UCX_LOG_LEVEL=warn UCX_LOG_PRINT_ENABLE=y
  rc=0
  for set in "${sets[@]}"; do
    neg=$(deviations "$set")
    f="$(filter "$set")${neg:+-$neg}"
    "$sysfs" -- env LD_DEBUG=files "$gtest" --gtest_list_tests --gtest_filter="$f" 2> "$work/ld.$set" |
      awk '/^[^ ]/ { c = $1 } /^  / { print c $1 }' > "$work/list.$set"
    check_libs "$work/ld.$set" || { rc=1; continue; }
    total=$(wc -l < "$work/list.$set")
    ((total > 0)) || { echo "FAIL: gtest lists no test of $set (no urnic0?): $(tail -n 3 "$work/ld.$set")"; rc=1; continue; }
    log=$work/gtest.$set.log; : > "$log"
    todo=$f t0=$SECONDS crashed=() limit=${UCX_GTEST_TIMEOUT:-1800}
    [[ $set == ci ]] && limit=${UCX_GTEST_TIMEOUT:-600}
    while true; do
      left=$((limit - (SECONDS - t0)))
      ((left > 0)) || { echo "gtest $set: out of time"; rc=1; break; }
      timeout -k 10 "$left" stdbuf -oL -eL "$sysfs" -- "$gtest" --gtest_filter="$todo" >> "$log" 2>&1
      r=$?
      # The last test started with no result: it crashed the binary (or
      # the time ran out in it).
      last=$(awk '/^\[ RUN      \]/ { t = $4 } /^\[ *(OK|FAILED) *\] / && $NF ~ /\)$/ { t = "" } END { print t }' "$log")
      [[ $r -eq 0 || -z $last ]] && break
      if [[ $r -eq 124 || $r -eq 137 ]]; then echo "gtest $set: timed out ($limit s) in $last"; rc=1; crashed+=("$last"); break; fi
      crashed+=("$last")
      echo "[  CRASH   ] $last (exit $r)" >> "$log"
      rest=$(awk -v l="$last" 'seen { print } $0 == l { seen = 1 }' "$work/list.$set" | paste -sd: -)
      [[ -n $rest ]] || break
      todo=$rest
    done
    # Per test: passed, skipped (UCX's "[     SKIP ]" inside it), failed or
    # crashed, one line each (and the time gtest gives it), then the counts.
    awk -v set="$set" -v total="$total" -v s=$((SECONDS - t0)) -v each="$work/results.$set" '
      /^\[ RUN      \]/ { t = $4; skip = 0; next }
      /^\[     SKIP \]/ { skip = 1; next }
      /^\[       OK \]/ && $4 == t { if (skip) k++; else p++; print (skip ? "SKIP " : "PASS ") t " " $5 " " $6 > each; t = ""; next }
      /^\[  FAILED  \]/ && $NF ~ /\)$/ { n = $4; sub(/,$/, "", n); if (n == t) { f++; fl = fl "\n  FAIL " t; print "FAIL " t " " $(NF - 1) " " $NF > each; t = "" }; next }
      /^\[  CRASH   \]/ { c++; fl = fl "\n  CRASH " $4; print "CRASH " $4 > each }
      END { printf "ucx gtest %s: %d tests, %d passed, %d skipped, %d failed, %d crashed (%d s)%s\n",
                   set, total, p, k, f, c, s, fl }' "$log" > "$work/summary.$set"
    sed 's/^/  /' "$work/results.$set" 2> /dev/null
    cat "$work/summary.$set"
    grep -qE ' 0 failed, 0 crashed' "$work/summary.$set" || rc=1
    n=$(head -n 1 "$work/summary.$set" | tr -d ',' | awk '{ print $6 + $8 + $10 + $12 }')
    [[ $n -eq $total ]] || { echo "gtest $set: $n of $total tests have a result"; rc=1; }
  done
  "$build_root/engine/urnicd" --status --runtime-dir "$rt" | grep objects || true
  exit $rc
fi

(( EUID == 0 )) || skip "UCX takes a device only inside urnic-sysfs's view (/dev/infiniband, /sys/class/infiniband): root"

# The sources.
[[ -n $src ]] || src=${URNIC_UCX_SRC:-}
if [[ -z $src ]]; then
  for c in "$source_root/../shared/ucx" /work/shared/ucx; do
    [[ -d $c ]] && { src=$c; break; }
  done
fi
tarball=${src:-/nonexistent}/ucx-1.13.1.tar.gz
[[ -f $tarball ]] || skip "ucx-1.13.1.tar.gz not found (${src:-looked in $source_root/../shared/ucx and /work/shared/ucx}); set 'meson configure -Ducx_src=DIR' or URNIC_UCX_SRC=DIR"
missing=()
for p in make:make g++:g++ python3:python3 ucx_info:ucx-utils; do
  command -v "${p%%:*}" > /dev/null || missing+=("${p#*:}")
done
for f in libucs.so libuct.so libucp.so ucx/libuct_ib.so; do
  [[ -e $libdir/$f ]] || { missing+=(libucx-dev); break; }
done
[[ -f /usr/include/uct/api/version.h ]] || missing+=(libucx-dev)
[[ -f /usr/include/infiniband/mlx5dv.h ]] || missing+=(libibverbs-dev)
[[ -f /usr/include/numa.h ]] || missing+=(libnuma-dev)
[[ ${#missing[@]} -eq 0 ]] || skip "the packages to build UCX's gtest are missing: ${missing[*]} (apt-get install ${missing[*]}, or tools/bootstrap.sh)"
# The tests use UCX's internal headers and structures: Debian's UCX must be
# the tarball's release.
deb_version=$(ucx_info -v | awk '/^# Version/ { print $3 }')
[[ $deb_version == 1.13.1 ]] || skip "the system's UCX is ${deb_version:-unknown} (ucx_info -v), the tests are 1.13.1's: they use UCX's internal structures, which change between releases"

# Unpack, write config.h and build, once (again when anything the build
# depends on changed: the tarball, the system's UCX, the sources' choice).
mkdir -p "$work" || exit 2
exec 9> "$work/.lock"
flock 9
t0=$SECONDS
if [[ $set_arg == ci ]]; then
  srcs=$(awk '$1 == "src" { print $2 }' "$here/ci-subset.txt") perf=0
else
  srcs=$(tar -xzOf "$tarball" ucx-1.13.1/test/gtest/Makefile.am | python3 "$here/trim_gtest_sources.py" /dev/stdin) || exit 1
  perf=1
fi
config=$(ucx_info -b) || { echo "ucx_gtest_test: ucx_info -b failed"; exit 1; }
stamp=$( (cat "$tarball" "$here/gtest.mk"; echo "$srcs $perf"; echo "$config"; dpkg-query -W libucx-dev libucx0 2> /dev/null) |
  sha256sum | cut -c1-16)
log=$work/build.log
if [[ ! -f $work/built.$stamp ]]; then
  rm -rf "$S" "$work/obj" "$work"/built.* && mkdir -p "$S/gen/ucp/api" "$S/gen/uct/api" || exit 2
  (
    set -e
    # UCX's internal headers (src/), libucxperf's sources and the tests.
    tar -xzf "$tarball" -C "$S" --strip-components=1 ucx-1.13.1/src ucx-1.13.1/test/gtest
    # Debian's config.h: ucx_info -b prints each #define of it (the
    # build_config.h that src/tools/info/Makefile.am makes from config.h).
    echo "$config" > "$S/gen/config.h"
    cp /usr/include/ucp/api/ucp_version.h "$S/gen/ucp/api/"
    cp /usr/include/uct/api/version.h "$S/gen/uct/api/"
    nice -n 10 make -f "$here/gtest.mk" -j "$(nproc)" S="$S" GEN="$S/gen" O="$work/obj" SRCS="$(tr '\n' ' ' <<< "$srcs")" PERF=$perf
  ) > "$log" 2>&1 || { tail -n 30 "$log"; echo "ucx_gtest_test: building the gtest failed (whole log: $log)"; exit 1; }
  [[ -x $gtest ]] || { echo "ucx_gtest_test: no $gtest after the build (log: $log)"; exit 1; }
  touch "$work/built.$stamp"
  echo "ucx_gtest_test: built $(wc -w <<< "$srcs") test sources against the system's UCX in $((SECONDS - t0)) s"
else
  echo "ucx_gtest_test: reusing the build in $work"
fi

inner=(env UCX_GTEST_INNER=1 bash "$0" "$set_arg" "$source_root" "$build_root" "$work" "$sysfs")
t1=$SECONDS
unshare -n "${inner[@]}"
rc=$?
if [[ $set_arg == all ]]; then
  echo
  echo "| set | tests | passed | skipped | failed | crashed |"
  echo "|---|---|---|---|---|---|"
  for s in "${sets[@]}"; do
    [[ -f $work/summary.$s ]] && head -n 1 "$work/summary.$s" | tr -d ',' |
      awk '{ sub(/:$/, "", $3); printf "| %s | %s | %s | %s | %s | %s |\n", $3, $4, $6, $8, $10, $12 }'
  done
fi
echo "ucx_gtest_test: ran in $((SECONDS - t1)) s (logs: $work/gtest.*.log)"
exit $rc
