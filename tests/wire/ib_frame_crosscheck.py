#!/usr/bin/python3
"""Cross-checks urnic's native InfiniBand packets (wire/ib_frame) against an
independent implementation of the IBA rules written here from the spec:

  LRH (IBA 7.7): VL:4 LVer:4 | SL:4 rsv:2 LNH:2 | DLID:16 | rsv:5 PktLen:11 | SLID:16
  GRH (8.3.1) when LNH = 3; BTH (9.2) and DETH / RETH as the opcode wants.
  ICRC (7.8.1): CRC-32 (reflected, poly 0x04C11DB7, init and final ~0) over
     LRH..pad with LRH VL, GRH TClass / FlowLabel / HopLmt and BTH byte 4
     set to ones; stored least-significant byte first.
  VCRC (7.8.2): CRC-16 (reflected, poly 0x100B, init and final ~0) over
     LRH..ICRC; stored least-significant byte first.

Both CRCs are computed bit by bit here (no table, no library), so they share
nothing with urnic's ISA-L / Boost.CRC code. The packets are fed as hex to
ib_frame_tool (urnic), which prints what it parsed and its CRC verdicts; the
fields and verdicts must match, and a packet with one flipped bit must fail
the VCRC (and the ICRC unless the bit is in a variant field).

Usage: ib_frame_crosscheck.py PATH/TO/ib_frame_tool [--print N]
  --print N: print N packets as C++ test vectors instead (how the
  known-answer vectors of ib_frame_test.cpp were made).
"""
import random
import struct
import subprocess
import sys


def crc32_bitwise(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0xEDB88320 if crc & 1 else 0)  # 0x04C11DB7 reflected
    return crc ^ 0xFFFFFFFF


def reflect(v, bits):
    r = 0
    for i in range(bits):
        if v & (1 << i):
            r |= 1 << (bits - 1 - i)
    return r


VCRC_POLY_REFLECTED = reflect(0x100B, 16)


def crc16_vcrc_bitwise(data):
    crc = 0xFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (VCRC_POLY_REFLECTED if crc & 1 else 0)
    return crc ^ 0xFFFF


UD_SEND_ONLY, RC_SEND_ONLY, RC_WRITE_ONLY, RC_ACK = 0x64, 0x04, 0x0A, 0x11


def build(rng, grh):
    opcode = rng.choice([UD_SEND_ONLY, RC_SEND_ONLY, RC_WRITE_ONLY, RC_ACK])
    payload = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 300))) if opcode != RC_ACK else b""
    pad = (4 - len(payload) % 4) % 4
    vl, sl = rng.randrange(15), rng.randrange(16)
    dlid, slid = rng.randrange(1, 0xC000), rng.randrange(1, 0xC000)
    pkey, dqp, psn = rng.randrange(1 << 16), rng.randrange(1 << 24), rng.randrange(1 << 24)
    se, mig, fecn, becn, ackreq = (rng.randrange(2) for _ in range(5))
    bth = struct.pack(">BBHBBHBBH", opcode, (se << 7) | (mig << 6) | (pad << 4), pkey,
                      (fecn << 7) | (becn << 6), dqp >> 16, dqp & 0xFFFF, ackreq << 7, psn >> 16, psn & 0xFFFF)
    if opcode == UD_SEND_ONLY:
        ext = struct.pack(">II", rng.randrange(1 << 32), rng.randrange(1 << 24))  # DETH: Q_Key, rsv8 + SrcQP
    elif opcode == RC_WRITE_ONLY:
        ext = struct.pack(">QII", rng.randrange(1 << 64), rng.randrange(1 << 32), len(payload))
    elif opcode == RC_ACK:
        ext = struct.pack(">I", rng.randrange(1 << 24))  # AETH: syndrome ACK, MSN
    else:
        ext = b""
    transport = bth + ext + payload + b"\0" * pad
    g = b""
    tclass = flow = hop = 0
    if grh:
        tclass, flow, hop = rng.randrange(256), rng.randrange(1 << 20), rng.randrange(256)
        sgid = bytes([0xFE, 0x80] + [0] * 6 + [rng.randrange(256) for _ in range(8)])
        dgid = bytes([0xFE, 0x80] + [0] * 6 + [rng.randrange(256) for _ in range(8)])
        g = struct.pack(">IHBB", (6 << 28) | (tclass << 20) | flow, len(transport) + 4, 0x1B, hop) + sgid + dgid
    pkt_len_words = (8 + len(g) + len(transport) + 4) // 4
    lrh = struct.pack(">BBHHH", (vl << 4) | 0, (sl << 4) | (3 if grh else 2), dlid, pkt_len_words, slid)
    body = lrh + g + transport
    masked = bytearray(body)
    masked[0] |= 0xF0
    if grh:
        masked[8] |= 0x0F
        masked[9:12] = b"\xff\xff\xff"
        masked[15] = 0xFF
    masked[8 + len(g) + 4] = 0xFF
    icrc = crc32_bitwise(bytes(masked))
    packet = body + struct.pack("<I", icrc)
    vcrc = crc16_vcrc_bitwise(packet)
    frame = packet + struct.pack("<H", vcrc)
    fields = "vl=%d sl=%d dlid=%d slid=%d grh=%d opcode=%d dqp=%d psn=%d payload=%d" % (
        vl, sl, dlid, slid, 1 if grh else 0, opcode, dqp, psn, len(payload))
    return frame, fields, icrc, vcrc, len(body)


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    rng = random.Random(51)
    if sys.argv[1] == "--print":
        for i in range(int(sys.argv[2])):
            frame, fields, icrc, vcrc, _ = build(rng, grh=i % 2 == 1)
            print("// %s icrc=%08x vcrc=%04x\n\"%s\"," % (fields, icrc, vcrc, frame.hex()))
        return 0
    cases = []
    for i in range(300):
        frame, fields, icrc, vcrc, body_len = build(rng, grh=i % 3 == 0)
        cases.append((frame, fields + " icrc=ok vcrc=ok"))
        # One flipped bit: the VCRC always catches it; the ICRC too unless
        # the bit is in a variant field (LRH VL, GRH TClass/FlowLabel/HopLmt,
        # BTH byte 4) or the CRCs themselves.
        bad = bytearray(frame)
        pos = rng.randrange(8, body_len)
        bad[pos] ^= 1 << rng.randrange(8)
        cases.append((bytes(bad), None))
    inp = "".join(f.hex() + "\n" for f, _ in cases)
    out = subprocess.run([sys.argv[1]], input=inp, capture_output=True, text=True, check=True).stdout.splitlines()
    if len(out) != len(cases):
        print("tool printed %d lines for %d packets" % (len(out), len(cases)))
        return 1
    failures = 0
    for (frame, want), got in zip(cases, out):
        if want is not None and got != want:
            print("MISMATCH %s\n  want %s\n  got  %s" % (frame.hex(), want, got))
            failures += 1
        if want is None and "vcrc=ok" in got:
            print("CORRUPT NOT CAUGHT %s: %s" % (frame.hex(), got))
            failures += 1
    print("%d packets, %d failures" % (len(cases), failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
