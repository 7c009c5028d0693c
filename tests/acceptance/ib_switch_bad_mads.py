#!/usr/bin/env python3
"""Malformed and out-of-range MADs to urnic's InfiniBand switch, from a host
cabled to it (issue 51; tests/acceptance/ib_switch_test.sh runs it with
urnic's libibumad.so.3 on LD_LIBRARY_PATH).

usage: ib_switch_bad_mads.py DEVICE SWITCH_LID PORTS

Directed-route SMPs go to the switch at hop 1 (path 1), LID-routed SMPs and
a PerfMgt GMP to its LID. Each case checks the IBA 13.4.7 status of the
switch's response, or that the request was dropped (it comes back with
ETIMEDOUT). A NodeInfo Get is answered after all of them (the switch
survived). Prints one "ok"/"FAIL" line per case; exit status 1 if any failed.
The MAD helpers are ib_bad_mads.py's."""
import errno
import struct
import sys

import ib_bad_mads as b

SET = 0x02
SWITCH_INFO, LFT, PORT_COUNTERS = 0x0012, 0x0019, 0x0012


def send_gmp(port, agent, mad, lid, timeout_ms=200):
    """A GMP to QP1 of `lid` with the GSI Q_Key (ib_bad_mads.send addresses QP0)."""
    buf = b.ctypes.create_string_buffer(b.HDR + 256)
    b.lib.umad_set_addr(buf, lid, 1, 0, 0x80010000)
    b.ctypes.memmove(b.ctypes.addressof(buf) + b.HDR, mad, len(mad))
    return b.lib.umad_send(port, agent, buf, len(mad), timeout_ms, 0)


def with_modifier(mad, modifier):
    m = bytearray(mad)
    struct.pack_into(">I", m, 20, modifier)
    return bytes(m)


def main():
    dev, sw_lid, ports = sys.argv[1], int(sys.argv[2], 0), int(sys.argv[3])
    port = b.lib.umad_open_port(dev.encode(), 1)
    if port < 0:
        print(f"FAIL umad_open_port: {port}")
        return 1
    dr = b.lib.umad_register(port, b.DR, 1, 0, None)
    lid = b.lib.umad_register(port, b.LID_ROUTED, 1, 0, None)
    perf = b.lib.umad_register(port, 0x04, 1, 0, None)
    b.check(dr >= 0 and lid >= 0 and perf >= 0, f"agents registered (DR {dr}, LID-routed {lid}, PerfMgt {perf})")

    # SwitchInfo as it is: LinearFDBCap, the block count of the LFT.
    b.send(port, dr, b.smp(attr=SWITCH_INFO, hop_cnt=1, path=(1,)))
    _, status, si = b.recv(port)
    cap = struct.unpack_from(">H", si, 64)[0] if si else 0
    b.check(status == 0 and si is not None and b.mad_status(si) == 0x8000 and cap > 0,
            f"SwitchInfo Get by directed route: LinearFDBCap {cap}")

    cases = [
        ("LFT Set of block LinearFDBCap/64 (past the table): invalid field", dr,
         with_modifier(b.smp(method=SET, attr=LFT, hop_cnt=1, path=(1,)), cap // 64), 0xFFFF, 0x801C),
        ("LFT Get of block 0xFFFF: invalid field", dr,
         with_modifier(b.smp(attr=LFT, hop_cnt=1, path=(1,)), 0xFFFF), 0xFFFF, 0x801C),
        ("PortInfo of port NumPorts + 1: invalid field", dr,
         with_modifier(b.smp(attr=0x0015, hop_cnt=1, path=(1,)), ports + 1), 0xFFFF, 0x801C),
        ("class version 2: bad version", dr, b.smp(version=2, hop_cnt=1, path=(1,)), 0xFFFF, 0x8004),
        ("unknown attribute 0xFF: unsupported", dr, b.smp(attr=0x00FF, hop_cnt=1, path=(1,)), 0xFFFF, 0x800C),
        ("NodeInfo Set (read-only): unsupported", dr, b.smp(method=SET, hop_cnt=1, path=(1,)), 0xFFFF, 0x800C),
        ("LID-routed, method Send: unsupported method", lid, b.smp(mgmt_class=b.LID_ROUTED, method=0x03), sw_lid,
         0x0008),
        ("PortCounters of port NumPorts + 1: invalid field", perf,
         bytes(b.smp(mgmt_class=0x04, attr=PORT_COUNTERS)[:65]) + bytes([ports + 1]) +
         bytes(b.smp(mgmt_class=0x04, attr=PORT_COUNTERS)[66:]), sw_lid, 0x001C),
    ]
    for what, agent, mad, dlid, want in cases:
        rc = send_gmp(port, agent, mad, dlid) if agent == perf else b.send(port, agent, mad, lid=dlid)
        got, status, reply = b.recv(port)
        b.check(rc == 0 and got == agent and status == 0 and reply is not None and reply[3] == 0x81 and
                b.mad_status(reply) == want and reply[8:16] == mad[8:16],
                f"{what}: status 0x{b.mad_status(reply) if reply else 0:04x} (want 0x{want:04x}), TID kept")

    # Dropped by the switch: the request comes back timed out.
    for what, mad in [
        (f"DR out of port {ports + 1} of the switch (no such port)",
         b.smp(hop_cnt=2, path=(1, ports + 1))),
        ("DR out of port 0 in mid-path", b.smp(hop_cnt=2, path=(1, 0))),
    ]:
        rc = b.send(port, dr, mad)
        got, status, reply = b.recv(port)
        b.check(rc == 0 and got == dr and status == errno.ETIMEDOUT and reply == mad,
                f"{what}: dropped, returned with ETIMEDOUT (status {status})")

    # A PerfMgt MAD sent to QP0 (SMPs only, IBA 13.5.1): dropped.
    pc = b.smp(mgmt_class=0x04, attr=PORT_COUNTERS, tid=b.TID + 2)
    rc = b.send(port, perf, pc, lid=sw_lid)
    got, status, reply = b.recv(port)
    b.check(rc == 0 and got == perf and status == errno.ETIMEDOUT and reply == pc,
            f"PerfMgt MAD to the switch's QP0: dropped, returned with ETIMEDOUT (status {status})")

    rc = b.send(port, dr, b.smp(hop_cnt=1, path=(1,), tid=b.TID + 1))
    got, status, reply = b.recv(port)
    b.check(rc == 0 and status == 0 and reply is not None and b.mad_status(reply) == 0x8000 and reply[64 + 2] == 2,
            "NodeInfo Get answered after all of them (node type switch)")
    return 1 if b.failed else 0


if __name__ == "__main__":
    sys.exit(main())
