#!/usr/bin/env python3
"""incast_summary.py RT MODE SENDERS DURATION: the figures of one incast run.

Shared by tests/acceptance/incast_test.sh (ecn_switch, a user-space switch)
and tools/interop.sh's incast-red group (a kernel qdisc in the peer VM). In
RT, per sender i: MODE.watch<i>.jsonl (`urnic stats --watch --json`),
MODE.s<i>.json (`urnic stats --json` at the end), MODE.client<i>.out
(ib_write_bw's output), MODE.exit<i>; the receiver's MODE.r.json; and the
bottleneck's counters: MODE.switch.json and MODE.switch_before.json
(ecn_switch), or MODE.qdisc.json (the qdisc's, counted from zero: keys
sent_pkts, marked, early, pdrop, dropped, overlimits, tap_dropped,
backlog_samples). Prints the text and writes RT/MODE.summary.json.
"""
import json, os, re, sys
rt, mode, n, duration = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
def load(p):
    return json.load(open(p))
flows = []
for i in range(1, n + 1):
    samples = [json.loads(l) for l in open(f"{rt}/{mode}.watch{i}.jsonl") if l.strip()]
    # The flow's QP: the one that sent the most.
    def qtx(s, qpn):
        for q in s["qps"]:
            if q["qpn"] == qpn:
                return q["counters"]
        return None
    # The flow's QP: the one that sent the most in any reading (it is gone
    # from the last ones once ib_write_bw has ended).
    best = {}
    for s in samples:
        for q in s["qps"]:
            best[q["qpn"]] = max(best.get(q["qpn"], 0), q["counters"]["tx_bytes"])
    qpn = max(best, key=best.get) if best else None
    series = []  # (t, tx_bytes, rate gauge)
    srtts = []   # the QP's smoothed round trip (us) while it sent, where measured
    for s in samples:
        c = qtx(s, qpn)
        if c is not None:
            # (A sample may lack the gauge: acceptance-incast-pfc's summary
            # once stopped on a KeyError here, 2026-12-07; 0: not limited.)
            series.append((s["t"], c["tx_bytes"], c.get("dcqcn_rate_mbps", 0)))
            if c.get("srtt_us"):
                srtts.append(c["srtt_us"])
    # Active span: from the first to the last sample in which it sent.
    active = [k for k in range(1, len(series)) if series[k][1] > series[k - 1][1]]
    rates = []
    for k in range(1, len(series)):
        dt = series[k][0] - series[k - 1][0]
        rates.append((series[k][0], (series[k][1] - series[k - 1][1]) * 8 / dt / 1e6 if dt > 0 else 0, series[k][2]))
    srtts.sort()
    flows.append({"flow": i, "qpn": qpn, "series": rates, "srtt_median_us": srtts[len(srtts) // 2] if srtts else None, "raw": series, "active": (series[active[0]][0], series[active[-1]][0]) if active else (0, 0)})
# Steady state: the second half of the span in which every flow was sending.
t0 = max(f["active"][0] for f in flows)
t1 = min(f["active"][1] for f in flows)
mid = t0 + (t1 - t0) / 2
for f in flows:
    # Bytes sent in the window over its length (readings are stamped when
    # their answer came, so single intervals jitter on a busy machine).
    pts = [(t, b) for (t, b, g) in f["raw"] if mid <= t <= t1]
    f["steady_mbps"] = (pts[-1][1] - pts[0][1]) * 8 / (pts[-1][0] - pts[0][0]) / 1e6 if len(pts) > 1 and pts[-1][0] > pts[0][0] else 0.0
x = [f["steady_mbps"] for f in flows]
jain = (sum(x) ** 2) / (len(x) * sum(v * v for v in x)) if any(x) else 0.0
out = {"mode": mode, "senders": n, "steady_window_s": [round(mid, 2), round(t1, 2)], "flows": [], "jain": round(jain, 3)}
for i, f in enumerate(flows, 1):
    s = load(f"{rt}/{mode}.s{i}.json")["counters"]
    bw = None
    for l in open(f"{rt}/{mode}.client{i}.out"):
        m = re.match(r"^\s*\d+\s+\d+\s+([\d.]+)\s+([\d.]+)", l)
        if m:
            bw = float(m.group(2))
    out["flows"].append({"flow": i, "exit": int(open(f"{rt}/{mode}.exit{i}").read()),
                         "steady_gbps": round(f["steady_mbps"] / 1000, 3),
                         "perftest_MBps": bw, "cnps_rcvd": s["cnps_rcvd"],
                         "dcqcn_rate_decreases": s["dcqcn_rate_decreases"],
                         "retransmitted_pkts": s["retransmitted_pkts"],
                         "ack_timeouts": s["local_ack_timeout_err"],
                         "srtt_median_us": f["srtt_median_us"],
                         "link_tx_errors": s["link_tx_errors"]})
g = [f["perftest_MBps"] or 0.0 for f in out["flows"]]
out["jain_perftest"] = round((sum(g) ** 2) / (len(g) * sum(v * v for v in g)), 3) if any(g) else 0.0
r = load(f"{rt}/{mode}.r.json")["counters"]
out["receiver"] = {k: r[k] for k in ("ce_rcvd", "cnps_sent", "rx_pkts", "seq_err_naks_sent")}
if os.path.exists(f"{rt}/{mode}.switch.json"):
    sw, sw0 = load(f"{rt}/{mode}.switch.json"), load(f"{rt}/{mode}.switch_before.json")
    out["switch"] = {k: sw[k] - sw0[k] for k in ("enqueued", "marked", "dropped", "rx_overruns", "sent", "not_ect")}
    out["switch"]["max_backlog_bytes_ever"] = sw["max_backlog"]
    en = sw["enqueued"] - sw0["enqueued"]
    out["switch"]["mean_backlog_bytes"] = round((sw["mean_backlog"] * sw["enqueued"] - sw0["mean_backlog"] * sw0["enqueued"]) / en) if en else 0
else:
    q = load(f"{rt}/{mode}.qdisc.json")
    out["qdisc"] = {k: q.get(k) for k in ("sent_pkts", "marked", "early", "pdrop", "dropped", "overlimits", "tap_dropped")}
    bl = q.get("backlog_samples") or []
    out["qdisc"]["backlog_samples"] = len(bl)
    out["qdisc"]["mean_backlog_bytes"] = round(sum(bl) / len(bl)) if bl else None
    out["qdisc"]["max_backlog_bytes"] = max(bl) if bl else None
json.dump(out, open(f"{rt}/{mode}.summary.json", "w"), indent=1)
# Text.
print(f"  dcqcn {mode}: steady state {out['steady_window_s'][0]}..{out['steady_window_s'][1]} s, Jain's index "
      f"{out['jain']} (send rates; over perftest's averages {out['jain_perftest']}), "
      f"total {round(sum(g) * 8 / 1000, 3)} Gb/s delivered")
for f in out["flows"]:
    print(f"    flow {f['flow']} (exit {f['exit']}): {f['steady_gbps']} Gb/s steady (perftest {f['perftest_MBps']} MB/s average), "
          f"CNPs rcvd {f['cnps_rcvd']}, cuts {f['dcqcn_rate_decreases']}, retransmitted {f['retransmitted_pkts']}, "
          f"ACK timeouts {f['ack_timeouts']}, srtt median {f['srtt_median_us']} us")
print(f"    receiver: CE rcvd {out['receiver']['ce_rcvd']}, CNPs sent {out['receiver']['cnps_sent']}, "
      f"seq-err NAKs sent {out['receiver']['seq_err_naks_sent']}")
if "switch" in out:
    s = out["switch"]
    print(f"    switch: {s['enqueued']} frames queued, {s['marked']} marked CE, {s['dropped']} dropped at the queue, "
          f"{s['rx_overruns']} lost at its ports (socket buffer full), "
          f"mean queue at enqueue {s['mean_backlog_bytes']} B (max so far {s['max_backlog_bytes_ever']} B)")
else:
    s = out["qdisc"]
    print(f"    qdisc: {s['sent_pkts']} frames sent, {s['marked']} marked CE ({s['early']} early drops), "
          f"{s['pdrop']} dropped at its limit ({s['dropped']} drops in all); "
          f"{s['tap_dropped']} lost before it (the VM's input queue full); "
          f"queue sampled {s['backlog_samples']} times: mean {s['mean_backlog_bytes']} B, max {s['max_backlog_bytes']} B")
