/* The xdp link's XDP program (engine/link/xdp_link.hpp), compiled at build
 * time with clang -target bpf and embedded in urnicd: RoCE frames
 * (xdp_roce_match.h) go to the AF_XDP socket of their receive queue,
 * everything else to the kernel (XDP_PASS), so the host's own traffic and
 * its ARP / neighbour discovery, which the link relies on, are untouched
 * (libxdp's default program would take every frame of the queue). A queue
 * without a socket in the map passes its frames to the kernel too. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "xdp_roce_match.h"

struct {
  __uint(type, BPF_MAP_TYPE_XSKMAP);
  __uint(max_entries, 64);
  __type(key, __u32);
  __type(value, __u32);
} urnic_xsks SEC(".maps");

SEC("xdp")
int urnic_roce_steer(struct xdp_md *ctx) {
  const unsigned char *data = (const unsigned char *)(long)ctx->data;
  const unsigned char *end = (const unsigned char *)(long)ctx->data_end;
  if (!urnic_xdp_is_roce(data, end)) return XDP_PASS;
  return bpf_redirect_map(&urnic_xsks, ctx->rx_queue_index, XDP_PASS);
}

char _license[] SEC("license") = "Dual BSD/GPL";
