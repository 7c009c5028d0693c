// Receive side scaling: the Toeplitz hash and its input (rss.hpp).
#include "engine/datapath/rss.hpp"

#include <infiniband/verbs.h>

#include <cerrno>

namespace urnic::engine {

std::uint32_t toeplitz_hash(std::span<const std::uint8_t> key, std::span<const std::uint8_t> input) noexcept {
  auto key_byte = [&](std::size_t i) -> std::uint32_t { return i < key.size() ? key[i] : 0U; };
  // `window`: key bits [i, i + 32) for the input bit i being looked at;
  // each input bit shifts it left by one and brings in the next key bit.
  std::uint32_t window = (key_byte(0) << 24) | (key_byte(1) << 16) | (key_byte(2) << 8) | key_byte(3);
  std::uint32_t hash = 0;
  for (std::size_t byte = 0; byte < input.size(); ++byte) {
    const std::uint32_t next = key_byte(byte + 4);
    for (int bit = 7; bit >= 0; --bit) {
      if ((input[byte] >> bit) & 1U) hash ^= window;
      window = (window << 1) | ((next >> bit) & 1U);
    }
  }
  return hash;
}

namespace {

constexpr std::uint64_t kIpv4Fields = IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4;
constexpr std::uint64_t kIpv6Fields = IBV_RX_HASH_SRC_IPV6 | IBV_RX_HASH_DST_IPV6;
constexpr std::uint64_t kTcpFields = IBV_RX_HASH_SRC_PORT_TCP | IBV_RX_HASH_DST_PORT_TCP;
constexpr std::uint64_t kUdpFields = IBV_RX_HASH_SRC_PORT_UDP | IBV_RX_HASH_DST_PORT_UDP;
constexpr std::uint8_t kProtoTcp = 6;
constexpr std::uint8_t kProtoUdp = 17;

template <std::size_t N>
void put(std::vector<std::uint8_t>& out, const std::array<std::uint8_t, N>& a) {
  out.insert(out.end(), a.begin(), a.end());
}

}  // namespace

bool rss_input(std::uint64_t fields, const FrameKey& k, std::vector<std::uint8_t>& out) {
  out.clear();
  if ((fields & kIpv4Fields) != 0) {
    if (k.l3 != hostif::flow::L3::kIpv4) return false;
    if ((fields & IBV_RX_HASH_SRC_IPV4) != 0) put(out, k.ip4_src);
    if ((fields & IBV_RX_HASH_DST_IPV4) != 0) put(out, k.ip4_dst);
  } else if ((fields & kIpv6Fields) != 0) {
    if (k.l3 != hostif::flow::L3::kIpv6) return false;
    if ((fields & IBV_RX_HASH_SRC_IPV6) != 0) put(out, k.ip6_src);
    if ((fields & IBV_RX_HASH_DST_IPV6) != 0) put(out, k.ip6_dst);
  }
  const std::uint64_t l4 = fields & (kTcpFields | kUdpFields);
  if (l4 != 0) {
    const std::uint8_t proto = (l4 & kTcpFields) != 0 ? kProtoTcp : kProtoUdp;
    if (k.l3 == hostif::flow::L3::kAny || k.ip_proto != proto || !k.has_ports) {
      out.clear();
      return false;
    }
    if ((fields & (IBV_RX_HASH_SRC_PORT_TCP | IBV_RX_HASH_SRC_PORT_UDP)) != 0) put(out, k.src_port);
    if ((fields & (IBV_RX_HASH_DST_PORT_TCP | IBV_RX_HASH_DST_PORT_UDP)) != 0) put(out, k.dst_port);
  }
  return !out.empty();
}

std::uint32_t rss_hash(const RssConf& c, const FrameKey& k, std::vector<std::uint8_t>& scratch) {
  if (!rss_input(c.fields, k, scratch)) return 0;
  return toeplitz_hash(c.key, scratch);
}

std::uint32_t rss_pick(const RssConf& c, const FrameKey& k, std::vector<std::uint8_t>& scratch) {
  if (c.wqns.empty()) return 0;
  return c.wqns[rss_hash(c, k, scratch) % c.wqns.size()];
}

int check_rx_hash(std::uint32_t function, std::uint32_t key_len, std::uint64_t fields) noexcept {
  if (function != IBV_RX_HASH_FUNC_TOEPLITZ) return EOPNOTSUPP;
  constexpr std::uint64_t kKnown = kIpv4Fields | kIpv6Fields | kTcpFields | kUdpFields;
  if ((fields & ~kKnown) != 0) return EOPNOTSUPP;  // IBV_RX_HASH_INNER, IPSEC_SPI, unknown bits
  if (key_len != 40) return EINVAL;
  if ((fields & kIpv4Fields) != 0 && (fields & kIpv6Fields) != 0) return EINVAL;
  if ((fields & kTcpFields) != 0 && (fields & kUdpFields) != 0) return EINVAL;
  return 0;
}

}  // namespace urnic::engine
