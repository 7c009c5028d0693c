#!/usr/bin/python3
# tests/acceptance/spoof_peer.py ROLE DEVICE: one party of
# security_spoof_test.sh (issue 18), driven by JSON lines on stdin/stdout
# (by `drive`, below).
#   victim: a UC QP and a 4 KiB MR ('v' bytes, remote write) on DEVICE;
#           says {"qpn", "rkey", "addr"}; takes {"peer_qpn", "peer_gid"} and
#           connects to that peer only, says {"ready": true}; then for each
#           "check" says {"intact": bool, "first": CHAR}; ends at EOF.
#   writer: a UC QP on DEVICE; says {"qpn"}; takes {"dest_qpn", "dest_gid",
#           "rkey", "addr", "fill"} and RDMA-WRITEs 4 KiB of `fill` there,
#           says {"done": STATUS}.
# UC: no ACK or NAK, so the writer completes whatever became of its data;
# only the victim's memory and counters tell.
import json
import os
import subprocess
import sys
import time

from pyverbs.addr import AHAttr, GlobalRoute, GID
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, SendWR
import pyverbs.enums as e

LEN = 4096


def say(**kw):
    print(json.dumps(kw), flush=True)


def hear():
    line = sys.stdin.readline()
    return json.loads(line) if line else None


def connect(qp, dest_qpn, dest_gid):
    attr = QPAttr(qp_state=e.IBV_QPS_INIT)
    attr.qp_access_flags = e.IBV_ACCESS_REMOTE_WRITE
    attr.pkey_index = 0
    attr.port_num = 1
    qp.to_init(attr)
    attr = QPAttr(qp_state=e.IBV_QPS_RTR, path_mtu=e.IBV_MTU_1024)
    attr.dest_qp_num = dest_qpn
    attr.rq_psn = 0
    attr.ah_attr = AHAttr(gr=GlobalRoute(dgid=GID(dest_gid), sgid_index=1), is_global=1, port_num=1)
    qp.to_rtr(attr)
    attr = QPAttr(qp_state=e.IBV_QPS_RTS)
    attr.sq_psn = 0
    qp.to_rts(attr)


class Party:
    """A victim or writer in a namespace, through `ip netns exec`."""

    def __init__(self, ns, runtime_dir, role, device):
        env = dict(os.environ, URNIC_RUNTIME_DIR=runtime_dir)
        self.proc = subprocess.Popen(['ip', 'netns', 'exec', ns, sys.executable, __file__, role, device],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)

    def tell(self, **kw):
        self.proc.stdin.write(json.dumps(kw) + '\n')
        self.proc.stdin.flush()

    def hear(self):
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f'a party ended (exit {self.proc.wait()})')
        return json.loads(line)

    def end(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=20)


def drive(ns_a, rt_a, ns_b, rt_b, cli):
    """The attack and its control; prints PASS/FAIL lines for the script."""
    def wrong_peer():
        out = subprocess.run(['ip', 'netns', 'exec', ns_a, cli, 'stats', '-d', 'urnic0', '--json'],
                             env=dict(os.environ, URNIC_RUNTIME_DIR=rt_a), capture_output=True, text=True)
        return json.loads(out.stdout)['counters']['wrong_peer_pkts']

    victim = Party(ns_a, rt_a, 'victim', 'urnic0')
    legit = Party(ns_b, rt_b, 'writer', 'urnic0')
    attacker = Party(ns_b, rt_b, 'writer', 'urnic1')
    v, l, a = victim.hear(), legit.hear(), attacker.hear()
    victim.tell(peer_qpn=l['qpn'], peer_gid=l['gid'])
    victim.hear()
    aim = dict(dest_qpn=v['qpn'], dest_gid=v['gid'], rkey=v['rkey'], addr=v['addr'])

    def attempt(writer, fill):
        writer.tell(fill=fill, **aim)
        writer.hear()
        time.sleep(0.3)  # the daemon placed (or dropped) it long before
        victim.tell(check=True)
        return victim.hear()

    before = wrong_peer()
    got = attempt(attacker, 'A')
    after = wrong_peer()
    print(('PASS' if got['intact'] else 'FAIL') +
          f' an RDMA WRITE from {a["gid"]} (not the QP\'s peer) with the victim\'s R_Key: memory intact {got["intact"]}')
    print(('PASS' if after > before else 'FAIL') + f' dropped and counted: wrong_peer_pkts {before} -> {after}')
    got = attempt(legit, 'L')
    print(('PASS' if not got['intact'] and got['first'] == 'L' else 'FAIL') +
          f' the same WRITE from the connected peer {l["gid"]} lands: first byte {got["first"]!r}')
    for p in (victim, legit, attacker):
        p.end()


def main():
    if sys.argv[1] == 'drive':
        drive(*sys.argv[2:7])
        return
    role, device = sys.argv[1], sys.argv[2]
    ctx = Context(name=device)
    pd = PD(ctx)
    cq = CQ(ctx, 16)
    cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UC, scq=cq, rcq=cq, cap=cap))
    mr = MR(pd, LEN, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)
    if role == 'victim':
        mr.write(b'v' * LEN, LEN)
        say(qpn=qp.qp_num, rkey=mr.rkey, addr=mr.buf, gid=str(ctx.query_gid(1, 1)))
        peer = hear()
        connect(qp, peer['peer_qpn'], peer['peer_gid'])
        say(ready=True)
        while (cmd := hear()) is not None:
            data = mr.read(LEN, 0)
            say(intact=data == b'v' * LEN, first=chr(data[0]))
        return
    say(qpn=qp.qp_num, gid=str(ctx.query_gid(1, 1)))
    target = hear()
    if target is None:
        return
    connect(qp, target['dest_qpn'], target['dest_gid'])
    mr.write(target['fill'].encode() * LEN, LEN)
    wr = SendWR(opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(mr.buf, LEN, mr.lkey)],
                send_flags=e.IBV_SEND_SIGNALED)
    wr.set_wr_rdma(target['rkey'], target['addr'])
    qp.post_send(wr)
    while True:
        n, wcs = cq.poll()
        if n > 0:
            say(done=wcs[0].status)
            break
    hear()  # hold the QP until told


main()
