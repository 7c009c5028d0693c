// libFuzzer target for the subnet management agent of an InfiniBand port
// (issue 51, engine/device/ib_sma.hpp): hostile SMPs from a local agent and
// from the cable, as the daemon's umad service hands them over.
//
// Two CA ports joined by a cable, fresh for each input. The input is a
// sequence of records: one byte (bit 0: the SMP comes from the cable rather
// than a local agent; bit 1: an SM runs on the port) and 256 bytes of SMP.
// Each record goes to the first port's SMA and, where the verdict says so,
// over the cable to the other and back, as UmadService::route_smp does.
// The SMA must never read or write outside the 256 bytes, must answer only
// with GetResp, must keep the TID, and must leave the port's LID unicast or
// 0 and its state one of IBA's; anything else aborts (a finding), as does
// any sanitizer report.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "engine/device/ib_port.hpp"
#include "engine/device/ib_sma.hpp"

using namespace urnic;
using engine::SmaVerdict;
using engine::SmpOrigin;

namespace {

constexpr std::size_t kSmp = engine::smp::kSize;

void check_port(const engine::IbPort& p) {
  if (p.lid() != 0 && !engine::ib_unicast_lid(p.lid())) std::abort();
  if (p.lmc() > 7 || p.sm_sl() > 15) std::abort();
  const auto s = static_cast<std::uint8_t>(p.state());
  if (s < 1 || s > 4) std::abort();
}

void check_reply(const std::array<std::uint8_t, kSmp>& m, const std::array<std::uint8_t, kSmp>& sent) {
  if (m[3] != 0x81) std::abort();                               // GetResp
  if (std::memcmp(&m[8], &sent[8], 8) != 0) std::abort();       // the TID kept
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  engine::IbPort a_port(0x0200757272'6e0001ULL, engine::kIbDefaultSubnetPrefix, {});
  engine::IbPort b_port(0x0200757272'6e0002ULL, engine::kIbDefaultSubnetPrefix, {});
  a_port.physical_up();
  b_port.physical_up();
  engine::IbSma a(a_port, engine::IbNodeFacts{1, 1, 0x7572, 1, 1, "a"});
  engine::IbSma b(b_port, engine::IbNodeFacts{2, 2, 0x7572, 1, 1, "b"});
  while (size >= 1 + kSmp) {
    const bool from_link = (data[0] & 1) != 0;
    a.set_sm_present((data[0] & 2) != 0);
    std::array<std::uint8_t, kSmp> sent{};
    std::memcpy(sent.data(), data + 1, kSmp);
    std::array<std::uint8_t, kSmp> m = sent;
    data += 1 + kSmp;
    size -= 1 + kSmp;
    const auto span = std::span<std::uint8_t, kSmp>(m);
    SmaVerdict v = a.handle(span, from_link ? SmpOrigin::kLink : SmpOrigin::kLocal);
    if (v == SmaVerdict::kReply || v == SmaVerdict::kReplyToLink) check_reply(m, sent);
    if (v == SmaVerdict::kToLink) {
      v = b.handle(span, SmpOrigin::kLink);
      if (v == SmaVerdict::kReplyToLink) {
        check_reply(m, sent);
        v = a.handle(span, SmpOrigin::kLink);
        if (v != SmaVerdict::kDeliverLocal) std::abort();  // its own answer must come home
      }
    }
    check_port(a_port);
    check_port(b_port);
  }
  return 0;
}
