#!/usr/bin/env bash
# Builds UCX 1.13.1's own unit tests (test/gtest/gtest, from
# ../shared/ucx/ucx-1.13.1.tar.gz: the release Debian 12 ships) inside the
# build tree once, and runs its UCT tests for the verbs transports on
# urnic0 (RoCE v2, udp link) with UCX's own libraries from that build and
# urnic's drop-in libibverbs/librdmacm (issue 53; docs/MIDDLEWARE.md, "UCX's
# gtest").
#
#   ucx_gtest_test.sh SET SOURCE_ROOT BUILD_ROOT WORK_DIR URNIC_SYSFS [SRC]
#
#   SET          rc_verbs | ud_verbs (the UCT tests parametrised over that
#                transport), ib (the IB memory domain: ib/test_md.*,
#                ib/test_ib_md.*, ib/test_md_fork.*, and
#                test_uct_ib_utils.*), rdmacm (the sockaddr
#                connection-manager tests), or all (the four, one after the
#                other, with one table at the end)
#   SOURCE_ROOT  urnic's source tree
#   BUILD_ROOT   urnic's build directory (its urnicd and drop-in libraries)
#   WORK_DIR     where UCX is unpacked, built and run (in the build tree)
#   URNIC_SYSFS  the urnic-sysfs binary (UCX reads /sys/class/infiniband and
#                opens /dev/infiniband/uverbsN: its view, root only)
#   SRC          the directory with ucx-1.13.1.tar.gz (meson option ucx_src;
#                empty: $URNIC_UCX_SRC; neither: SOURCE_ROOT/../shared/ucx,
#                then /work/shared/ucx)
#
# The build (once; later runs reuse it while the tarball is the same) is
# UCX configured for verbs, rdma_cm, RC and UD only (no CUDA, ROCm, mlx5
# DV/DC, KNEM, XPMEM, Java, Go, docs), the libraries at -O1 and the test
# binary at -O0, and only what the gtest binary links (src/ucm, src/ucs,
# src/uct, src/ucp, src/tools/perf/lib, test/gtest);
# trim_gtest_sources.py leaves out the UCP/UCS/UCM/shared-memory/TCP test
# sources of the binary (none runs over verbs). Each set runs in a network
# namespace of its own against this build's urnicd with urnic0 at
# 127.0.0.1, inside urnic-sysfs's view, with a time limit
# ($UCX_GTEST_TIMEOUT seconds a set, default 1800). deviations.txt lists
# the tests left out, each with its reason. A test that crashes the binary
# is counted as failed and the run goes on with the tests after it.
# Exits 77 (skipped) when the sources or the packages to build them are
# missing, or when not root.
set -uo pipefail
set_arg=${1:?set}; source_root=${2:?}; build_root=${3:?}; work=${4:?}; sysfs=${5:?}; src=${6:-}
here=$(cd "$(dirname "$0")" && pwd)
skip() { printf 'SKIP: %s\n' "$*"; exit 77; }
all_sets=(rc_verbs ud_verbs ib rdmacm)
case $set_arg in
  all) sets=("${all_sets[@]}") ;;
  rc_verbs|ud_verbs|ib|rdmacm) sets=("$set_arg") ;;
  *) echo "ucx_gtest_test: unknown set $set_arg" >&2; exit 2 ;;
esac
S=$work/src
gtest=$S/test/gtest/gtest

# filter SET: the gtest filter of a set (positive part).
filter() {
  case $1 in
    rc_verbs) echo 'rc_verbs/*' ;;
    ud_verbs) echo 'ud_verbs/*' ;;
    ib) echo 'ib/*:test_uct_ib_utils.*' ;;
    rdmacm) echo 'rdmacm/*' ;;
  esac
}
# deviations SET: the set's excluded tests (deviations.txt), ':'-joined.
deviations() {
  awk -v s="$1" '!/^#/ && NF >= 2 && $1 == s { print $2 }' "$here/deviations.txt" | paste -sd: -
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
  # The binary must take UCX from this build and libibverbs from urnic.
  libs=$("$sysfs" -- ldd "$gtest")
  for l in libucs.so.0:"$S/src/ucs/" libuct.so.0:"$S/src/uct/" libibverbs.so.1:"$build_root/verbs_shim/"; do
    grep -F "${l%%:*} => ${l#*:}" <<< "$libs" > /dev/null ||
      { echo "FAIL: gtest does not load ${l%%:*} from ${l#*:}:"; grep -F "${l%%:*}" <<< "$libs"; exit 1; }
  done
  rc=0
  for set in "${sets[@]}"; do
    neg=$(deviations "$set")
    f="$(filter "$set")${neg:+-$neg}"
    "$sysfs" -- "$gtest" --gtest_list_tests --gtest_filter="$f" 2> /dev/null |
      awk '/^[^ ]/ { c = $1 } /^  / { print c $1 }' > "$work/list.$set"
    total=$(wc -l < "$work/list.$set")
    log=$work/gtest.$set.log; : > "$log"
    todo=$f t0=$SECONDS crashed=()
    while true; do
      left=$((${UCX_GTEST_TIMEOUT:-1800} - (SECONDS - t0)))
      ((left > 0)) || { echo "gtest $set: out of time"; rc=1; break; }
      timeout -k 10 "$left" stdbuf -oL -eL "$sysfs" -- "$gtest" --gtest_filter="$todo" >> "$log" 2>&1
      r=$?
      # The last test started with no result: it crashed the binary (or
      # the time ran out in it).
      last=$(awk '/^\[ RUN      \]/ { t = $4 } /^\[ *(OK|FAILED) *\] / && $NF ~ /\)$/ { t = "" } END { print t }' "$log")
      [[ $r -eq 0 || -z $last ]] && break
      if [[ $r -eq 124 || $r -eq 137 ]]; then echo "gtest $set: timed out (${UCX_GTEST_TIMEOUT:-1800} s) in $last"; rc=1; crashed+=("$last"); break; fi
      crashed+=("$last")
      echo "[  CRASH   ] $last (exit $r)" >> "$log"
      rest=$(awk -v l="$last" 'seen { print } $0 == l { seen = 1 }' "$work/list.$set" | paste -sd: -)
      [[ -n $rest ]] || break
      todo=$rest
    done
    # Per test: passed, skipped (UCX's "[     SKIP ]" inside it) or failed.
    awk -v set="$set" -v total="$total" -v s=$((SECONDS - t0)) -v crashes="${#crashed[@]}" '
      /^\[ RUN      \]/ { t = $4; skip = 0; next }
      /^\[     SKIP \]/ { skip = 1; next }
      /^\[       OK \]/ && $4 == t { if (skip) k++; else p++; t = ""; next }
      /^\[  FAILED  \]/ && $NF ~ /\)$/ { n = $4; sub(/,$/, "", n); if (n == t) { f++; fl = fl "\n  FAIL " t; t = "" }; next }
      /^\[  CRASH   \]/ { c++; fl = fl "\n  CRASH " $4 }
      END { printf "ucx gtest %s: %d tests, %d passed, %d skipped, %d failed, %d crashed (%d s)%s\n",
                   set, total, p, k, f, c, s, fl }' "$log" | tee "$work/summary.$set"
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
for p in autoconf:autoconf automake:automake libtoolize:libtool make:make g++:g++ python3:python3; do
  command -v "${p%%:*}" > /dev/null || missing+=("${p#*:}")
