#!/usr/bin/env python3
"""bench/perf_table.py: renders bench/perf.sh's measurements as one markdown
report (and, when a path is given, JSON): latency, bandwidth and message
rate on one host next to TCP and memcpy, the ratios, the issue-23 goals
met or not, then the links table from bench/links_bench.sh.

usage: perf_table.py ROWS.tsv LINKS.md CPUS LOADAVG [JSON_OUT]
ROWS.tsv lines: KIND NAME SIZE QPS KEY=VALUE... (tab-separated but the last
field, whose pairs are space-separated)."""
import json
import sys


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def fmt(v, digits=2):
    return "-" if v is None else f"{v:.{digits}f}"


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def read_rows(path):
    rows = []
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 5:
                continue
            kind, name, size, qps, kv = parts
            r = {"kind": kind, "name": name, "size": int(size), "qps": int(qps)}
            for pair in kv.split():
                k, _, v = pair.partition("=")
                r[k] = num(v)
            rows.append(r)
    return rows


def read_links(path):
    """The links table's data rows as dicts, and its text."""
    text = open(path).read()
    lines = [l for l in text.splitlines() if l.startswith("|")]
    if len(lines) < 3:
        return [], text
    header = [h.strip() for h in lines[0].strip("|").split("|")]
    out = []
    for l in lines[2:]:
        cells = [c.strip() for c in l.strip("|").split("|")]
        out.append(dict(zip(header, cells)))
    return out, text


def yes_no(met):
    return "-" if met is None else ("yes" if met else "no")


def links_goals(links):
    """Per link of the links table: its write bandwidth over iperf3 TCP's
    and its typical write latency over sockperf TCP's (below 1 is faster),
    and whether each goal is met."""
    bw_key, lat_key = "write_bw [Gbit/s]", "write_lat typical [us]"
    tcp_bw = next((num(l.get(bw_key)) for l in links if l.get("link") == "iperf3 TCP"), None)
    tcp_lat = next((num(l.get(lat_key)) for l in links if l.get("link") == "sockperf TCP"), None)
    out = []
    for l in links:
        if l.get("link", "").endswith("TCP"):
            continue
        bw = ratio(num(l.get(bw_key)), tcp_bw)
        lat = ratio(num(l.get(lat_key)), tcp_lat)
        out.append({"link": l.get("link"), "bw_x_tcp": bw, "bw_met": None if bw is None else bw >= 1.0,
                    "lat_x_tcp": lat, "lat_met": None if lat is None else lat < 1.0})
    return out


