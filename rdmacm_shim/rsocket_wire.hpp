// What an rsocket stream puts on the wire: the formats rdma-core's
// librdmacm (rsocket.c, protocol version 1) speaks, so a urnic rsocket and
// a kernel host's rsocket can talk to each other. Pure encodings and the
// small arithmetic of the flow control; no verbs, no I/O (unit-tested in
// tests/rdmacm/rsocket_wire_test.cpp).
//
// The protocol, from the receiver's point of view:
// - The connect private data (REQ and REP) is a 40-byte ConnData: version,
//   flags, the receive credits (receive WQEs) granted, the iomap table size,
//   where the peer may write buffer descriptors (target_sgl: an array of
//   kSglSize Sge followed by the iomap table, one MR) and the first half of
//   the receive buffer (data_buf). Multi-byte fields big-endian.
// - Data is an RDMA WRITE WITH IMMEDIATE into the advertised half of the
//   peer's receive buffer; the immediate (a Msg) says kData and the length.
//   The stream fills each advertised region completely, in order.
// - Credits: a receiver that has consumed half its buffer writes the next
//   half's Sge into the sender's target_sgl (slot 1, 0, 1, ...) with an
//   immediate kSgl carrying the new credit limit (a 16-bit sequence number:
//   the sender may send messages until its sequence number reaches it);
//   credits alone are a zero-length write with immediate kSgl.
// - kCtrl messages: shutdown (no more writes from the sender), disconnect,
//   keepalive; zero-length writes with immediate.
// - iomap: riomap()ped regions are announced by writing an IomapEntry into
//   the peer's iomap table (immediate kIomapSgl + index); riowrite() is a
//   plain RDMA WRITE into them (no immediate: the application synchronises).
// - On transports without write-with-immediate (iWARP) every immediate is
//   sent instead as a 4-byte SEND carrying the Msg (host order, which is
//   what rdma-core on little-endian hosts sends), after the write if any.
// Sge and IomapEntry stored in a peer's memory are in that peer's byte
// order; ConnData's flags say whether it is big-endian (kConnFlagNet).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <bit>
#include <optional>
#include <span>

#include "wire/bytes.hpp"

