/* Which received frames the xdp link's XDP program steers to its AF_XDP
 * socket (engine/link/xdp_roce_steer.bpf.c): RoCE v1 (EtherType 0x8915),
 * RoCE v2 over IPv4 (UDP to 4791, not a fragment) and over IPv6 (UDP to
 * 4791 as the next header), untagged or behind one 802.1Q / 802.1ad tag.
 * Everything else (ARP, neighbour discovery, the host's own TCP/UDP, IPv4
 * fragments for the kernel to reassemble) stays the kernel's: XDP_PASS.
 *
 * Plain C, included by the BPF program (where the verifier checks every
 * access against `end`) and by the host's unit test (which attacks it with
 * truncated and odd frames): so no helpers, no byte-order macros, every
 * read bounded by an explicit check first, and no casts (the C++ build
 * warns on C-style ones): bytes widen by arithmetic. */
#ifndef URNIC_XDP_ROCE_MATCH_H
#define URNIC_XDP_ROCE_MATCH_H

#define URNIC_XDP_ETH_HLEN 14
#define URNIC_XDP_ROCE_V2_PORT 4791

/* 1 when the frame [p, end) is RoCE for the link, 0 otherwise. */
static inline int urnic_xdp_is_roce(const unsigned char *p, const unsigned char *end) {
  const unsigned char *l3;
  unsigned type;
  if (p + URNIC_XDP_ETH_HLEN > end) return 0;
  type = p[12] * 256u + p[13];
  l3 = p + URNIC_XDP_ETH_HLEN;
  if (type == 0x8100 || type == 0x88A8) {
    /* One VLAN tag: the EtherType follows it (the link checks the ID). */
    if (l3 + 4 > end) return 0;
    type = l3[2] * 256u + l3[3];
    l3 += 4;
  }
  if (type == 0x8915) return 1; /* RoCE v1: GRH + BTH, checked by the link */
  if (type == 0x0800) {
    const unsigned char *udp;
    unsigned ihl;
    if (l3 + 20 > end) return 0;
    if ((l3[0] >> 4) != 4 || l3[9] != 17) return 0;
    /* A fragment (MF or an offset): the kernel reassembles it. */
    if ((l3[6] & 0x3F) != 0 || l3[7] != 0) return 0;
    ihl = (l3[0] & 0x0Fu) * 4u;
    if (ihl < 20) return 0;
    udp = l3 + ihl;
    if (udp + 8 > end) return 0;
    return udp[2] * 256u + udp[3] == URNIC_XDP_ROCE_V2_PORT;
  }
  if (type == 0x86DD) {
    const unsigned char *udp = l3 + 40;
    if (udp + 8 > end) return 0;
    if ((l3[0] >> 4) != 6 || l3[6] != 17) return 0;
    return udp[2] * 256u + udp[3] == URNIC_XDP_ROCE_V2_PORT;
  }
  return 0;
}

#endif