def main():
    rows_path, links_path, cpus, load = sys.argv[1:5]
    json_out = sys.argv[5] if len(sys.argv) > 5 else ""
    rows = read_rows(rows_path)
    links, links_text = read_links(links_path)

    def find(kind, name=None, size=None, qps=None):
        for r in rows:
            if r["kind"] == kind and (name is None or r["name"] == name) and \
                    (size is None or r["size"] == size) and (qps is None or r["qps"] == qps):
                return r
        return None

    def syscalls(r):
        # The daemon's calls per operation, and of them the sched_yield of
        # its idle spin (a courtesy to the programs on a small machine, not
        # work the operation needs).
        total, yields = fmt(r.get("syscalls")), r.get("yields")
        return total if yields is None else f"{total} ({fmt(yields)} yield)"

    out = []
    out.append(f"machine: {cpus} CPUs, load average {load}")
    out.append("")
    out.append("Same host, latency (one-way, us)")
    out.append("| test | size | median | p99 | x TCP | daemon ns/op | syscalls/op |")
    out.append("|---|---|---|---|---|---|---|")
    for size in (2, 4096):
        tcp = find("tcp-sockperf", size=size)
        tcp50 = tcp.get("lat_p50") if tcp else None
        out.append(f"| TCP (sockperf ping-pong) | {max(size, 16)} | {fmt(tcp50)} | {fmt(tcp.get('lat_p99') if tcp else None)} "
                   f"| 1.00 | - | - |")
        for r in rows:
            if r["kind"] != "urnic" or r["size"] != size or "lat_p50" not in r:
                continue
            r["x_tcp"] = ratio(tcp50, r.get("lat_p50"))
            out.append(f"| {r['name']} | {size} | {fmt(r.get('lat_p50'))} | {fmt(r.get('lat_p99'))} "
                       f"| {fmt(r['x_tcp'])} | {fmt(r.get('cpu_ns'), 0)} | {syscalls(r)} |")
    out.append("")
    out.append("Same host, bandwidth (Gbit/s)")
    out.append("| test | size | QPs / streams | Gbit/s | x TCP | of memcpy | daemon ns/op | syscalls/op |")
    out.append("|---|---|---|---|---|---|---|---|")
    for size in (4096, 65536, 1048576):
        mem = find("memcpy", size=size)
        mem_g = mem.get("bw_gbits") if mem else None
        out.append(f"| memcpy | {size} | 1 | {fmt(mem_g)} | - | 1.00 | - | - |")
        for qps in (1, 4):
            tcp = find("tcp-iperf3", size=size, qps=qps)
            tcp_g = tcp.get("bw_gbits") if tcp else None
            out.append(f"| TCP (iperf3) | {size} | {qps} | {fmt(tcp_g)} | 1.00 | {fmt(ratio(tcp_g, mem_g))} | - | - |")
            for r in rows:
                if r["kind"] != "urnic" or r["size"] != size or r["qps"] != qps or "bw_gbits" not in r:
                    continue
                r["x_tcp"] = ratio(r.get("bw_gbits"), tcp_g)
                r["of_memcpy"] = ratio(r.get("bw_gbits"), mem_g)
                out.append(f"| {r['name']} | {size} | {qps} | {fmt(r.get('bw_gbits'))} | {fmt(r['x_tcp'])} "
                           f"| {fmt(r['of_memcpy'])} | {fmt(r.get('cpu_ns'), 0)} | {syscalls(r)} |")
    dram = find("memcpy", size=268435456)
    out.append(f"(memcpy of 256 MiB, DRAM-bound: {fmt(dram.get('bw_gbits') if dram else None)} Gbit/s)")
    out.append("")
    out.append("Same host, message rate (64 B RDMA writes)")
    out.append("| test | QPs | M msgs/s | daemon ns/op | syscalls/op |")
    out.append("|---|---|---|---|---|")
    for r in rows:
        if r["name"].endswith("(msg rate)"):
            out.append(f"| ib_write_bw -s 64 | {r['qps']} | {fmt(r.get('mpps'), 3)} | {fmt(r.get('cpu_ns'), 0)} "
                       f"| {syscalls(r)} |")
    out.append("")

    # The goals of issue 23, as measured by this run.
    w64 = find("urnic", "ib_write_bw", 65536, 1)
    tcp64 = find("tcp-iperf3", size=65536, qps=1)
    mem64 = find("memcpy", size=65536)
    rate = max((r.get("mpps") or 0 for r in rows if r["name"].endswith("(msg rate)")), default=None)
    ev = find("urnic", "ib_send_lat -e", 2, 1)
    tcp2 = find("tcp-sockperf", size=2)
    small = [r for r in rows if r["name"].endswith("(msg rate)")]
    worst_sc = max((r.get("syscalls") or 0 for r in rows if r["kind"] == "urnic"), default=None)
    best_small_cpu = min((r.get("cpu_ns") for r in small if r.get("cpu_ns") is not None), default=None)
    goals = [
        ("ib_write_bw 64 KiB >= 3x iperf3 TCP", ratio(w64 and w64.get("bw_gbits"), tcp64 and tcp64.get("bw_gbits")), 3.0, True),
        ("ib_write_bw 64 KiB >= 40 % of memcpy", ratio(w64 and w64.get("bw_gbits"), mem64 and mem64.get("bw_gbits")), 0.4, True),
        ("message rate >= 2 M small writes/s", rate, 2.0, True),
        ("ib_send_lat -e <= 0.5x TCP one-way", ratio(ev and ev.get("lat_p50"), tcp2 and tcp2.get("lat_p50")), 0.5, False),
        ("0 daemon system calls per operation (worst row)", worst_sc, 0.0, False),
        ("<= 300 ns daemon CPU per 64 B write", best_small_cpu, 300.0, False),
    ]
    out.append("Issue 23 goals (same host)")
    out.append("| goal | measured | met |")
    out.append("|---|---|---|")
    goal_json = []
    for name, value, target, at_least in goals:
        met = None if value is None else (value >= target if at_least else value <= target)
        out.append(f"| {name} | {fmt(value)} | {'-' if met is None else ('yes' if met else 'no')} |")
        goal_json.append({"goal": name, "measured": value, "met": met})
    # Not a goal of the issue, what the system call goal is made of: the
    # worst row once the idle spin's sched_yield calls are left out.
    worst_other = max(((r.get("syscalls") or 0) - (r.get("yields") or 0) for r in rows if r["kind"] == "urnic"),
                      default=None)
    out.append(f"(worst row's daemon system calls per operation other than sched_yield: {fmt(worst_other)})")
    out.append("")
    out.append("Across two network namespaces (bench/links_bench.sh)")
    out.append(links_text.strip())
    out.append("")
    link_goals = links_goals(links)
    if link_goals:
        out.append("Issue 23 goals (across namespaces): each link's write bandwidth at or above iperf3 TCP's, "
                   "its write latency (typical) below sockperf TCP's")
        out.append("| link | write_bw x TCP | bw met | write_lat x TCP | lat met |")
        out.append("|---|---|---|---|---|")
        for g in link_goals:
            out.append(f"| {g['link']} | {fmt(g['bw_x_tcp'])} | {yes_no(g['bw_met'])} | {fmt(g['lat_x_tcp'])} "
                       f"| {yes_no(g['lat_met'])} |")
    print("\n".join(out))
    if json_out:
        with open(json_out, "w") as f:
            json.dump({"cpus": int(cpus), "load": load, "rows": rows, "goals": goal_json, "links": links,
                       "link_goals": link_goals}, f, indent=1)


if __name__ == "__main__":
    main()
