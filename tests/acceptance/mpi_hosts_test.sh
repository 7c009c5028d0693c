#!/usr/bin/env bash
# Acceptance (issue 19, docs/MIDDLEWARE.md): MPI across two hosts on one
# machine. Open MPI 4.1 (--mca pml ucx) and MPICH 4.0 (ch4:ucx) run our
# middleware/mpi_check.c (a ping-pong between ranks 0 and 1 with every byte
# checked, and an allreduce) with 2 ranks (one per host) and 4 (two per
# host, ranks alternating), launched from host a as on a cluster: mpirun
# starts host b's part through an ssh stand-in. Each run must print its
# "ok" line and exit 0, and each host's urnic0 must have sent at least the
# ping-pong's payload (so the data went over urnic, not over shared memory
# or TCP).
#
# A host is what MPI and UCX tell hosts apart by: a network namespace of its
# own (two_hosts.sh: veth pair, one urnicd per namespace on the udp link),
# a hostname of its own (UTS namespace; /etc/hosts names both hosts, as a
# cluster's DNS would), System V IPC of its own (UCX takes two processes
# with the same boot id and IPC namespace to share memory, and sends part
# of a rendezvous over sysv/cma), and its own urnic runtime directory at the
# same path ($rt/run, bound from $rt/a or $rt/b in a private mount
# namespace), so that a launcher passing its environment on (MPICH does by
# default) cannot send host b's ranks to host a's daemon through the shared
# /tmp. Everything runs
# in urnic-sysfs's view (UCX takes a device only with its
# /dev/infiniband/uverbsN node). The launchers run with their defaults;
# only the ssh stand-in is named (Open MPI's plm_rsh_agent, MPICH's
# -launcher-exec), and Open MPI gets --allow-run-as-root, --oversubscribe and
# --map-by node (launch policy).
#
# Needs root (namespaces): 77 otherwise, or when Open MPI or MPICH is not
# installed.
#
# usage: mpi_hosts_test.sh SHIM_DIR RDMACM_DIR URNICD URNIC_SYSFS URNIC_CLI MPI_CHECK_C
set -uo pipefail
# shellcheck disable=SC2034  # urnicd, cli and default_limit are two_hosts.sh's (and common.sh's)
shim_dir=$1
rdmacm_dir=$2
urnicd=$3
sysfs=$4
cli=$5
src=$6

default_limit=90
# shellcheck source=two_hosts.sh
source "$(dirname "$0")/two_hosts.sh"
hosts_require_root
require_tools tools/packages.txt mpicc.openmpi mpirun.openmpi mpicc.mpich mpirun.mpich unshare
unset LD_PRELOAD URNIC_RUNTIME_DIR URNIC_DAEMON

two_hosts_create p 120
two_hosts_daemons udp
chmod 755 "$rt"
mkdir -p "$rt/run"
printf '127.0.0.1 localhost\n%s urnic-a\n%s urnic-b\n' "$ip_a" "$ip_b" > "$rt/etc_hosts"

asan_vars="${run_env[*]:1}"  # the ASan build's LD_PRELOAD and ASAN_OPTIONS, if any
# enter H CMD...: CMD on host H (a or b), in its namespaces and urnic's view.
cat > "$rt/enter" << EOF
#!/bin/bash
h=\$1
shift
case \$h in
  a) ns=$ns_a ;;
  b) ns=$ns_b ;;
  *) echo "enter: no host \$h" >&2; exit 255 ;;
esac
exec ip netns exec "\$ns" unshare --mount --uts --ipc sh -c '
  hostname "urnic-\$0" && mount --bind "$rt/\$0" "$rt/run" && mount --bind "$rt/etc_hosts" /etc/hosts || exit 255
  exec "\$@"' "\$h" env URNIC_RUNTIME_DIR="$rt/run" LD_LIBRARY_PATH="$shim_dir:$rdmacm_dir" $asan_vars \\
  "$sysfs" -- "\$@"
EOF
# agent [OPTIONS] HOST COMMAND...: the ssh stand-in; COMMAND is one shell
# string, as ssh runs it.
cat > "$rt/agent" << EOF
#!/bin/bash
while [[ \$1 == -* ]]; do shift; done
h=\${1#urnic-}
shift
exec "$rt/enter" "\$h" sh -c "\$*"
EOF
chmod 755 "$rt/enter" "$rt/agent"
printf 'urnic-a slots=2\nurnic-b slots=2\n' > "$rt/hosts.openmpi"
printf 'urnic-a:1\nurnic-b:1\n' > "$rt/hosts.mpich"

# The ping-pong's payload one way: 10 rounds of 8, 64, 512, 4096, 32768 B.
payload=$((10 * (8 + 64 + 512 + 4096 + 32768)))
tx_bytes() { stat "$1" tx_bytes; }

for impl in openmpi mpich; do
  exe=$rt/mpi_check.$impl
  if ! "mpicc.$impl" -O2 -o "$exe" "$src" > "$rt/cc.$impl" 2>&1; then
    fail "mpicc.$impl: $(head -3 "$rt/cc.$impl")"
    continue
  fi
  for np in 2 4; do
    if [[ $impl == openmpi ]]; then
      launch=(mpirun.openmpi --allow-run-as-root --oversubscribe --map-by node --hostfile "$rt/hosts.openmpi"
              --mca plm_rsh_agent "$rt/agent" --mca pml ucx)
    else
      launch=(mpirun.mpich -f "$rt/hosts.mpich" -launcher ssh -launcher-exec "$rt/agent")
    fi
    tx_a=$(tx_bytes a) tx_b=$(tx_bytes b)
    out=$(timeout "$limit" "$rt/enter" a "${launch[@]}" -np "$np" "$exe" 2>&1)
    rc=$?
    sent_a=$(($(tx_bytes a) - tx_a)) sent_b=$(($(tx_bytes b) - tx_b))
    if (( rc != 0 )) || ! grep -qx "mpi_check: ok, $np ranks" <<< "$out"; then
      fail "$impl, $np ranks on two hosts: exit $rc"
      sed 's/^/    /' <<< "$out" | tail -8
    elif (( sent_a < payload || sent_b < payload )); then
      fail "$impl, $np ranks on two hosts: urnic0 sent $sent_a B from a, $sent_b B from b; the ping-pong alone is $payload B each way"
    else
      pass "$impl: ping-pong and allreduce over $np ranks on two hosts, data checked; urnic0 sent $sent_a B from a, $sent_b B from b"
    fi
  done
done
finish
