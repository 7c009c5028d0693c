#!/usr/bin/env bash
# Builds libfabric's own test suite, fabtests 1.17.0 (../shared/fabtests),
# against the system libfabric (Debian 12's 1.17.0) inside the build tree
# and runs upstream's runfabtests.sh on urnic0 (RoCE) for the providers
# `verbs` (MSG endpoints) and `verbs;ofi_rxm` (RDM) (issue 53;
# docs/MIDDLEWARE.md, "fabtests").
#
#   fabtests_test.sh MODE SOURCE_ROOT BUILD_ROOT WORK_DIR [SRC]
#
#   MODE         ci: `-t quick` restricted to the tests of ci-subset.txt (only
#                their programs are built); quick: all of `-t quick`;
#                all: `-t all` (unit, regression, functional, standard,
#                complex, multinode)
#   SOURCE_ROOT  urnic's source tree
#   BUILD_ROOT   urnic's build directory (its urnicd and drop-in libraries)
#   WORK_DIR     where fabtests is unpacked, built and run (in the build tree)
#   SRC          the directory with fabtests-*.tar.gz (meson option
#                fabtests_src; empty: $URNIC_FABTESTS_SRC; neither:
#                SOURCE_ROOT/../shared/fabtests, then /work/shared/fabtests)
#
# Each provider runs with upstream's exclude file (test_configs/verbs/
# verbs.exclude, test_configs/ofi_rxm/ofi_rxm.exclude) and the documented
# deviations of deviations.txt, nothing else. The daemon is this build's
# urnicd with urnic0 at 127.0.0.3: libfabric's verbs provider treats a
# source address of exactly 127.0.0.1 as "no address given" and drops its
# port (vrb_fill_addr, an MPICH workaround), so a server bound with `-s
# 127.0.0.1` listens on a random port; a NIC has an address of its own,
# as urnic0 has here. It runs in a network namespace of its own (root:
# unshare -n; otherwise a user namespace) and a PID namespace of its own,
# so nothing else meets it.
# Exits 77 (skipped) when the sources or the packages to build them are
# missing.
set -uo pipefail
mode=${1:?mode}; source_root=${2:?}; build_root=${3:?}; work=${4:?}; src=${5:-}
case $mode in ci|quick|all) ;; *) echo "fabtests_test: unknown mode $mode" >&2; exit 2 ;; esac
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tools/lib/private_ns.sh
source "$source_root/tools/lib/private_ns.sh"
skip() { printf 'SKIP: %s\n' "$*"; exit 77; }

# Inside the namespace (the script runs itself again there).
if [[ ${FABTESTS_INNER:-} == 1 ]]; then
  ip link set lo up 2>/dev/null || true
  # urnic_iw0 needs an address on an interface that is not the loopback:
  # libfabric's verbs provider offers no domain for a device whose address
  # only lo carries (vrb_getifaddrs skips IFF_LOOPBACK) and that has no
  # AF_IB GID, as an iWARP device has none. A veth of this private
  # namespace carries it (192.0.2.0/24 is TEST-NET-1, never routed).
  iw_addr=192.0.2.2
  ip link add ftiw0 type veth peer name ftiw1 && ip link set ftiw1 up &&
    ip addr add "$iw_addr/24" dev ftiw0 && ip link set ftiw0 up || iw_addr=
  rt=$work/run; rm -rf "$rt"; mkdir -p "$rt"
  cat > "$work/urnicd.json" <<JSON
{"devices": [{"name": "urnic0", "address": "127.0.0.3"},
             {"name": "urnic_iw0", "transport": "iwarp", "address": "${iw_addr:-127.0.0.2}"}]}
