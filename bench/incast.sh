#!/usr/bin/env bash
# bench/incast.sh: N:1 incast through the ECN-marking switch with DCQCN on
# and off (tests/acceptance/incast_test.sh, run longer and with its samples
# kept), then a PNG of each flow's rate over time. A measurement, not a
# test: the acceptance checks still print, nothing fails on a number.
#
# Per run and mode the plot has two panels: each flow's send rate (its QP's
# tx_bytes per 100 ms reading of `urnic stats --watch 100 --json` in its
# sender) and its DCQCN rate (the dcqcn_rate_mbps gauge; 0 means not
# limited, drawn as the line rate's absence). The figures (steady-state
# rate per flow, Jain's index, CNPs, cuts, retransmissions, the switch's
# marks and drops) print as incast_test.sh prints them and stay in
# OUT/N-to-1/*.summary.json.
#
# Needs root and python3-matplotlib (Debian's, run with /usr/bin/python3).
#
# usage: bench/incast.sh [BUILD_DIR] [--senders "2 4"] [--duration S]
#          [--rate MBPS] [--out DIR] [--plot-only]   (defaults: build,
#          "2 4", 10, 200, /tmp/urnic-incast-bench; --plot-only: plot the
#          runs already in DIR)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
if [[ $# -gt 0 && $1 != -* ]]; then build=$1; shift; fi
senders="2 4" duration=10 rate=200 out=/tmp/urnic-incast-bench plot_only=
while [[ $# -gt 0 ]]; do
  case $1 in
    --plot-only) plot_only=1; shift ;;
    --senders) senders=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "usage: $0 [BUILD_DIR] [--senders \"2 4\"] [--duration S] [--rate MBPS] [--out DIR]" >&2; exit 2 ;;
  esac
done
/usr/bin/python3 -c 'import matplotlib' 2> /dev/null ||
  { echo "bench/incast.sh: needs python3-matplotlib (apt-get install python3-matplotlib)" >&2; exit 1; }
for f in verbs_shim/libibverbs.so.1 engine/urnicd tools/urnic-cli tests/acceptance/ecn_switch; do
  [[ -e $build/$f ]] || { echo "bench/incast.sh: $build/$f is not built (ninja -C $build)" >&2; exit 1; }
done
mkdir -p "$out"
for n in $senders; do
  [[ -n $plot_only ]] && break
  rm -rf "${out:?}/$n-to-1"
  "$root/tests/acceptance/incast_test.sh" "$build/verbs_shim" "$build/engine/urnicd" "$build/tools/urnic-cli" \
    "$build/tests/acceptance/ecn_switch" --senders "$n" --duration "$duration" --rate "$rate" \
    --keep "$out/$n-to-1"
done
# shellcheck disable=SC2086 # the sender counts, one argument each
/usr/bin/python3 - "$out" "$rate" $senders << 'EOF'
import json, os, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
out, rate, senders = sys.argv[1], float(sys.argv[2]), [int(s) for s in sys.argv[3:]]
modes = ["on", "off"]
fig, axes = plt.subplots(len(senders) * 2, len(modes), figsize=(12, 5 * len(senders)), squeeze=False, sharex="col")
for r, n in enumerate(senders):
    d = f"{out}/{n}-to-1"
    for c, mode in enumerate(modes):
        ax_tx, ax_rate = axes[2 * r][c], axes[2 * r + 1][c]
        summ = f"{d}/{mode}.summary.json"
        if not os.path.exists(summ):
            ax_tx.set_title(f"{n}:1, DCQCN {mode}: no run")
            continue
        s = json.load(open(summ))
        for i in range(1, n + 1):
            samples = [json.loads(l) for l in open(f"{d}/{mode}.watch{i}.jsonl") if l.strip()]
            best = {}
            for smp in samples:
                for q in smp["qps"]:
                    best[q["qpn"]] = max(best.get(q["qpn"], 0), q["counters"]["tx_bytes"])
            if not best:
                continue
            qpn = max(best, key=best.get)
            pts = []
            # Over 5 readings (0.5 s): a reading is stamped when its answer
            # came, and on a busy machine two may come close together.
            for s0, s1 in zip(samples, samples[5:]):
                c0 = next((q["counters"] for q in s0["qps"] if q["qpn"] == qpn), None)
                c1 = next((q["counters"] for q in s1["qps"] if q["qpn"] == qpn), None)
                if c0 is None or c1 is None or s1["t"] <= s0["t"]:
                    continue
                pts.append((s1["t"], (c1["tx_bytes"] - c0["tx_bytes"]) * 8 / (s1["t"] - s0["t"]) / 1e6,
                            c1["dcqcn_rate_mbps"]))
            if not pts:
                continue
            t, tx, g = zip(*pts)
            ax_tx.plot(t, tx, label=f"flow {i}")
            if any(v > 0 for v in g):
                ax_rate.plot(t, [v if v > 0 else float("nan") for v in g], label=f"flow {i}")
        ax_tx.axhline(rate, color="grey", ls="--", lw=0.8, label="bottleneck")
        ax_tx.axhline(rate / n, color="grey", ls=":", lw=0.8, label="fair share")
        sw = s["switch"]
        ax_tx.set_title(f"{n}:1, DCQCN {mode}: Jain {s['jain']}, {sw['marked']} marked, "
                        f"{sw['dropped'] + sw['rx_overruns']} dropped", fontsize=10)
        ax_tx.set_ylabel("send rate (Mb/s, 0.5 s mean)")
        ax_tx.set_ylim(0, max(ax_tx.get_ylim()[1], rate * 1.2))
        ax_rate.set_ylabel("DCQCN rate (Mb/s, log)")
        if ax_rate.lines:
            ax_rate.set_yscale("log")
        else:
            ax_rate.text(0.5, 0.5, "never limited (DCQCN off)", ha="center", transform=ax_rate.transAxes)
        ax_rate.set_xlabel("time (s)")
        ax_tx.legend(fontsize=7, loc="upper right")
fig.tight_layout()
png = f"{out}/incast.png"
fig.savefig(png, dpi=90)
print(f"plot: {png}")
EOF
