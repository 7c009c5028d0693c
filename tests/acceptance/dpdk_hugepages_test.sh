#!/usr/bin/env bash
# Acceptance (issue 5): the dpdk link on hugepages. Every other dpdk test
# runs the EAL with --no-huge; this one reserves 2 MiB hugepages, gives both
# daemons `"eal": ["--in-memory", "-m", "256"]` (memfd-backed hugepages, no
# hugetlbfs mount needed, no files left behind), and checks that
#   - two such daemons run at once (each in its own network namespace, a
#     net_af_packet port on its end of a veth pair),
#   - their memory really is hugepages (HugePages_Free drops while they run)
#     and is given back when they stop (rte_eal_cleanup on SIGTERM),
#   - RC and UD traffic and perftest pass over them, RoCE v2/IPv4, MTU 4096.
# The reservation is put back to what it was on exit (the machines' rule:
# hugepages go back to 0). Needs root and DPDK; exits 77 otherwise, or when
# the kernel cannot reserve the pages. About 20-40 s.
#
# usage: dpdk_hugepages_test.sh SHIM_DIR URNICD
set -uo pipefail
shim_dir=$1
urnicd=$2
pages_file=/proc/sys/vm/nr_hugepages
# Two daemons x -m 256 (MiB) in 2 MiB pages, plus slack for the EAL's own.
want_pages=300

if ! grep -q librte_eal <<< "$(ldd "$urnicd")"; then
  echo "SKIP: urnicd was built without DPDK"
  exit 77
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "SKIP: needs root (network namespaces, hugepage reservation)"
  exit 77
fi
if [[ ! -w $pages_file ]] || ! grep -q '^Hugepagesize: *2048 kB' /proc/meminfo; then
  echo "SKIP: no 2 MiB hugepages on this kernel"
  exit 77
fi

fails=0
checks=0
pass() { checks=$((checks + 1)); printf 'ok   %s\n' "$*"; }
fail() { checks=$((checks + 1)); fails=$((fails + 1)); printf 'FAIL %s\n' "$*"; }
meminfo() { awk -v k="$1:" '$1 == k { print $2 }' /proc/meminfo; }

tag=$$
ns_a=urnic-ha-$tag
ns_b=urnic-hb-$tag
veth_a=uha$tag
veth_b=uhb$tag
net=10.$((232 + tag % 16)).$(((tag / 16) % 256))
rt=$(mktemp -d /tmp/urnic-huge.XXXXXX)
export URNIC_DAEMON=$urnicd LD_LIBRARY_PATH=$shim_dir
unset LD_PRELOAD URNIC_RUNTIME_DIR
asan_rt=$(ldd "$shim_dir/libibverbs.so.1" | awk '/libasan|libclang_rt\.asan/ {print $3; exit}')
run_env=(env)
[[ -n $asan_rt ]] && run_env=(env "LD_PRELOAD=$asan_rt" "ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0")
limit=120
[[ -n $asan_rt ]] && limit=360

old_pages=$(cat "$pages_file")
pids=()
alive() { [[ -n ${1:-} ]] && kill -0 "$1" 2>/dev/null; }
stop_pid() {
  local pid=$1
  alive "$pid" || return 0
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 200); do alive "$pid" || return 0; sleep 0.05; done
  kill -KILL "$pid" 2>/dev/null
}
cleanup() {
  local p
  for p in "${pids[@]}"; do stop_pid "$p"; done
  ip netns del "$ns_a" 2>/dev/null
  ip netns del "$ns_b" 2>/dev/null
  echo "$old_pages" > "$pages_file"
  rm -rf "$rt"
}
trap cleanup EXIT

echo $((old_pages + want_pages)) > "$pages_file"
total=$(meminfo HugePages_Total)
if ((total < old_pages + want_pages)); then
  echo "SKIP: the kernel reserved only $total of $((old_pages + want_pages)) hugepages (memory fragmented)"
  exit 77
fi
free_before=$(meminfo HugePages_Free)
pass "reserved $want_pages hugepages of 2 MiB ($free_before free)"

ip netns add "$ns_a" && ip netns add "$ns_b" || { fail "ip netns add"; exit 1; }
ip link add "$veth_a" netns "$ns_a" type veth peer name "$veth_b" netns "$ns_b" || { fail "ip link add veth"; exit 1; }
ip -n "$ns_a" addr add "$net.1/24" dev "$veth_a"
ip -n "$ns_b" addr add "$net.2/24" dev "$veth_b"
for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up; done
ip -n "$ns_a" link set "$veth_a" mtu 9000 up
ip -n "$ns_b" link set "$veth_b" mtu 9000 up