JSON
  "$build_root/engine/urnicd" --config "$work/urnicd.json" --runtime-dir "$rt" > "$work/urnicd.log" 2>&1 &
  dpid=$!
  trap 'kill "$dpid" 2>/dev/null; wait "$dpid" 2>/dev/null' EXIT
  for _ in $(seq 100); do grep -q 'listening on' "$work/urnicd.log" && break; sleep 0.1; done
  rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$dpid/status"; }
  rss0=$(rss_kb)
  export URNIC_RUNTIME_DIR=$rt URNIC_NO_AUTOSTART=1
  export LD_LIBRARY_PATH=$build_root/verbs_shim:$build_root/rdmacm_shim
  types=quick; [[ $mode == all ]] && types=all
  rc=0
  cd "$work" || exit 2
  # Each run: a key of ci-subset.txt and deviations.txt (the provider, and
  # "@iwarp" for urnic_iw0), and the address of the device it runs on.
  runs=("verbs 127.0.0.3" "verbs;ofi_rxm 127.0.0.3")
  [[ -n $iw_addr ]] && runs+=("verbs@iwarp $iw_addr" "verbs;ofi_rxm@iwarp $iw_addr")
  for run in "${runs[@]}"; do
    key=${run% *} addr=${run#* }
    prov=${key%@*} tag=${key//;/_}; tag=${tag//@/_}
    [[ $mode == ci && ! -s $work/ci-exclude.$tag ]] && continue  # no test of this run in the CI subset
    excl=(-f "$FT_SRC/test_configs/verbs/verbs.exclude")
    [[ $prov == *ofi_rxm ]] && excl=(-f "$FT_SRC/test_configs/ofi_rxm/ofi_rxm.exclude")
    awk -v p="$key" '!/^#/ && NF >= 2 && $1 == p { sub(/^[^ ]+ +/, ""); sub(/ +#.*$/, ""); print }' \
      "$here/deviations.txt" > "$work/deviations.$tag"
    excl+=(-f "$work/deviations.$tag")
    [[ -s $work/ci-exclude.$tag ]] && excl+=(-f "$work/ci-exclude.$tag")
    t0=$SECONDS
    bash "$FT_SRC/scripts/runfabtests.sh" -v -T "${FABTESTS_TIMEOUT:-120}" -t "$types" -p "$FT_BIN" "${excl[@]}" \
      -s "$addr" -c "$addr" "$prov" > "$work/results.$tag.yaml" 2>&1
    r=$?
    [[ $r -ne 0 ]] && rc=1
    awk -v p="$key" -v s=$((SECONDS - t0)) '
      /^- name:/ { n = $0; sub(/^- name: +/, "", n) }
      /^  result:/ { r = $2; c[r]++; if (r ~ /^Fail/) f = f "\n  FAIL " n }
      END { printf "fabtests %s: %d passed, %d failed, %d not run, %d excluded (%d s)%s\n",
                   p, c["Pass"], c["Fail"], c["Notrun"], c["Excluded"], s, f }' "$work/results.$tag.yaml"
  done
  # Issue 53's bad-input line: after the run the daemon holds no objects
  # and no process, and its memory is back within 20 MB of its start.
  status=$("$build_root/engine/urnicd" --status --runtime-dir "$rt")
  rss1=$(rss_kb)
  grep -E '^(objects|attached processes):' <<< "$status"
  echo "urnicd RSS: ${rss0:-?} kB at start, ${rss1:-?} kB after the run"
  if ! grep -qE '^objects: pd 0 mr 0 cq 0 qp 0 srq 0 ah 0$' <<< "$status" ||
     ! grep -qx 'attached processes: 0' <<< "$status"; then
    echo "FAIL: urnicd still holds objects after the run"; rc=1
  fi
  if [[ -z $rss0 || -z $rss1 ]] || (( rss1 - rss0 > 20 * 1024 )); then
    echo "FAIL: urnicd's RSS grew by more than 20 MB over the run"; rc=1
  fi
  exit $rc
fi

# The sources.
[[ -n $src ]] || src=${URNIC_FABTESTS_SRC:-}
if [[ -z $src ]]; then
  for c in "$source_root/../shared/fabtests" /work/shared/fabtests; do
    [[ -d $c ]] && { src=$c; break; }
  done
fi
tarball=$(ls "${src:-/nonexistent}"/fabtests-*.tar.gz 2>/dev/null | head -n 1)
[[ -n $tarball ]] || skip "fabtests-*.tar.gz not found (${src:-looked in $source_root/../shared/fabtests and /work/shared/fabtests}); set 'meson configure -Dfabtests_src=DIR' or URNIC_FABTESTS_SRC=DIR"
missing=()
for p in autoconf:autoconf automake:automake libtoolize:libtool make:make; do
  command -v "${p%%:*}" > /dev/null || missing+=("${p#*:}")
done
[[ -f /usr/include/rdma/fabric.h ]] || missing+=(libfabric-dev)
[[ ${#missing[@]} -eq 0 ]] || skip "the packages to build fabtests are missing: ${missing[*]} (apt-get install ${missing[*]}, or tools/bootstrap.sh)"

# The CI subset: its tests (one a line, as runfabtests.sh names them, per
# provider) and the programs they need.
ci_tests() { awk -v p="$1" '!/^#/ && NF >= 2 && $1 == p { sub(/^[^ ]+ +/, ""); sub(/ +#.*$/, ""); print }' "$here/ci-subset.txt"; }

# Unpack (again when the tarball changed) and build.
t0=$SECONDS
stamp=$(sha256sum "$tarball" | cut -c1-16)
S=$work/src
if [[ ! -f $work/unpacked.$stamp ]]; then
  rm -rf "$work" && mkdir -p "$S" || exit 2
  tar -xzf "$tarball" -C "$S" --strip-components=1 || { echo "fabtests_test: unpacking $tarball failed"; exit 1; }
  touch "$work/unpacked.$stamp"
fi
log=$work/build.log
if [[ ! -f $S/Makefile ]]; then
  # Through ccache when it is installed, as meson compiles urnic itself: a
  # second run on the same machine recompiles nothing.
  cc=(); command -v ccache > /dev/null && cc=(CC="ccache gcc")
  (cd "$S" && ./autogen.sh && ./configure "${cc[@]}" --prefix="$work/inst" --with-libfabric=/usr) > "$log" 2>&1 ||
    { tail -n 30 "$log"; echo "fabtests_test: configuring fabtests failed (whole log: $log)"; exit 1; }
fi
if [[ $mode == ci ]]; then
  # Only the programs of the subset: each test's first word is a program
  # under one of fabtests' directories.
  progs=()
  for prov in verbs 'verbs;ofi_rxm' 'verbs@iwarp' 'verbs;ofi_rxm@iwarp'; do
    while read -r t _; do
      p=$(grep -oE "^[[:space:]]+[a-z_/]+/$t\b" "$S/Makefile.am" | head -n 1 | tr -d '[:space:]')
      [[ -n $p ]] && progs+=("$p")
    done < <(ci_tests "$prov")
  done
  mapfile -t progs < <(printf '%s\n' "${progs[@]}" | sort -u)
  make -C "$S" -j "$(nproc)" "${progs[@]}" >> "$log" 2>&1 ||
    { tail -n 30 "$log"; echo "fabtests_test: building fabtests failed (whole log: $log)"; exit 1; }
  bin=$work/ci-bin; rm -rf "$bin"; mkdir -p "$bin"
  # libtool's wrapper scripts find their .libs; copy what they run.
  for p in "${progs[@]}"; do
    if [[ -x $S/${p%/*}/.libs/${p##*/} ]]; then cp "$S/${p%/*}/.libs/${p##*/}" "$bin/"; else cp "$S/$p" "$bin/"; fi
  done
else
  make -C "$S" -j "$(nproc)" install >> "$log" 2>&1 ||
    { tail -n 30 "$log"; echo "fabtests_test: building fabtests failed (whole log: $log)"; exit 1; }
  bin=$work/inst/bin
fi
echo "fabtests_test: built fabtests ($mode) in $((SECONDS - t0)) s"

# The CI subset as excludes: every test of `-t quick` not in ci-subset.txt,
# anchored (runfabtests.sh matches excludes as regular expressions).
rm -f "$work"/ci-exclude.*
if [[ $mode == ci ]]; then
  all_quick=$(awk '/^(unit_tests|functional_tests|short_tests|neg_unit_tests)=\(/ { on = 1; next }
                   on && /^\)/ { on = 0 } on { gsub(/^[ \t]*"|"[ \t]*$/, ""); print }' "$S/scripts/runfabtests.sh")
  for prov in verbs 'verbs;ofi_rxm' 'verbs@iwarp' 'verbs;ofi_rxm@iwarp'; do
    tag=${prov//;/_}; tag=${tag//@/_}
    keep=$(ci_tests "$prov")
    [[ -n $keep ]] || continue  # none of this run's tests in CI
    while IFS= read -r t; do
      grep -qxF -- "$t" <<< "$keep" && continue
      printf '^%s$\n' "$(sed -e 's/[][\.*^$+?(){}|]/\\&/g' <<< "$t")"
    done <<< "$all_quick" > "$work/ci-exclude.$tag"
  done
fi

inner=(env FABTESTS_INNER=1 FT_SRC="$S" FT_BIN="$bin" bash "$0" "$mode" "$source_root" "$build_root" "$work")
t1=$SECONDS
# A PID namespace (with its own /proc) too: runfabtests.sh's cleanup after
# a test that timed out kills every process whose name starts with "fi_"
# that `ps -e` lists (scripts/runfabtests.sh, cleanup), which without one is
# every fabtests program on the machine, another run's among them (the
# -t all runs' tests "Killed" after a few seconds with no message).
if private_ns_cmd -n -p -f --mount-proc; then
  "${private_ns[@]}" "${inner[@]}"
else
  skip "no private network namespace (not root, no user namespaces): fabtests' server ports would meet the host's"
fi
rc=$?
echo "fabtests_test: ran in $((SECONDS - t1)) s (results: $work/results.*.yaml)"
exit $rc
