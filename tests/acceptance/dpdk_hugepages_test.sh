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
# shellcheck source=two_hosts.sh
source "$(dirname "$0")/two_hosts.sh"
two_hosts_env "$shim_dir"
if [[ ! -w $pages_file ]] || ! grep -q '^Hugepagesize: *2048 kB' /proc/meminfo; then
  echo "SKIP: no 2 MiB hugepages on this kernel"
  exit 77
fi
meminfo() { awk -v k="$1:" '$1 == k { print $2 }' /proc/meminfo; }

old_pages=$(cat "$pages_file")
cleanup_extra() { echo "$old_pages" > "$pages_file"; }
echo $((old_pages + want_pages)) > "$pages_file"
total=$(meminfo HugePages_Total)
if ((total < old_pages + want_pages)); then
  echo "SKIP: the kernel reserved only $total of $((old_pages + want_pages)) hugepages (memory fragmented)"
  exit 77
fi
free_before=$(meminfo HugePages_Free)
pass "reserved $want_pages hugepages of 2 MiB ($free_before free)"

two_hosts_create h 232

start_daemon() {
  local h=$1
  urnicd_config_ab "$h" dpdk '"mtu": 4096, "eal": ["--in-memory", "-m", "256"]' > "$rt/$h.json"
  # The EAL maps its hugepages first: up to 20 s.
  urnicd_start --wait 20 "$(ns_of "$h")" "$rt/$h" "$rt/$h.log" --config "$rt/$h.json" &&
    urnicd_wait_up "$(ns_of "$h")" "$rt/$h" 20 && return 0
  fail "urnicd in $h did not come up: $(tail -n 3 "$rt/$h.log")"
  exit 1
}
start_daemon a
daemon_a=$urnicd_pid
start_daemon b
daemon_b=$urnicd_pid
pass "two urnicd on hugepages at once (PIDs $daemon_a, $daemon_b)"

free_running=$(meminfo HugePages_Free)
used=$((free_before - free_running))
# Each daemon maps its -m 256 (128 pages) or close to it.
if ((used >= 200)); then
  pass "the daemons' memory is hugepages: $used pages in use"
else
  fail "only $used hugepages in use while both daemons run (expected >= 200)"
fi

# GID 3: RoCE v2 over the daemons' IPv4 address (0/1 link-local v1/v2, 2/3 IPv4 v1/v2).
pair "ibv_rc_pingpong -g 3 -m 4096 -s 65536 -n 200 -c" "$pp" 1 \
  ibv_rc_pingpong -d urnic0 -g 3 -m 4096 -s 65536 -n 200 -c
pair "ibv_ud_pingpong -g 3 -s 2048 -n 200 -c" "$pp" 1 \
  ibv_ud_pingpong -d urnic0 -g 3 -s 2048 -n 200 -c
pair "ib_write_bw -x 3 -m 4096 -s 65536 -n 500" "$row" 1 \
  ib_write_bw -d urnic0 -x 3 -m 4096 -s 65536 -n 500
pair "ib_read_bw -x 3 -m 4096 -s 65536 -n 200" "$row" 1 \
  ib_read_bw -d urnic0 -x 3 -m 4096 -s 65536 -n 200

for p in "$daemon_a" "$daemon_b"; do stop_pid "$p"; done
wait "$daemon_a" "$daemon_b" 2>/dev/null
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

finish
