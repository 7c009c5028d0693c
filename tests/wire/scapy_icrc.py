#!/usr/bin/python3
"""Cross-checks urnic's RoCE v2 / IPv4 ICRC against scapy.contrib.roce.

Builds a set of RoCE v2 frames with scapy (which computes the ICRC itself),
feeds them as hex to tests/wire/roce_icrc_tool and checks that urnic
computes the same ICRC for each and finds it valid; then corrupts one byte
of each frame and checks that urnic flags it bad.

Usage: scapy_icrc.py PATH/TO/roce_icrc_tool. Exit 77 (meson: skipped) when
scapy is not installed.
"""
import random
import struct
import subprocess
import sys

try:
    from scapy.all import Ether, IP, UDP, Raw, raw  # noqa: E402
    from scapy.contrib.roce import BTH, AETH, cnp  # noqa: E402
except ImportError:
    print("scapy not available: skipped")
    sys.exit(77)


def frames(rng):
    """Yields (description, frame bytes) for a spread of opcodes and fields."""
    for i in range(200):
        kind = i % 5
        ip = IP(src="192.168.%d.%d" % (rng.randrange(256), rng.randrange(1, 255)),
                dst="10.0.%d.%d" % (rng.randrange(256), rng.randrange(1, 255)),
                tos=rng.randrange(256), ttl=rng.randrange(1, 256),
                id=rng.randrange(65536), flags="DF" if rng.random() < 0.8 else 0)
        udp = UDP(sport=rng.randrange(49152, 65536), dport=4791)
        if rng.random() < 0.5:
            udp.chksum = 0  # what rxe sends; otherwise scapy fills a real one
        common = dict(solicited=rng.randrange(2), migreq=rng.randrange(2),
                      pkey=rng.randrange(65536), fecn=rng.randrange(2), becn=rng.randrange(2),
                      dqpn=rng.randrange(1 << 24), ackreq=rng.randrange(2), psn=rng.randrange(1 << 24))
        if kind == 0:  # RC SEND ONLY with payload and pad
            n = rng.randrange(0, 300)
            pad = (4 - n % 4) % 4
            body = bytes(rng.randrange(256) for _ in range(n)) + b"\0" * pad
            pkt = BTH(opcode=0x04, padcount=pad, **common) / Raw(body) if body else BTH(opcode=0x04, **common)
        elif kind == 1:  # RC ACKNOWLEDGE
            pkt = BTH(opcode=0x11, **common) / AETH(syndrome=rng.randrange(256), msn=rng.randrange(1 << 24))
        elif kind == 2:  # RC RDMA WRITE ONLY: RETH + payload
            reth = struct.pack("!QII", rng.getrandbits(64), rng.getrandbits(32), 64)
            pkt = BTH(opcode=0x0A, **common) / Raw(reth + bytes(rng.randrange(256) for _ in range(64)))
        elif kind == 3:  # UD SEND ONLY: DETH + payload
            deth = struct.pack("!II", 0x80010000, rng.randrange(1 << 24))
            pkt = BTH(opcode=0x64, **common) / Raw(deth + bytes(256))
        else:  # CNP
            pkt = cnp(rng.randrange(1 << 24))
        frame = raw(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / ip / udp / pkt)
        yield "frame %d kind %d" % (i, kind), frame


def run_tool(tool, hex_lines):
    out = subprocess.run([tool], input="\n".join(hex_lines) + "\n", capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    tool = sys.argv[1]
    rng = random.Random(4791)
    cases = list(frames(rng))
    failures = 0

    lines = run_tool(tool, [f.hex() for _, f in cases])
    if len(lines) != len(cases):
        print("tool printed %d lines for %d frames" % (len(lines), len(cases)))
        return 1
    for (desc, frame), line in zip(cases, lines):
        scapy_icrc = struct.unpack("<I", frame[-4:])[0]
        want = "%08x ok" % scapy_icrc
        if line != want:
            failures += 1
            print("MISMATCH %s: scapy %s, urnic %s" % (desc, want, line))

    # One flipped bit in a non-masked place (the last BTH PSN byte, IP
    # offset 20 + 8 + 11) must make the ICRC bad; urnic's recomputed value must
    # then differ from the stored one.
    corrupted = []
    for _, frame in cases:
        b = bytearray(frame)
        b[14 + 20 + 8 + 11] ^= 0x01
        corrupted.append(bytes(b))
    for (desc, frame), line in zip(cases, run_tool(tool, [f.hex() for f in corrupted])):
        stored = struct.unpack("<I", frame[-4:])[0]
        if not line.endswith(" bad") or line.startswith("%08x" % stored):
            failures += 1
            print("NOT FLAGGED %s: %s" % (desc, line))

    print("%d frames, %d failures" % (len(cases), failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
