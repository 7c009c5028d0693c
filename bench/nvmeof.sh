#!/usr/bin/env bash
# NVMe-oF through SPDK 26.05 on urnic against SPDK's own NVMe/TCP, in one
# run (issue 48; docs/MIDDLEWARE.md, "NVMe-oF (SPDK)"): spdk_nvme_perf 4 KiB
# random reads at queue depth 1 and 32 from one nvmf_tgt (a malloc bdev,
# RDMA transport at its defaults and TCP transport) over urnic0 (RoCE v2,
# 127.0.0.3), urnic_iw0 (iWARP, 127.0.0.2) and TCP (127.0.0.1), the three
# interleaved, each cell REPS times.
#
#   bench/nvmeof.sh [BUILD_DIR] [SECONDS] [REPS]
#
# SPDK must be built in BUILD_DIR/spdk (meson test -C BUILD_DIR --suite
# spdk builds it). Runs in a network namespace of its own (unshare -n,
# root). Prints one line per run and a markdown table of the medians: IOPS
# and average latency (us) as spdk_nvme_perf reports them.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd); secs=${2:-5}; reps=${3:-3}
spdk=$build/spdk/spdk-26.05
[[ -x $spdk/build/bin/spdk_nvme_perf ]] || { echo "nvmeof: no SPDK in $build/spdk (meson test -C $build --suite spdk builds it)" >&2; exit 2; }

if [[ ${NVMEOF_INNER:-} != 1 ]]; then
  exec unshare -n env NVMEOF_INNER=1 "$0" "$build" "$secs" "$reps"
fi

export SPDK_DIR=$spdk URNIC_BUILD_ROOT=$build
# shellcheck source=tests/spdk/spdk_lib.sh
source "$root/tests/spdk/spdk_lib.sh"
spdk_start_urnicd "$build/spdk/bench" || exit 1
trap 'spdk_stop_all' EXIT
spdk_start_target && spdk_add_transport RDMA && spdk_add_transport TCP || exit 1
spdk_add_subsystem rdma 127.0.0.3 && spdk_add_subsystem rdma 127.0.0.2 && spdk_add_subsystem tcp 127.0.0.1 > /dev/null || exit 1
spdk_rpc nvmf_subsystem_get_listeners "$SPDK_NQN" > /dev/null || exit 1

declare -A cells=([roce]="rdma 127.0.0.3" [iwarp]="rdma 127.0.0.2" [tcp]="tcp 127.0.0.1")
res=$build/spdk/bench/results.txt; : > "$res"
echo "nvmeof: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), ${secs} s per run, $reps runs per cell"
for rep in $(seq "$reps"); do
  for qd in 1 32; do
    for c in roce iwarp tcp; do
      read -r trtype addr <<< "${cells[$c]}"
      out=$(spdk_perf "$(spdk_trid "$trtype" "$addr")" -q "$qd" -o 4096 -w randread -t "$secs")
      line=$(awk '$1 == "Total" { print $3, $5 }' <<< "$out")
      [[ -n $line ]] || { echo "nvmeof: $c qd $qd failed:"; tail -n 5 <<< "$out"; continue; }
      echo "$c $qd $line" >> "$res"
      echo "run $rep: $c qd $qd: IOPS $(cut -d' ' -f1 <<< "$line"), average $(cut -d' ' -f2 <<< "$line") us"
    done
  done
done
python3 - "$res" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    c, qd, iops, lat = line.split()
    rows.setdefault((c, qd), []).append((float(iops), float(lat)))
print("\n| 4 KiB randread (median of runs) | urnic RoCE | urnic iWARP | SPDK NVMe/TCP |\n|---|---|---|---|")
for qd in ("1", "32"):
    cells = []
    for c in ("roce", "iwarp", "tcp"):
        r = rows.get((c, qd))
        cells.append("-" if not r else "%.1f k IOPS, %.0f us" % (statistics.median(x[0] for x in r) / 1000,
                                                                  statistics.median(x[1] for x in r)))
    print(f"| queue depth {qd} | " + " | ".join(cells) + " |")
PY
