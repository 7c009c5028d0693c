// libFuzzer target for the InfiniBand switch (issue 51,
// engine/device/ib_switch.hpp): hostile packets on its ports, as its cables
// hand them over (LRH and CRCs already checked by the cable; what reaches
// the switch is a DLID, an SLID, a destination QP and a payload).
//
// A 4-port switch with every link up, fresh for each input. The input is a
// sequence of records: one byte (bits 0-2: the input port, 0 and 5..7 too,
// which the switch must ignore; bits 3-4: QP 0, 1, or a data QP; bit 5:
// a short payload), DLID and SLID (2 bytes each, big-endian), then 256
// bytes of payload (its first `len` bytes when short, len = the next byte).
// The switch must never touch memory outside what it was given, must send
// only out of ports 1..4, must forward frames unchanged, must send only
// 256-byte MADs, and must keep every port's state one of IBA's; anything
// else aborts (a finding), as does any sanitizer report.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "engine/device/ib_switch.hpp"

using namespace urnic;

namespace {

constexpr std::uint8_t kPorts = 4;
constexpr std::size_t kMad = engine::smp::kSize;

struct Checker final : engine::IbSwitchPorts {
  wire::Bytes expected;
  void forward(std::uint8_t port, wire::Bytes frame) override {
    if (port < 1 || port > kPorts) std::abort();
    if (frame.data() != expected.data() || frame.size() != expected.size()) std::abort();  // unchanged
  }
  void send_mad(std::uint8_t port, const engine::IbMadRoute& r, std::span<const std::uint8_t> mad) override {
    if (port < 1 || port > kPorts || mad.size() != kMad) std::abort();
    if (r.dest_qp == 0 && r.qkey != 0) std::abort();  // SMPs to QP0 with Q_Key 0
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Checker out;
  engine::IbSwitch sw(engine::IbNodeFacts{0x0275727300000001ULL, 0x0275727300000001ULL, 0x7572, 0x5357, 1, "sw"},
                      kPorts, out);
  for (std::uint8_t p = 1; p <= kPorts; ++p) sw.link_changed(p, true);
  std::array<std::uint8_t, 5 + kMad> record{};
  while (size >= 5 + kMad) {
    std::memcpy(record.data(), data, record.size());
    data += record.size();
    size -= record.size();
    const std::uint8_t flags = record[0];
    const auto in = static_cast<std::uint8_t>(flags & 7);
    const std::uint32_t qps[] = {0, 1, 0x11, 0x11};
    std::size_t len = kMad;
    if ((flags & 0x20) != 0) len = record[5];
    engine::LinkRxPacket pkt;
    pkt.ib.bth.dest_qp = qps[(flags >> 3) & 3];
    pkt.ib.bth.pkey = 0xFFFF;
    pkt.ib.deth.src_qp = 1;
    pkt.from.ib = true;
    pkt.from.dlid = static_cast<std::uint16_t>((record[1] << 8) | record[2]);
    pkt.from.slid = static_cast<std::uint16_t>((record[3] << 8) | record[4]);
    pkt.ib.payload = wire::Bytes(record.data() + 5, len);
    pkt.frame = wire::Bytes(record.data(), record.size());  // what it would forward
    out.expected = pkt.frame;
    sw.receive(in, pkt);
    for (std::uint8_t p = 0; p <= kPorts; ++p) {
      const auto s = static_cast<std::uint8_t>(sw.port(p).state());
      if (s < 1 || s > 4) std::abort();
    }
    if (sw.lid() > engine::kIbMaxUnicastLid) std::abort();
  }
  return 0;
}
