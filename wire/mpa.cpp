#include "wire/mpa.hpp"

#include <algorithm>

namespace urnic::wire {
namespace {

// RFC 5044 7.1 header after the key: |M|C|R|H|Res(4)| Rev(8) | PD_Length(16) |
using FlagsF = Field<16, 1, 8>;
using RevF = Field<17, 1, 8>;
using PdLenF = Field<18, 2, 16>;

// RFC 6581 section 5 enhanced header (offsets within the private data).
using P2pF = Field<0, 2, 1, 15>;
using RtrSendF = Field<0, 2, 1, 14>;
using IrdF = Field<0, 2, 14>;
using RtrWriteF = Field<2, 2, 1, 15>;
using RtrReadF = Field<2, 2, 1, 14>;
using OrdF = Field<2, 2, 14>;

bool key_is(Bytes in, std::string_view key) noexcept {
  return std::equal(key.begin(), key.end(), in.begin(),
                    [](char k, uint8_t b) { return static_cast<uint8_t>(k) == b; });
}

Result<MpaFrameType> frame_type(Bytes in) noexcept {
  if (key_is(in, mpa::kReqKey)) return MpaFrameType::kRequest;
  if (key_is(in, mpa::kRepKey)) return MpaFrameType::kReply;
  return WireError::kMalformed;
}

}  // namespace

Result<std::size_t> mpa_frame_length(Bytes in) noexcept {
  if (in.size() < mpa::kHeaderSize) return WireError::kTruncated;
  if (auto t = frame_type(in); !t) return t.error();
  const std::size_t pd_len = PdLenF::get(in.data());
  if (pd_len > mpa::kMaxPrivateData) return WireError::kOversized;
  return mpa::kHeaderSize + pd_len;
}

Result<MpaFrame> parse_mpa_frame(Bytes in) noexcept {
  auto len = mpa_frame_length(in);
  if (!len) return len.error();
  if (in.size() < *len) return WireError::kTruncated;
  MpaFrame f;
  f.type = *frame_type(in);
  const uint8_t flags = FlagsF::get(in.data());
  f.markers = (flags & mpa::kFlagMarkers) != 0;
  f.crc = (flags & mpa::kFlagCrc) != 0;
  f.reject = (flags & mpa::kFlagReject) != 0;
  f.enhanced = (flags & mpa::kFlagEnhanced) != 0;
  f.reserved_flags = flags & mpa::kFlagReservedMask;
  f.revision = RevF::get(in.data());
  // RFC 5044 7.1 defines revision 1; RFC 6581 adds revision 2. (Revision 0
  // was an old draft that no current peer speaks.)
  if (f.revision != mpa::kRevision1 && f.revision != mpa::kRevision2) return WireError::kBadVersion;
  Bytes pd = in.subspan(mpa::kHeaderSize, *len - mpa::kHeaderSize);
  f.enhanced_header = f.enhanced && f.revision == mpa::kRevision2;
  if (f.enhanced_header) {
    if (pd.size() < mpa::kEnhancedSize) return WireError::kBadLength;
    const uint8_t* e = pd.data();
    f.params.peer_to_peer = P2pF::get(e) != 0;
    f.params.rtr_send = RtrSendF::get(e) != 0;
    f.params.ird = IrdF::get(e);
    f.params.rtr_write = RtrWriteF::get(e) != 0;
    f.params.rtr_read = RtrReadF::get(e) != 0;
    f.params.ord = OrdF::get(e);
    pd = pd.subspan(mpa::kEnhancedSize);
  }
  f.private_data = pd;
  return f;
}

Result<std::size_t> build_mpa_frame(const MpaFrame& f, MutBytes out) noexcept {
  if (f.revision != mpa::kRevision1 && f.revision != mpa::kRevision2) return WireError::kBadVersion;
  if (f.enhanced_header && !(f.enhanced && f.revision == mpa::kRevision2)) return WireError::kMalformed;
  if (f.pd_length() > mpa::kMaxPrivateData) return WireError::kOversized;
  if (f.enhanced_header && (f.params.ird > mpa::kIrdOrdMax || f.params.ord > mpa::kIrdOrdMax))
    return WireError::kOversized;
  const std::size_t size = f.wire_size();
  if (out.size() < size) return WireError::kOversized;
  uint8_t* p = out.data();
  const std::string_view key = f.type == MpaFrameType::kRequest ? mpa::kReqKey : mpa::kRepKey;
  std::transform(key.begin(), key.end(), p, [](char c) { return static_cast<uint8_t>(c); });
  uint8_t flags = f.reserved_flags & mpa::kFlagReservedMask;
  if (f.markers) flags |= mpa::kFlagMarkers;
  if (f.crc) flags |= mpa::kFlagCrc;
  if (f.reject) flags |= mpa::kFlagReject;
  if (f.enhanced) flags |= mpa::kFlagEnhanced;
  FlagsF::set(p, flags);
  RevF::set(p, f.revision);
  PdLenF::set(p, f.pd_length());
  uint8_t* pd = p + mpa::kHeaderSize;
  if (f.enhanced_header) {
    store_be32(pd, 0);
    P2pF::set(pd, f.params.peer_to_peer);
    RtrSendF::set(pd, f.params.rtr_send);
    IrdF::set(pd, f.params.ird);
    RtrWriteF::set(pd, f.params.rtr_write);
    RtrReadF::set(pd, f.params.rtr_read);
    OrdF::set(pd, f.params.ord);
    pd += mpa::kEnhancedSize;
  }
  if (!f.private_data.empty()) std::copy(f.private_data.begin(), f.private_data.end(), pd);
  return size;
}

MpaFrame mpa_reject_reply(const MpaFrame& request, Bytes private_data) noexcept {
  MpaFrame r;
  r.type = MpaFrameType::kReply;
  r.reject = true;
  r.revision = request.revision;
  r.enhanced = request.enhanced_header;
  r.enhanced_header = request.enhanced_header;
  // A reject grants nothing: no IRD/ORD, no RTR type.
  r.params = MpaEnhanced{};
  r.private_data = private_data;
  return r;
}

}  // namespace urnic::wire
