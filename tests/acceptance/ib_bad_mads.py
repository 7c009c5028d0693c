#!/usr/bin/env python3
"""Malformed and unanswerable MADs to an InfiniBand port of urnic, through
the umad API (issue 51; tests/acceptance/ib_sma_test.sh runs it with urnic's
libibumad.so.3 on LD_LIBRARY_PATH).

usage: ib_bad_mads.py DEVICE (an InfiniBand device with a cable to another)

Each case sends one MAD as a management tool would (umad_send) and checks
what comes back: the IBA 13.4.7 status of the SMA's response, the request
returned with ETIMEDOUT where nothing can answer (the kernel does the same
after the request's timeout), or umad_send's own refusal. Prints one
"ok"/"FAIL" line per case; exit status 1 if any failed. A well-formed
NodeInfo Get is answered after all of them (the daemon survived)."""
import ctypes
import errno
import struct
import sys

DR, LID_ROUTED = 0x81, 0x01
GET = 0x01
NODE_INFO = 0x0011
TID = 0x0000_0000_5EED_0001

lib = ctypes.CDLL("libibumad.so.3")
lib.umad_open_port.argtypes = [ctypes.c_char_p, ctypes.c_int]
lib.umad_register.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_uint8, ctypes.c_void_p]
lib.umad_send.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int]
lib.umad_recv.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int), ctypes.c_int]
lib.umad_set_addr.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
lib.umad_status.argtypes = [ctypes.c_void_p]
HDR = lib.umad_size()

failed = 0


def check(ok, what):
    global failed
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failed += 1


def smp(mgmt_class=DR, method=GET, attr=NODE_INFO, base=1, version=1, hop_ptr=0, hop_cnt=0, path=(), tid=TID):
    mad = bytearray(256)
    struct.pack_into(">BBBBHBBQHHI", mad, 0, base, mgmt_class, version, method, 0, hop_ptr, hop_cnt, tid, attr, 0, 0)
    if mgmt_class == DR:
        struct.pack_into(">HH", mad, 32, 0xFFFF, 0xFFFF)  # DrSLID, DrDLID: permissive (after the M_Key)
        for hop, port in enumerate(path, start=1):
            mad[128 + hop] = port  # initial path
    return bytes(mad)


def send(port, agent, mad, lid=0xFFFF, timeout_ms=200):
    buf = ctypes.create_string_buffer(HDR + 256)
    lib.umad_set_addr(buf, lid, 0, 0, 0)
    ctypes.memmove(ctypes.addressof(buf) + HDR, mad, len(mad))
    return lib.umad_send(port, agent, buf, len(mad), timeout_ms, 0)


def recv(port):
    buf = ctypes.create_string_buffer(HDR + 256)
    length = ctypes.c_int(256)
    rc = lib.umad_recv(port, buf, ctypes.byref(length), 2000)
    if rc < 0:
        return rc, None, None
    return rc, lib.umad_status(buf), buf.raw[HDR:HDR + length.value]


def mad_status(mad):
    return struct.unpack_from(">H", mad, 4)[0]


def main():
    port = lib.umad_open_port(sys.argv[1].encode(), 1)
    if port < 0:
        print(f"FAIL umad_open_port: {port}")
        return 1
    dr = lib.umad_register(port, DR, 1, 0, None)
    lid = lib.umad_register(port, LID_ROUTED, 1, 0, None)
    check(dr >= 0 and lid >= 0, f"agents registered (DR {dr}, LID-routed {lid})")

    # Answered with IBA 13.4.7's status (the D bit set: a DR response).
    for what, mad, want in [
        ("class version 2: bad version", smp(version=2), 0x8004),
        ("unknown attribute 0xFF: unsupported method/attribute", smp(attr=0x00FF), 0x800C),
        ("method Send: unsupported method", smp(method=0x03), 0x8008),
        ("NodeInfo Set (read-only): unsupported method/attribute", smp(method=0x02), 0x800C),
    ]:
        rc = send(port, dr, mad)
        got, status, reply = recv(port)
        check(rc == 0 and got == dr and status == 0 and reply is not None and reply[3] == 0x81
              and mad_status(reply) == want and reply[8:16] == mad[8:16],
              f"{what}: status 0x{mad_status(reply) if reply else 0:04x} (want 0x{want:04x}), TID kept")

    # Dropped by the SMA: the request comes back timed out.
    for what, agent, mad, dlid in [
        ("DR hop pointer 2 beyond hop count 1", dr, smp(hop_ptr=2, hop_cnt=1), 0xFFFF),
        ("DR hop count 64 (paths hold 63)", dr, smp(hop_cnt=64), 0xFFFF),
        ("DR out of port 2 (a CA has port 1 only)", dr, smp(hop_cnt=1, path=(2,)), 0xFFFF),
        ("DR 2 hops (the CA at the cable's end forwards nothing)", dr, smp(hop_cnt=2, path=(1, 1)), 0xFFFF),
        ("LID-routed to a LID that is not the port's", lid, smp(mgmt_class=LID_ROUTED), 0x1234),
    ]:
        rc = send(port, agent, mad, lid=dlid)
        got, status, reply = recv(port)
        check(rc == 0 and got == agent and status == errno.ETIMEDOUT and reply == mad,
              f"{what}: dropped, returned with ETIMEDOUT (status {status})")

    # A GSI request (PerfMgt PortCounters) to a LID no port has: nothing
    # answers it, not this port's own PMA.
    perf = lib.umad_register(port, 0x04, 1, 0, None)
    pc = smp(mgmt_class=0x04, attr=0x0012)
    rc = send(port, perf, pc, lid=0x1234)
    got, status, reply = recv(port)
    check(perf >= 0 and rc == 0 and got == perf and status == errno.ETIMEDOUT and reply == pc,
          f"PortCounters Get to a LID no port has: returned with ETIMEDOUT (status {status})")

    # Refused by umad_send, as ib_umad's write() refuses them.
    check(send(port, dr, smp(base=2)) == -errno.EINVAL, "base version 2: umad_send fails with EINVAL")
    check(send(port, dr, smp()[:16]) == -errno.EINVAL, "a MAD of 16 bytes: umad_send fails with EINVAL")

    # Still answering.
    rc = send(port, dr, smp(tid=TID + 1))
    got, status, reply = recv(port)
    check(rc == 0 and status == 0 and reply is not None and mad_status(reply) == 0x8000 and reply[64 + 2] == 1,
          "NodeInfo Get answered after all of them (node type CA)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