namespace urnic::rsocket {

// ---------------------------------------------------------------- constants

inline constexpr std::uint8_t kVersion = 1;
inline constexpr std::uint8_t kConnFlagNet = 1 << 0;    // the sender is big-endian
inline constexpr std::uint8_t kConnFlagIomap = 1 << 1;  // target_sgl is followed by an iomap table
inline constexpr std::uint32_t kSglSize = 2;            // receive-buffer descriptors in target_sgl
inline constexpr std::uint32_t kQpCtrlSize = 4;         // control messages in flight at most
inline constexpr std::uint32_t kQpMinSize = 16;
inline constexpr std::uint32_t kQpMaxSize = 0xFFFE;
inline constexpr std::uint32_t kSndLowat = 2048;        // send only with this much send buffer free
inline constexpr std::uint32_t kOlapStartSize = 2048;   // first write of a large send
inline constexpr std::uint32_t kMaxTransfer = 65536;    // writes grow (doubling) up to this
inline constexpr std::uint32_t kMsgSize = 4;            // a Msg sent as a SEND (iWARP)
inline constexpr std::uint32_t kConnRetries = 6;

inline constexpr std::size_t kSgeBytes = 16;      // addr u64, key u32, length u32
inline constexpr std::size_t kIomapBytes = 24;    // offset u64, Sge
inline constexpr std::size_t kConnDataBytes = 40;

// Defaults of rdma-core 44 (before /etc/rdma/rsocket/* overrides).
inline constexpr std::uint32_t kDefaultInline = 64;
inline constexpr std::uint32_t kDefaultSqSize = 384;
inline constexpr std::uint32_t kDefaultRqSize = 384;
inline constexpr std::uint32_t kDefaultMem = 1 << 17;   // receive buffer
inline constexpr std::uint32_t kDefaultWmem = 1 << 17;  // send buffer

// ---------------------------------------------------------------- messages

// The 32-bit immediate: bits 31..29 the operation, 28..0 its data
// (kData: bytes written; kSgl: credit limit; kIomapSgl: table index;
// kCtrl: a Ctrl).
enum class Op : std::uint8_t {
  kData = 0,
  kDataMore = 1,  // reserved
  kWrite = 2,     // a riowrite: never sent, marks its send completion
  kDraMore = 3,   // reserved
  kSgl = 4,
  kReserved = 5,
  kIomapSgl = 6,
  kCtrl = 7,
};

enum class Ctrl : std::uint32_t { kDisconnect = 0, kKeepalive = 1, kShutdown = 2 };

inline constexpr std::uint32_t kMsgDataMask = 0x1FFFFFFF;

constexpr std::uint32_t msg_make(Op op, std::uint32_t data) {
  return (static_cast<std::uint32_t>(op) << 29) | (data & kMsgDataMask);
}
constexpr Op msg_op(std::uint32_t msg) { return static_cast<Op>(msg >> 29); }
constexpr std::uint32_t msg_data(std::uint32_t msg) { return msg & kMsgDataMask; }

// ---------------------------------------------------------------- sequence numbers

// Credits are 16-bit sequence numbers compared modulo 2^16.
constexpr bool seq_reached(std::uint16_t seq, std::uint16_t limit) {
  return static_cast<std::int16_t>(static_cast<std::uint16_t>(seq - limit)) >= 0;
}

// ---------------------------------------------------------------- scale

// The 8-bit iomap size in ConnData: values up to 128 as they are, larger
// ones as 0x80 | (value >> 8), decoding to (scale & 0x7f) << 8.
constexpr std::uint8_t value_to_scale(std::uint32_t value) {
  return static_cast<std::uint8_t>(value <= 0x80 ? value : (0x80 | (value >> 8)));
}
constexpr std::uint32_t scale_to_value(std::uint8_t scale) {
  return scale <= 0x80 ? scale : (static_cast<std::uint32_t>(scale & 0x7f) << 8);
}

// ---------------------------------------------------------------- descriptors

struct Sge {
  std::uint64_t addr = 0;
  std::uint32_t key = 0;
  std::uint32_t length = 0;
  friend bool operator==(const Sge&, const Sge&) = default;
};

struct IomapEntry {
  std::uint64_t offset = 0;  // the riomap offset the region is addressed by
  Sge sge;
  friend bool operator==(const IomapEntry&, const IomapEntry&) = default;
};

namespace detail {
inline std::uint64_t load64(const std::uint8_t* p, bool big) { return big ? wire::load_be64(p) : wire::load_le<8>(p); }
inline std::uint32_t load32(const std::uint8_t* p, bool big) {
  return big ? wire::load_be32(p) : static_cast<std::uint32_t>(wire::load_le<4>(p));
}
inline void store64(std::uint8_t* p, std::uint64_t v, bool big) {
  if (big) wire::store_be64(p, v);
  else wire::store_le<8>(p, v);
}
inline void store32(std::uint8_t* p, std::uint32_t v, bool big) {
  if (big) wire::store_be32(p, v);
  else wire::store_le<4>(p, v);
}
}  // namespace detail

// An Sge as the owner of the memory (byte order `big_endian`) reads it.
inline Sge load_sge(std::span<const std::uint8_t, kSgeBytes> b, bool big_endian) {
  return Sge{detail::load64(b.data(), big_endian), detail::load32(b.data() + 8, big_endian),
             detail::load32(b.data() + 12, big_endian)};
}
inline void store_sge(std::span<std::uint8_t, kSgeBytes> b, const Sge& s, bool big_endian) {
  detail::store64(b.data(), s.addr, big_endian);
  detail::store32(b.data() + 8, s.key, big_endian);
  detail::store32(b.data() + 12, s.length, big_endian);
}
inline IomapEntry load_iomap(std::span<const std::uint8_t, kIomapBytes> b, bool big_endian) {
  return IomapEntry{detail::load64(b.data(), big_endian), load_sge(b.subspan<8, kSgeBytes>(), big_endian)};
}
inline void store_iomap(std::span<std::uint8_t, kIomapBytes> b, const IomapEntry& e, bool big_endian) {
  detail::store64(b.data(), e.offset, big_endian);
  store_sge(b.subspan<8, kSgeBytes>(), e.sge, big_endian);
}

// ---------------------------------------------------------------- connect private data

struct ConnData {
  std::uint8_t version = kVersion;
  std::uint8_t flags = 0;
  std::uint16_t credits = 0;       // receive credits granted (the RQ size)
  std::uint8_t iomap_scale = 0;    // value_to_scale(iomap table entries)
  Sge target_sgl;                  // length = number of Sge slots (kSglSize)
  Sge data_buf;                    // the first region the peer may write
  friend bool operator==(const ConnData&, const ConnData&) = default;
};

// Layout: version u8, flags u8, credits be16, reserved[3], iomap scale u8,
// target_sgl {addr be64, key be32, length be32}, data_buf {same}.
inline void encode_conn_data(const ConnData& c, std::span<std::uint8_t, kConnDataBytes> out) {
  std::uint8_t* p = out.data();
  p[0] = c.version;
  p[1] = c.flags;
  wire::store_be16(p + 2, c.credits);
  p[4] = p[5] = p[6] = 0;
  p[7] = c.iomap_scale;
  store_sge(out.subspan<8, kSgeBytes>(), c.target_sgl, true);
  store_sge(out.subspan<24, kSgeBytes>(), c.data_buf, true);
}

// nullopt when the private data is too short to hold one (the caller
// rejects a version other than kVersion).
inline std::optional<ConnData> decode_conn_data(std::span<const std::uint8_t> in) {
  if (in.size() < kConnDataBytes) return std::nullopt;
  const std::uint8_t* p = in.data();
  ConnData c;
  c.version = p[0];
  c.flags = p[1];
  c.credits = wire::load_be16(p + 2);
  c.iomap_scale = p[7];
  c.target_sgl = load_sge(in.subspan<8, kSgeBytes>(), true);
  c.data_buf = load_sge(in.subspan<24, kSgeBytes>(), true);
  return c;
}

// ---------------------------------------------------------------- datagram rsockets

// Every datagram a SOCK_DGRAM rsocket sends over UD starts with a DsHeader
// naming its sender (the receiver's recvfrom source): version (4 or 6), the
// header's length (8 or 24), the port, then the IPv4 address, or the IPv6
// flow info and address; port, address and flow info in network byte order,
// as in a sockaddr. A datagram to a peer whose QP is not known yet goes over
// the socket's kernel UDP socket instead, behind a DsUdpHeader: the tag
// 0x55555555 (be32), version, op (Op::kData with the payload behind it;
// Op::kCtrl alone: "this is my QP"), the header's length (16 or 28), a
// reserved byte, the sender's QP number (be32, low 24 bits) and the address
// its QP is bound to (4 or 16 bytes).
inline constexpr std::size_t kDsHdrV4 = 8;
inline constexpr std::size_t kDsHdrV6 = 24;
inline constexpr std::size_t kDsUdpHdrV4 = 16;
inline constexpr std::size_t kDsUdpHdrV6 = 28;
inline constexpr std::uint32_t kDsUdpTag = 0x55555555;

// The DsHeader of `addr` (AF_INET or AF_INET6) into `out` (at least
// kDsHdrV6 bytes); its length, 0 for another family.
inline std::size_t encode_ds_header(const sockaddr* addr, std::span<std::uint8_t, kDsHdrV6> out) {
  std::uint8_t* p = out.data();
  if (addr->sa_family == AF_INET) {
    sockaddr_in in{};
    std::memcpy(&in, addr, sizeof in);
    p[0] = 4;
    p[1] = kDsHdrV4;
    std::memcpy(p + 2, &in.sin_port, 2);
    std::memcpy(p + 4, &in.sin_addr, 4);
    return kDsHdrV4;
  }
  if (addr->sa_family != AF_INET6) return 0;
  sockaddr_in6 in6{};
  std::memcpy(&in6, addr, sizeof in6);
  p[0] = 6;
  p[1] = kDsHdrV6;
  std::memcpy(p + 2, &in6.sin6_port, 2);
  std::memcpy(p + 4, &in6.sin6_flowinfo, 4);
  std::memcpy(p + 8, &in6.sin6_addr, 16);
  return kDsHdrV6;
}

// The sender a DsHeader names and the header's length; nullopt unless the
// version and length agree and the bytes hold the whole header.
struct DsSource {
  sockaddr_storage addr{};
  std::size_t length = 0;
};
inline std::optional<DsSource> decode_ds_header(std::span<const std::uint8_t> in) {
  if (in.size() < kDsHdrV4) return std::nullopt;
  const std::uint8_t* p = in.data();
  DsSource s;
  if (p[0] == 4 && p[1] == kDsHdrV4) {
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    std::memcpy(&sin.sin_port, p + 2, 2);
    std::memcpy(&sin.sin_addr, p + 4, 4);
    std::memcpy(&s.addr, &sin, sizeof sin);
    s.length = kDsHdrV4;
    return s;
  }
  if (p[0] != 6 || p[1] != kDsHdrV6 || in.size() < kDsHdrV6) return std::nullopt;
  sockaddr_in6 sin6{};
  sin6.sin6_family = AF_INET6;
  std::memcpy(&sin6.sin6_port, p + 2, 2);
  std::memcpy(&sin6.sin6_flowinfo, p + 4, 4);
  std::memcpy(&sin6.sin6_addr, p + 8, 16);
  std::memcpy(&s.addr, &sin6, sizeof sin6);
  s.length = kDsHdrV6;
  return s;
}

struct DsUdpHeader {
  Op op = Op::kData;
  std::uint32_t qpn = 0;
  std::size_t length = 0;  // kDsUdpHdrV4 or kDsUdpHdrV6
};

// The DsUdpHeader for a QP numbered `qpn` bound to `qp_addr`, into `out`;
// its length (0 for another family).
inline std::size_t encode_ds_udp_header(Op op, std::uint32_t qpn, const sockaddr* qp_addr,
                                        std::span<std::uint8_t, kDsUdpHdrV6> out) {
  std::uint8_t* p = out.data();
  wire::store_be32(p, kDsUdpTag);
  p[5] = static_cast<std::uint8_t>(op);
  p[7] = 0;
  wire::store_be32(p + 8, qpn & 0xFFFFFF);
  if (qp_addr->sa_family == AF_INET) {
    sockaddr_in in{};
    std::memcpy(&in, qp_addr, sizeof in);
    p[4] = 4;
    p[6] = kDsUdpHdrV4;
    std::memcpy(p + 12, &in.sin_addr, 4);
    return kDsUdpHdrV4;
  }
  if (qp_addr->sa_family != AF_INET6) return 0;
  sockaddr_in6 in6{};
  std::memcpy(&in6, qp_addr, sizeof in6);
  p[4] = 6;
  p[6] = kDsUdpHdrV6;
  std::memcpy(p + 12, &in6.sin6_addr, 16);
  return kDsUdpHdrV6;
}

// A DsUdpHeader that came from a sender of family `family`; nullopt unless
// the tag, the version (the sender's family) and the length agree and the
// bytes hold it.
inline std::optional<DsUdpHeader> decode_ds_udp_header(std::span<const std::uint8_t> in, int family) {
  if (in.size() < kDsUdpHdrV4 || wire::load_be32(in.data()) != kDsUdpTag) return std::nullopt;
  const std::uint8_t* p = in.data();
  const bool v4 = p[4] == 4 && family == AF_INET && p[6] == kDsUdpHdrV4;
  const bool v6 = p[4] == 6 && family == AF_INET6 && p[6] == kDsUdpHdrV6 && in.size() >= kDsUdpHdrV6;
  if (!v4 && !v6) return std::nullopt;
  return DsUdpHeader{static_cast<Op>(p[5] & 7), wire::load_be32(p + 8) & 0xFFFFFF, p[6]};
}

constexpr bool host_is_big_endian() { return std::endian::native == std::endian::big; }

}  // namespace urnic::rsocket
