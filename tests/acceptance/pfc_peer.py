#!/usr/bin/env python3
"""The PFC side of acceptance-pfc (pfc_test.sh): sends MAC Control frames on
an interface at set times, and reads the capture afterwards.

  pfc_peer.py send IFACE SCHEDULE_FILE [--after-rx N]
      Each line of SCHEDULE_FILE: SECONDS KIND ARGS; at SECONDS after start
      (monotonic) sends one frame through an AF_PACKET socket and prints
      "sent KIND SECONDS". With --after-rx N, "start" is when IFACE has
      received more than N frames (polled every ms, at most 60 s: exit 1):
      the schedule runs while the traffic does, whenever that begins.
        pfc VECTOR T0 .. T7     a PFC frame (opcode 0x0101) to 01-80-C2-00-00-01
        pause TIME              an 802.3x PAUSE (opcode 0x0001)
        raw HEX                 any frame (malformed ones)
  pfc_peer.py analyse PCAP DEVICE_MAC [DEVICE_PCAP]
      Reads a classic pcap (dumpcap -P) and prints JSON: the MAC Control
      frames in it not from the device (time, opcode, vector, times: the
      device may emit PFC of its own) and the times of every
      RoCE v2/IPv4 frame the device (source MAC DEVICE_MAC) sent, with its
      DSCP, QP, PSN and AckReq bit. DEVICE_PCAP, captured on the device's own interface: the
      RoCE v2 ACKs it received from its peer ("acks": time, PSN, AETH
      syndrome), so that a retransmission can be set against the answers
      the device had (a link that bypasses the qdisc, as the afpacket link
      does, is not seen by a capture on its own interface: the peer's
      frames are captured where they arrive).
"""
import json
import socket
import struct
import sys
import time

GROUP = bytes.fromhex("0180c2000001")


def pfc_frame(src, vector, times):
    body = struct.pack("!HHH8H", 0x8808, 0x0101, vector, *times)
    return (GROUP + src + body).ljust(60, b"\0")


def pause_frame(src, t):
    return (GROUP + src + struct.pack("!HHH", 0x8808, 0x0001, t)).ljust(60, b"\0")


def rx_packets(iface):
    with open(f"/sys/class/net/{iface}/statistics/rx_packets") as f:
        return int(f.read())


def send(iface, schedule, after_rx=None):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((iface, 0))
    src = s.getsockname()[4][:6]
    if after_rx is not None:
        deadline = time.monotonic() + 60
        while rx_packets(iface) <= after_rx:
            if time.monotonic() > deadline:
                print(f"no traffic: {iface} received {rx_packets(iface)} frames in 60 s", flush=True)
                sys.exit(1)
            time.sleep(0.001)
    start = time.monotonic()
    for line in open(schedule):
        parts = line.split()
        if not parts or parts[0].startswith("#"):
            continue
        at, kind, args = float(parts[0]), parts[1], parts[2:]
        if kind == "pfc":
            frame = pfc_frame(src, int(args[0], 0), [int(a) for a in args[1:9]])
        elif kind == "pause":
            frame = pause_frame(src, int(args[0]))
        else:
            frame = bytes.fromhex(args[0])
        while time.monotonic() - start < at:
            time.sleep(min(0.0005, max(0.0, at - (time.monotonic() - start))))
        s.send(frame)
        print("sent", kind, at, flush=True)


def frames(path):
    """(time, frame) of each record of a classic pcap."""
    data = open(path, "rb").read()
    magic = struct.unpack("<I", data[:4])[0]
    scale = {0xA1B2C3D4: 1e-6, 0xA1B23C4D: 1e-9}[magic]
    off = 24
    while off + 16 <= len(data):
        sec, frac, incl, _ = struct.unpack("<IIII", data[off:off + 16])
        yield sec + frac * scale, data[off + 16:off + 16 + incl]
        off += 16 + incl


def roce_v2(pkt):
    """Whether pkt is RoCE v2 over IPv4 with its BTH in the first 54 bytes."""
    return len(pkt) >= 54 and struct.unpack("!H", pkt[12:14])[0] == 0x0800 and pkt[23] == 17 and \
        struct.unpack("!H", pkt[36:38])[0] == 4791


def analyse(path, device_mac, device_path=None):
    mac = bytes.fromhex(device_mac.replace(":", ""))
    control, roce, acks = [], [], []
    for t, pkt in frames(path):
        if len(pkt) < 14:
            continue
        etype = struct.unpack("!H", pkt[12:14])[0]
        if etype == 0x8808 and len(pkt) >= 20 and pkt[6:12] != mac:  # the peer's, not the device's own
            opcode = struct.unpack("!H", pkt[14:16])[0]
            if opcode == 0x0101 and len(pkt) >= 34:
                vector = struct.unpack("!H", pkt[16:18])[0]
                times = list(struct.unpack("!8H", pkt[18:34]))
            else:
                vector, times = 0xFF, [struct.unpack("!H", pkt[16:18])[0]] * 8
            control.append({"t": t, "opcode": opcode, "vector": vector, "times": times})
        elif pkt[6:12] == mac and etype == 0x0800 and len(pkt) >= 38 and pkt[23] == 17 and \
                struct.unpack("!H", pkt[36:38])[0] == 4791:
            # [time, DSCP, BTH destination QP, PSN, AckReq] (the capture
            # keeps 64 bytes: Ethernet, IPv4, UDP and the BTH end at 54).
            qpn = int.from_bytes(pkt[47:50], "big") if len(pkt) >= 54 else 0
            psn = int.from_bytes(pkt[51:54], "big") if len(pkt) >= 54 else 0
            ack_req = pkt[50] >> 7 if len(pkt) >= 54 else 0
            roce.append([t, pkt[15] >> 2, qpn, psn, ack_req])
    if device_path is not None:
        # [time, PSN, AETH syndrome] of each ACK (opcode 0x11) from the peer.
        for t, pkt in frames(device_path):
            if pkt[6:12] != mac and roce_v2(pkt) and pkt[42] == 0x11 and len(pkt) >= 55:
                acks.append([t, int.from_bytes(pkt[51:54], "big"), pkt[54]])
    json.dump({"control": control, "roce": roce, "acks": acks}, sys.stdout)


if __name__ == "__main__":
    if sys.argv[1] == "send":
        send(sys.argv[2], sys.argv[3], int(sys.argv[5]) if sys.argv[4:5] == ["--after-rx"] else None)
    else:
        analyse(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None)
