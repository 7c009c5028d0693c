#!/usr/bin/env bash
# bench/links_profile.sh: where the two daemons' time goes while ib_write_bw
# runs between two network namespaces (the setup of links_bench.sh, one
# link): `perf record -g` of both urnicd processes for SECONDS in the middle
# of the run, then the top symbols (self time, children excluded) of each
# daemon and of both together. A measurement, not a test.
#
# usage: bench/links_profile.sh [BUILD_DIR] [-l LINK] [-S BW_SIZE] [-q BW_QPS] [-t SECONDS] [-o PERF_DATA]
#        (defaults: build, udp, 65536, 4, 5, a temporary file)
# Needs root and perf(1) (Debian: linux-perf).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=tools/lib/tcp_listen.sh
source "$root/tools/lib/tcp_listen.sh"
# shellcheck source=tools/lib/hosts.sh
source "$root/tools/lib/hosts.sh"
# shellcheck source=tools/lib/daemons.sh
source "$root/tools/lib/daemons.sh"
build=$root/build
if [[ $# -gt 0 && $1 != -* ]]; then build=$1; shift; fi
link=udp bw_size=65536 bw_qps=4 seconds=5 data=
while [[ $# -gt 0 ]]; do
  case $1 in
    -l) link=$2; shift 2 ;;
    -S) bw_size=$2; shift 2 ;;
    -q) bw_qps=$2; shift 2 ;;
    -t) seconds=$2; shift 2 ;;
    -o) data=$2; shift 2 ;;
    *) echo "usage: $0 [BUILD_DIR] [-l LINK] [-S BW_SIZE] [-q BW_QPS] [-t SECONDS] [-o PERF_DATA]" >&2; exit 2 ;;
  esac
done
urnicd=$build/engine/urnicd
[[ $(id -u) -eq 0 ]] || { echo "links_profile: needs root (network namespaces)" >&2; exit 1; }
[[ -x $urnicd && -e $build/verbs_shim/libibverbs.so.1 ]] || { echo "links_profile: no urnicd/shim in $build" >&2; exit 1; }
command -v perf > /dev/null || { echo "links_profile: perf is not installed" >&2; exit 1; }

rt=$(mktemp -d /tmp/urnic-profile.XXXXXX)
cleanup_paths+=("$rt")
[[ -n $data ]] || data=$rt/perf.data
export URNIC_DAEMON=$urnicd LD_LIBRARY_PATH=$build/verbs_shim
unset LD_PRELOAD URNIC_RUNTIME_DIR
hosts_ab p 248 9000 || exit 1
pids=()
for h in a b; do
  urnicd_config_ab "$h" "$link" '"mtu": 4096' > "$rt/$h.json"
  urnicd_start "$(ns_of "$h")" "$rt/$h" "$rt/$h.log" --config "$rt/$h.json" || { cat "$rt/$h.log"; exit 1; }
  pids+=("$urnicd_pid")
done
urnicd_wait_up "$ns_a" "$rt/a" && urnicd_wait_up "$ns_b" "$rt/b" || exit 1

gid=3
[[ $link == udp* ]] && gid=1
port=$((20000 + $$ % 20000))
# Long enough to outlast the profile: -D (seconds) instead of an iteration count.
bw=(ib_write_bw -x "$gid" -m 4096 -s "$bw_size" -q "$bw_qps" -D $((seconds + 4)) -p "$port")
host a timeout 120 "${bw[@]}" > "$rt/server.out" 2>&1 &
spid=$!
cleanup_pids+=("$spid")
wait_tcp_listen "$port" --ns "$ns_a" --pid "$spid" --timeout 5 || true
host b timeout 120 "${bw[@]}" "$ip_a" > "$rt/client.out" 2>&1 &
cpid=$!
cleanup_pids+=("$cpid")
sleep 2
perf record -g -o "$data" -p "$(IFS=,; echo "${pids[*]}")" -- sleep "$seconds" 2> "$rt/perf.err" ||
  { cat "$rt/perf.err"; exit 1; }
wait "$cpid"
wait "$spid" 2>/dev/null
grep -E '^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+' "$rt/client.out" | tail -n 1 |
  awk '{ printf "ib_write_bw -s %s -q %s: %.2f Gbit/s (BW average)\n", $1, q, $4 * 8 / 1000 }' q="$bw_qps"
printf 'load average %s, %s CPUs\n' "$(cut -d' ' -f1-3 /proc/loadavg)" "$(nproc)"
# Self time, no call chains, one line each (the symbol's column trimmed).
top() {
  perf report -i "$data" --no-children -g none --sort "$1" --stdio "${@:2}" 2>/dev/null |
    grep -E '^ +[0-9]' | sed -E 's/ +$//' | head -n 25
}
echo "== share of the samples by daemon (pid) and by kernel / user space"
top pid
top dso
echo "== both daemons, by symbol (self)"
top symbol
# Per daemon: `perf report --pid` does not split a report by process, so
# sort by pid and symbol and keep each daemon's lines.
labels=("a (receives the writes)" "b (sends them)")
for i in 0 1; do
  echo "== daemon ${labels[i]}, by symbol (self, share of both daemons' samples)"
  perf report -i "$data" --no-children -g none --sort pid,symbol --stdio 2>/dev/null |
    grep -E "^ +[0-9.]+% +${pids[i]}:" | sed -E 's/ +$//' | head -n 25
done