# host H CMD...: CMD in host H's namespace with its runtime directory.
host() {
  local h=$1
  shift
  ip netns exec "urnic-h$h-$tag" env "URNIC_RUNTIME_DIR=$rt/$h" "$@"
}
start_daemon() {
  local h=$1 ifname=$2 last=$3
  mkdir -p "$rt/$h"
  printf '{"devices": [{"name": "urnic0", "link": "dpdk", "devargs": "net_af_packet0,iface=%s,framesz=8192,blocksz=8192", "address": "%s", "mac": "02:00:75:72:6e:%s", "mtu": 4096, "eal": ["--in-memory", "-m", "256"]}]}\n' \
    "$ifname" "$net.1$last" "0$last" > "$rt/$h.json"
  # Not through host() in a subshell: ip netns exec and env exec into
  # urnicd, so $! is the daemon.
  ip netns exec "urnic-h$h-$tag" env "URNIC_RUNTIME_DIR=$rt/$h" \
    "$urnicd" --config "$rt/$h.json" --runtime-dir "$rt/$h" > "$rt/$h.log" 2>&1 &
  local pid=$!
  pids+=("$pid")
  for _ in $(seq 400); do
    host "$h" "$urnicd" --status --runtime-dir "$rt/$h" 2>/dev/null | grep -qE '^device urnic0: link .*, up$' && return 0
    alive "$pid" || break
    sleep 0.05
  done
  fail "urnicd in $h did not come up: $(tail -n 3 "$rt/$h.log")"
  exit 1
}
start_daemon a "$veth_a" 1
start_daemon b "$veth_b" 2
daemon_a=${pids[0]} daemon_b=${pids[1]}
pass "two urnicd on hugepages at once (PIDs $daemon_a, $daemon_b)"

free_running=$(meminfo HugePages_Free)
used=$((free_before - free_running))
# Each daemon maps its -m 256 (128 pages) or close to it.
if ((used >= 200)); then
  pass "the daemons' memory is hugepages: $used pages in use"
else
  fail "only $used hugepages in use while both daemons run (expected >= 200)"
fi

port=$((20000 + tag % 20000))
# pair NAME EXPECT PROG ARGS...: server in a, client in b; both must exit 0
# and the client print a line matching EXPECT.
pair() {
  local name=$1 expect=$2
  shift 2
  port=$((port + 1))
  host a "${run_env[@]}" timeout "$limit" "$@" -p "$port" > "$rt/server.out" 2>&1 &
  local spid=$! hex
  hex=$(printf '%04X' "$port")
  for _ in $(seq 200); do
    ip netns exec "$ns_a" grep -qE "^ *[0-9]+: [0-9A-F]+:$hex [0-9A-F]+:0000 0A" /proc/net/tcp 2>/dev/null && break
    alive "$spid" || break
    sleep 0.02
  done
  host b "${run_env[@]}" timeout "$limit" "$@" -p "$port" "$net.1" > "$rt/client.out" 2>&1
  local crc=$?
  wait "$spid"
  local src=$?
  if [[ $crc -eq 0 && $src -eq 0 ]] && grep -qE "$expect" "$rt/client.out"; then
    pass "$name: $(grep -E "$expect" "$rt/client.out" | tail -n 1 | tr -s ' \t' ' ')"
  else
    fail "$name: server exit $src, client exit $crc"
    sed 's/^/    client: /' "$rt/client.out" | tail -n 10
    sed 's/^/    server: /' "$rt/server.out" | tail -n 10
  fi
}
# GID 3: RoCE v2 over the daemons' IPv4 address (0/1 link-local v1/v2, 2/3 IPv4 v1/v2).
pair "ibv_rc_pingpong -g 3 -m 4096 -s 65536 -n 200 -c" 'bytes in' \
  ibv_rc_pingpong -d urnic0 -g 3 -m 4096 -s 65536 -n 200 -c
pair "ibv_ud_pingpong -g 3 -s 2048 -n 200 -c" 'bytes in' \
  ibv_ud_pingpong -d urnic0 -g 3 -s 2048 -n 200 -c
row='^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+'
pair "ib_write_bw -x 3 -m 4096 -s 65536 -n 500" "$row" \
  ib_write_bw -d urnic0 -x 3 -m 4096 -s 65536 -n 500
pair "ib_read_bw -x 3 -m 4096 -s 65536 -n 200" "$row" \
  ib_read_bw -d urnic0 -x 3 -m 4096 -s 65536 -n 200

for p in "$daemon_a" "$daemon_b"; do stop_pid "$p"; done
wait "$daemon_a" "$daemon_b" 2>/dev/null
pids=()
free_after=$(meminfo HugePages_Free)
if ((free_after == free_before)); then
  pass "SIGTERM gave every hugepage back ($free_after free)"
else
  fail "after both daemons stopped $free_after hugepages are free, $free_before were before"
fi
for h in a b; do
  if grep -qiE 'error|fail' "$rt/$h.log"; then
    fail "urnicd $h logged: $(grep -iE 'error|fail' "$rt/$h.log" | head -n 2 | tr '\n' ' ')"
  fi
done

echo "$((checks - fails))/$checks checks passed"
((fails == 0))
