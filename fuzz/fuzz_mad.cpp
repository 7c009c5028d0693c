// libFuzzer target for the MAD and CM codecs (wire/mad.hpp, wire/cm.hpp).
//
// The input is tried three ways: as a RoCE frame (the seed corpus is every
// frame of the reference captures; a UD payload of 256 bytes is taken as a
// MAD), as a MAD, and as a bare 232-byte CM message of every type. What
// parses is re-encoded:
//  - a MAD from its header values + data must come back byte for byte;
//  - a CM message decoded, encoded and decoded again must give the same
//    values, and encoding those again the same bytes (reserved bits of the
//    input are dropped by design, so the first encoding may differ there).
// Any mismatch aborts (a finding), as does any sanitizer report.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "wire/cm.hpp"
#include "wire/mad.hpp"
#include "wire/roce_frame.hpp"

using namespace urnic::wire;

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

template <class Msg>
void fuzz_cm_message(Bytes data) {
  auto v = Msg::View::parse(data);
  if (!v) return;
  const Msg first = decode_cm(*v);
  std::array<uint8_t, cm::kMsgSize> a{};
  std::array<uint8_t, cm::kMsgSize> b{};
  encode_cm(first, typename Msg::MutView(a.data()));
  const Msg second = decode_cm(typename Msg::View(a.data()));
  require(second == first);
  encode_cm(second, typename Msg::MutView(b.data()));
  require(a == b);
}

void fuzz_cm_messages(Bytes data) {
  fuzz_cm_message<CmReq>(data);
  fuzz_cm_message<CmMra>(data);
  fuzz_cm_message<CmRej>(data);
  fuzz_cm_message<CmRep>(data);
  fuzz_cm_message<CmRtu>(data);
  fuzz_cm_message<CmDreq>(data);
  fuzz_cm_message<CmDrep>(data);
  fuzz_cm_message<CmLap>(data);
  fuzz_cm_message<CmApr>(data);
  fuzz_cm_message<CmSidrReq>(data);
  fuzz_cm_message<CmSidrRep>(data);
}

void fuzz_ip_cm_header(Bytes data) {
  auto h = parse_ip_cm_header(data);
  if (!h) return;
  std::array<uint8_t, rdma_cm::kIpHeaderSize> out{};
  require(build_ip_cm_header(*h, out).ok());
  auto again = parse_ip_cm_header(out);
  require(again.ok() && *again == *h);
}

void fuzz_mad(Bytes data) {
  auto hdr = parse_mad(data);
  if (!hdr) return;
  std::array<uint8_t, mad::kMadSize> out{};
  require(build_mad(*hdr, data.subspan(mad::kHeaderSize), out).ok());
  require(std::equal(out.begin(), out.end(), data.begin(), data.end()));

  auto cmm = parse_cm_mad(data);
  if (!cmm) return;
  std::array<uint8_t, mad::kMadSize> a{};
  require(build_cm_mad(cmm->header, cmm->message, a).ok());
  // The header comes back exactly; the message up to reserved bits.
  require(std::equal(a.begin(), a.begin() + mad::kHeaderSize, data.begin()));
  auto again = parse_cm_mad(a);
  require(again.ok());
  require(again->header == cmm->header && again->message == cmm->message);
  std::array<uint8_t, mad::kMadSize> b{};
  require(build_cm_mad(again->header, again->message, b).ok());
  require(a == b);
  if (const auto* req = std::get_if<CmReq>(&cmm->message)) fuzz_ip_cm_header(req->private_data);
  if (const auto* sidr = std::get_if<CmSidrReq>(&cmm->message)) fuzz_ip_cm_header(sidr->private_data);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Bytes in(data, size);
  if (auto frame = parse_roce_frame(in); frame.ok() && frame->ib.payload.size() == mad::kMadSize) {
    fuzz_mad(frame->ib.payload);
  }
  fuzz_mad(in);
  fuzz_cm_messages(in);
  if (size > mad::kHeaderSize) fuzz_cm_messages(in.subspan(mad::kHeaderSize));
  fuzz_ip_cm_header(in);
  return 0;
}
