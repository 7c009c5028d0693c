// libFuzzer target for the control protocol (issue 18): every message a
// process can send urnicd, decoded and handled by a real Session on a
// control-only registry (the default devices, no data path), as a hostile
// client would send them. The input is a sequence of messages, each
//   [kind] [size tweak] [body bytes...]
// where `kind` picks a request type (its exact body size unless the tweak
// says otherwise: too short, too long, or the header lying about it) and
// the body comes from the input, zero-padded. Every input starts with a
// valid Hello and OpenDevice(urnic0) unless its first byte is odd, so that
// the object handlers are reached. Any crash, leak or sanitizer report is a
// finding; so is a reply that is not a well-formed reply to its request.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "hostif/cm_proto.hpp"
#include "hostif/ctl_proto.hpp"
#include "engine/device/device.hpp"
#include "engine/control/session.hpp"
#include "hostif/verbs_ext_proto.hpp"
#include "hostif/wq_proto.hpp"

using namespace urnic::engine;

using namespace urnic::hostif;

namespace {

struct Kind {
  std::uint16_t type;
  std::size_t size;
};

template <class... R>
constexpr std::array<Kind, sizeof...(R)> kinds() {
  return {Kind{static_cast<std::uint16_t>(R::kType), sizeof(R)}...};
}

// Every request but those that reach outside the process (CaptureReq
// writes a file; CM connect/resolve/listen/join may open sockets).
constexpr auto kKinds = kinds<
    ctl::HelloReq, ctl::ListDevicesReq, ctl::OpenDeviceReq, ctl::QueryPortReq, ctl::AllocPdReq, ctl::DeallocPdReq,
    ctl::RegMrReq, ctl::DeregMrReq, ctl::CreateCompChannelReq, ctl::DestroyCompChannelReq, ctl::CreateCqReq,
    ctl::DestroyCqReq, ctl::CreateQpReq, ctl::ModifyQpReq, ctl::QueryQpReq, ctl::DestroyQpReq, ctl::CreateSrqReq,
    ctl::ModifySrqReq, ctl::QuerySrqReq, ctl::DestroySrqReq, ctl::CreateAhReq, ctl::DestroyAhReq,
    ctl::AttachMcastReq, ctl::DetachMcastReq, ctl::StatusReq, ctl::StatsReq, ctl::FaultReq, ctl::CmStatsReq,
    ctl::ReregMrReq, ctl::ResizeCqReq, ctl::ImportDeviceReq, ctl::ImportPdReq, ctl::ImportMrReq, ctl::AllocMwReq,
    ctl::DeallocMwReq, ctl::OpenXrcdReq, ctl::CloseXrcdReq, ctl::CreateXrcSrqReq, ctl::CreateTmSrqReq,
    ctl::CreateXrcTgtQpReq, ctl::OpenQpReq, ctl::OpenConvertChannelReq, ctl::ConvertMrReq, ctl::OpenMailboxReq,
    ctl::CmCreateChannelReq, ctl::CmDestroyChannelReq, ctl::CmCreateIdReq,
    ctl::CmDestroyIdReq, ctl::CmBindReq, ctl::CmAcceptReq, ctl::CmRejectReq, ctl::CmDisconnectReq,
    ctl::CmEstablishReq, ctl::CmInitQpAttrReq, ctl::CmMigrateIdReq, ctl::CmSetOptionReq, ctl::CmQueryReq,
    ctl::CreateWqReq, ctl::ModifyWqReq, ctl::DestroyWqReq, ctl::CreateRwqIndTableReq, ctl::DestroyRwqIndTableReq,
    ctl::CreateRssQpReq>();

Registry& registry() {
  static Registry reg(default_config());
  return reg;
}

void require(bool ok) {
  if (!ok) std::abort();
}

void send(Session& s, std::vector<std::byte> msg, std::uint32_t seq, bool expect_valid) {
  std::vector<int> fds;
  Reply r = s.handle(msg, fds);
  for (int fd : r.fds) ::close(fd);
  const auto h = ctl::decode_header(r.bytes);
  require(h.has_value() && (h->flags & ctl::kFlagReply) != 0);
  if (expect_valid) require(h->seq == seq);
}

template <class Req>
std::vector<std::byte> valid(const Req& req, std::uint32_t seq) {
  return ctl::encode(req, seq);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Session s(registry(), ::getpid(), 1);
  std::uint32_t seq = 0;
  std::size_t pos = 0;
  if (size == 0 || (data[0] & 1) == 0) {
    // seq is advanced before the call: as an argument next to ++seq its value
    // would be unsequenced.
    ++seq;
    send(s, valid(ctl::HelloReq{ctl::kMagic, ctl::kVersion, 0, ctl::kCapSharedRings}, seq), seq, true);
    ctl::OpenDeviceReq open{};
    ctl::set_name(open.name, "urnic0");
    ++seq;
    send(s, valid(open, seq), seq, true);
  }
  if (size > 0) pos = 1;
  while (pos + 2 <= size) {
    const Kind k = kKinds[data[pos] % kKinds.size()];
    const std::uint8_t tweak = data[pos + 1];
    pos += 2;
    std::size_t body = k.size;
    std::uint32_t claimed = static_cast<std::uint32_t>(k.size);
    switch (tweak & 3) {
      case 1: body = k.size / 2; claimed = static_cast<std::uint32_t>(body); break;  // short
      case 2: body = k.size + 8; claimed = static_cast<std::uint32_t>(body); break;  // long
      case 3: claimed = static_cast<std::uint32_t>(k.size) + tweak; break;            // header lies
      default: break;
    }
    body = std::min<std::size_t>(body, ctl::kMaxMessage - sizeof(ctl::MsgHeader));
    const ctl::MsgHeader h{k.type, static_cast<std::uint16_t>((tweak & 4) != 0 ? ctl::kFlagReply : 0), ++seq, 0,
                           claimed};
    std::vector<std::byte> msg(sizeof h + body);
    std::memcpy(msg.data(), &h, sizeof h);
    const std::size_t take = std::min(body, size - pos);
    if (take > 0) std::memcpy(msg.data() + sizeof h, data + pos, take);
    pos += take;
    std::vector<int> fds;
    Reply r = s.handle(msg, fds);
    for (int fd : r.fds) ::close(fd);
    require(ctl::decode_header(r.bytes).has_value());
    if (r.close_after) break;  // the daemon hangs up on a protocol violation
  }
  return 0;
}
