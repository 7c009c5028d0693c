#!/usr/bin/python3
# bench/loss_model.py [LOSS...]: the loss-recovery model of an RC ping-pong
# (issue 24), by Monte Carlo: what a go-back-N requester and a responder
# that NAKs a PSN gap at once must cost at a given frame loss rate, against
# which transport/README.md ("Loss recovery") and the sim test "an 8 KiB
# RC ping-pong under 10 % loss costs what the loss model says" measure.
#
# One message is n packets, AckReq on the last (ack_req_every is 16), and
# its ACK; every frame (data, ACK, NAK) is lost with probability p:
# - a lost packet k < n is followed by packet k+1: the responder NAKs the
#   gap (PSN sequence error, once until the expected PSN arrives) and the
#   requester goes back to k at once: about one round trip;
# - the last packet, the ACK, or the NAK lost: nothing more arrives, and
#   only the ACK timeout T recovers; go-back-N then resends from the oldest
#   PSN not acknowledged (a NAK acknowledges what precedes its PSN), which
#   after a lost last packet or ACK is the whole message.
# Round trips are microseconds against T = 67 ms (timeout code 14), so a
# ping-pong iteration (two messages) costs 2 x (timeouts per message) x T.
import random
import sys


def message(p, n, rng):
    e = 0          # responder: next PSN expected
    acked = 0      # requester: PSNs below this are acknowledged
    s = 0          # requester: sends from here
    timeouts = 0
    nak_out = False
    while True:
        acked_all = False
        nak_psn = None
        for k in range(s, n):
            if rng.random() < p:
                continue
            if k == e:
                e += 1
                nak_out = False
                acked_all |= k == n - 1 and rng.random() >= p
            elif k > e:
                if not nak_out:
                    nak_out = True
                    if rng.random() >= p:
                        nak_psn = e
            else:  # a duplicate: the last packet is re-ACKed
                acked_all |= k == n - 1 and rng.random() >= p
        if acked_all:
            return timeouts
        if nak_psn is not None:
            acked = max(acked, nak_psn)
        else:
            timeouts += 1
            # the requester's ACK timer expired
        s = acked


def main():
    losses = [float(x) for x in sys.argv[1:]] or [0.01, 0.05, 0.1]
    rng = random.Random(24)
    iters = 200000
    print("| loss | packets per message | timeouts per message | ping-pong iteration at T = 67.1 ms [ms] |")
    print("|---|---|---|---|")
    for p in losses:
        for n in (1, 8):
            t = sum(message(p, n, rng) for _ in range(iters)) / iters
            print(f"| {p:g} | {n} | {t:.3f} | {2 * t * 67.1:.1f} |")


main()
