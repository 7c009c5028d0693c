#!/usr/bin/python3
"""`urnic frame decode` against tshark, frame by frame, on every capture.

usage: frame_decode_agrees_with_tshark.py URNIC_CLI VECTORS_DIR

For every RoCE frame (and InfiniBand packet, in an InfiniBand capture), the
opcode, destination QPN and PSN that urnic prints must equal tshark's; for every iWARP segment, the list of RDMAP opcodes
(one per FPDU) and the MPA request/reply frames must equal tshark's. The
exit status of the decoder must be 1 exactly for the captures holding
deliberately corrupted ICRCs (host-icrc-accept*), 0 otherwise, and every
frame urnic flags icrc=bad must be one whose ICRC differs from the others
in its capture (tshark shows the ICRC but does not check it). For every
PAUSE and PFC frame (802.3x / 802.1Qbb), the kind, the enabled priorities
and their pause times must equal tshark's MAC Control dissector's.
"""
import concurrent.futures
import glob
import os
import re
import subprocess
import sys

cli, vectors = sys.argv[1], sys.argv[2]
failures = []
checked_roce = checked_iwarp = checked_pause = 0
PRIORITIES = range(8)


def tshark(path, *fields):
    out = subprocess.run(
        ["tshark", "-r", path, "--disable-protocol", "rpcordma", "-T", "fields", "-E", "separator=\t"]
        + [a for f in fields for a in ("-e", f)],
        capture_output=True, text=True, check=True).stdout
    rows = {}
    for line in out.splitlines():
        cols = line.split("\t")
        rows[int(cols[0])] = cols[1:]
    return rows


def decode_both(path):
    """urnic's decode and tshark's fields of one capture."""
    run = subprocess.run([cli, "frame", "decode", path], capture_output=True, text=True)
    ts = tshark(path, "frame.number", "infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.bth.psn",
                "iwarp_rdma.opcode", "iwarp_mpa.key.req", "iwarp_mpa.key.rep", "macc.opcode", "macc.pause_time",
                "macc.cbfc.enbv", *[f"macc.cbfc.pause_time.c{p}" for p in PRIORITIES])
    return run, ts


def tshark_pause(opcode, pause_time, enbv, times):
    """What urnic's decode line says for a MAC Control frame, from tshark's fields."""
    if int(opcode, 16) == 0x0001:
        return f"pause time={int(pause_time)}q"
    enabled = int(enbv, 16)
    parts = []
    for p in PRIORITIES:
        if enabled >> p & 1:
            parts.append(f"p{p}=xon" if int(times[p] or 0) == 0 else f"p{p}={int(times[p])}q")
    return "pfc " + " ".join(parts)


# tshark takes about a second to start: the captures are decoded on every core
# at once, then compared in order.
paths = sorted(glob.glob(os.path.join(vectors, "*.pcap")))
with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
    decoded = list(pool.map(decode_both, paths))

for path, (run, ts) in zip(paths, decoded):
    name = os.path.basename(path)
    expect_rc = 1 if name.startswith("host-icrc-accept") else 0
    if run.returncode != expect_rc:
        failures.append(f"{name}: exit status {run.returncode}, expected {expect_rc}")
    ours = {}
    for line in run.stdout.splitlines():
        num, proto, rest = line.split(" ", 2)
        ours[int(num)] = (proto, rest)

    if set(ts) != set(ours):
        failures.append(f"{name}: frame numbers differ (tshark {len(ts)}, urnic {len(ours)})")
    for num, (opcode, destqp, psn, rdma_ops, mpa_req, mpa_rep, macc_op, pause_time, enbv, *times) in ts.items():
        proto, rest = ours.get(num, ("missing", ""))
        if macc_op:
            checked_pause += 1
            want = tshark_pause(macc_op, pause_time, enbv, times)
            got = proto + " " + re.sub(r"src=\S+ ", "", rest)
            if got != want:
                failures.append(f"{name}#{num}: tshark {want!r}, urnic {got!r}")
        if opcode:
            checked_roce += 1
            m = re.search(r"\(0x([0-9a-f]{2})\) qpn=0x([0-9a-f]{6}) psn=(\d+)", rest)
            got = (int(m.group(1), 16), int(m.group(2), 16), int(m.group(3))) if m else None
            want = (int(opcode), int(destqp, 16), int(psn))
            if not (proto.startswith("roce") or proto == "ib") or got != want:
                failures.append(f"{name}#{num}: tshark {want}, urnic {proto} {got}: {rest}")
        if rdma_ops or mpa_req or mpa_rep:
            checked_iwarp += 1
            want_ops = [int(x, 16) for x in rdma_ops.split(",")] if rdma_ops else []
            got_ops = [int(x) for x in re.findall(r"^[A-Za-z ]+\((\d+)\)", rest.replace("; ", "\n"), re.M)]
            got_req = "MPA_REQ" in rest
            got_rep = "MPA_REP" in rest
            if proto != "iwarp" or got_ops != want_ops or got_req != bool(mpa_req) or got_rep != bool(mpa_rep):
                failures.append(f"{name}#{num}: tshark ops={want_ops} req={bool(mpa_req)} rep={bool(mpa_rep)}, "
                                f"urnic {proto} ops={got_ops}: {rest}")
    # Every ICRC (InfiniBand: or VCRC) urnic calls bad must be one tshark
    # shows as differing.
    bad = [n for n, (p, r) in ours.items() if re.search(r"\b[iv]crc=bad\b", r)]
    if name.startswith("host-icrc-accept"):
        if not bad:
            failures.append(f"{name}: no frame flagged icrc=bad")
    elif bad:
        failures.append(f"{name}: frames {bad} flagged icrc=bad in a clean capture")

for f in failures[:50]:
    print("FAIL", f)
print(f"checked {checked_roce} RoCE frames, {checked_iwarp} iWARP segments and {checked_pause} PAUSE/PFC "
      f"frames against tshark: "
      f"{len(failures)} disagreements")
sys.exit(1 if failures else 0)
