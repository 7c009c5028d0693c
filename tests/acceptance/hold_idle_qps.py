#!/usr/bin/python3
# tests/acceptance/hold_idle_qps.py N READY_FILE SECONDS: creates N RC QPs on urnic0
# (pyverbs), connects them in pairs to each other over the device's GID 1
# (RoCE v2, ::ffff:127.0.0.1), writes READY_FILE with the creation and
# connection times, and holds them, idle, for SECONDS. For acceptance-idle-qps and bench/idle_qps.sh, scale_qps.sh.
import sys
import time

from pyverbs.addr import AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
import pyverbs.enums as e


def connect(qp, peer_qpn, gid):
    attr = QPAttr(qp_state=e.IBV_QPS_INIT)
    attr.qp_access_flags = e.IBV_ACCESS_REMOTE_WRITE
    attr.pkey_index = 0
    attr.port_num = 1
    qp.to_init(attr)
    attr = QPAttr(qp_state=e.IBV_QPS_RTR, path_mtu=e.IBV_MTU_1024)
    attr.dest_qp_num = peer_qpn
    attr.rq_psn = 0
    attr.max_dest_rd_atomic = 1
    attr.min_rnr_timer = 12
    attr.ah_attr = AHAttr(gr=GlobalRoute(dgid=gid, sgid_index=1), is_global=1, port_num=1)
    qp.to_rtr(attr)
    attr = QPAttr(qp_state=e.IBV_QPS_RTS)
    attr.sq_psn = 0
    attr.timeout = 14
    attr.retry_cnt = 7
    attr.rnr_retry = 7
    attr.max_rd_atomic = 1
    qp.to_rts(attr)


def main():
    n, ready, hold = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
    ctx = Context(name='urnic0')
    pd = PD(ctx)
    cq = CQ(ctx, 256)
    gid = ctx.query_gid(1, 1)
    cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
    t0 = time.monotonic()
    qps = [QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap)) for _ in range(n)]
    t1 = time.monotonic()
    for i in range(0, n - 1, 2):
        connect(qps[i], qps[i + 1].qp_num, gid)
        connect(qps[i + 1], qps[i].qp_num, gid)
    t2 = time.monotonic()
    with open(ready, 'w') as f:
        f.write(f'{t1 - t0:.2f} {t2 - t1:.2f}\n')
    time.sleep(hold)


main()