done
[[ -f /usr/include/infiniband/verbs.h ]] || missing+=(libibverbs-dev)
[[ -f /usr/include/rdma/rdma_cma.h ]] || missing+=(librdmacm-dev)
[[ -f /usr/include/numa.h ]] || missing+=(libnuma-dev)
[[ ${#missing[@]} -eq 0 ]] || skip "the packages to build UCX are missing: ${missing[*]} (apt-get install ${missing[*]}, or tools/bootstrap.sh)"

# Unpack (again when the tarball changed), configure and build, once.
mkdir -p "$work" || exit 2
exec 9> "$work/.lock"
flock 9
t0=$SECONDS
stamp=$(cat "$tarball" "$here/trim_gtest_sources.py" | sha256sum | cut -c1-16)
log=$work/build.log
if [[ ! -f $work/built.$stamp ]]; then
  if [[ ! -f $work/unpacked.$stamp ]]; then
    rm -rf "$S" "$work"/unpacked.* "$work"/built.* && mkdir -p "$S" || exit 2
    tar -xzf "$tarball" -C "$S" --strip-components=1 || { echo "ucx_gtest_test: unpacking $tarball failed"; exit 1; }
    python3 "$here/trim_gtest_sources.py" "$S/test/gtest/Makefile.am" || exit 1
    touch "$work/unpacked.$stamp"
  fi
  echo "ucx_gtest_test: building UCX 1.13.1 and its gtest in $S (about 25 minutes on 2 cores; log: $log)"
  (
    set -e
    cd "$S"
    if [[ ! -f Makefile ]]; then
      nice -n 10 ./autogen.sh
      # -Wno-error: UCX builds with -Werror, and GCC 12 warns where GCC 11
      # did not.
      nice -n 10 ./configure --prefix="$work/inst" --enable-gtest --disable-doxygen-doc --disable-examples \
        --enable-compiler-opt=1 --without-cuda --without-rocm --without-java --without-go --without-knem \
        --without-xpmem --without-ugni --without-fuse3 --without-mlx5-dv --without-devx --without-dc --without-dm \
        --without-ib-hw-tm --without-valgrind --without-gdrcopy --without-rte --without-mpi \
        --with-verbs --with-rdmacm --with-rc --with-ud CFLAGS=-Wno-error CXXFLAGS=-Wno-error
    fi
    for d in src/ucm src/ucs src/uct src/ucp src/tools/perf/lib; do
      nice -n 10 make -C "$d" -j "$(nproc)"
    done
    # The test binary at -O0, given to make (configure drops -O from
    # CXXFLAGS; UCX's C++ flags are its C flags): GCC 12 at -O1 cannot
    # inline the always_inline uct_iface_release_desc through std::for_each
    # (uct/test_tag.cc), and -O0 compiles fastest.
    nice -n 10 make -C test/gtest -j "$(nproc)" CXXFLAGS='-Wno-error -O0'
  ) > "$log" 2>&1 || { tail -n 30 "$log"; echo "ucx_gtest_test: building UCX failed (whole log: $log)"; exit 1; }
  [[ -x $gtest ]] || { echo "ucx_gtest_test: no $gtest after the build (log: $log)"; exit 1; }
  touch "$work/built.$stamp"
  echo "ucx_gtest_test: built in $((SECONDS - t0)) s"
else
  echo "ucx_gtest_test: reusing the build in $S"
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
