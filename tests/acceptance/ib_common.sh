# shellcheck shell=bash
# tests/acceptance/ib_common.sh: what the InfiniBand acceptance tests share
# (ib_sma_test.sh, ib_data_test.sh; docs/INFINIBAND.md), sourced after
# common.sh and tools/lib/hosts.sh. The caller sets ib_libs (the
# LD_LIBRARY_PATH of the programs under test: urnic's libibverbs.so.1 and
# libibumad.so.3) and dev and peer (the two cabled devices).
#   ib_daemon NAME DEVICES_JSON [TOP_JSON]: a namespace ($ns) and runtime
#       directory ($rt) of its own, urnicd in it with the devices (a JSON
#       list's items) and TOP_JSON's further top-level keys (", ..."); if it
#       does not start: fails, prints the summary and exits
#   in_ns PROG ARGS: PROG in the namespace on urnic's libraries
#   field KEY FILE: the value of "KEY: value" in ibstat's output
#   ib_opensm GUID: unmodified OpenSM on the port GUID, its cache and log in
#       $rt ($opensm_pid)
#   ports_active: both cabled ports Active (ibstat of each in $rt/ibstat1,
#       $rt/ibstat1-peer)

ib_daemon() {
  ns=$(netns_name "$1")
  netns_add "$ns" || { echo "FAIL: could not make namespace $ns"; exit 1; }
  rt=$(mktemp -d "/tmp/urnic-$1.XXXXXX")
  cleanup_paths+=("$rt")
  printf '{"devices": [%s]%s}\n' "$2" "${3:-}" > "$rt/config.json"
  urnicd_start "$ns" "$rt" "$rt/urnicd.log" --config "$rt/config.json" || {
    fail "urnicd did not start: $(head -c 300 "$rt/urnicd.log")"
    finish
    exit
  }
}
# shellcheck disable=SC2154  # ib_libs: the sourcing script's
in_ns() {
  ip netns exec "$ns" "${run_env[@]}" "URNIC_RUNTIME_DIR=$rt" "LD_LIBRARY_PATH=$ib_libs" timeout "$limit" "$@"
}
field() { awk -F': *' -v k="$1" '$1 ~ "^[ \t]*"k"$" {print $2; exit}' "$2"; }
ib_opensm() {
  ip netns exec "$ns" "${run_env[@]}" "URNIC_RUNTIME_DIR=$rt" "LD_LIBRARY_PATH=$ib_libs" \
    "OSM_CACHE_DIR=$rt/osm-cache" "OSM_TMP_DIR=$rt" \
    opensm -g "$1" -f "$rt/opensm.log" -V > "$rt/opensm.out" 2>&1 &
  opensm_pid=$!
  cleanup_pids+=("$opensm_pid")
}
# shellcheck disable=SC2154  # dev, peer: the sourcing script's
ports_active() {
  in_ns ibstat "$dev" > "$rt/ibstat1" 2>&1 && grep -q 'State: Active' "$rt/ibstat1" &&
    in_ns ibstat "$peer" > "$rt/ibstat1-peer" 2>&1 && grep -q 'State: Active' "$rt/ibstat1-peer"
}
