// MPA Request/Reply exchange and the RFC 5044 / RFC 6581 negotiation rules.
#include "transport/iwarp/mpa_setup.hpp"

#include <algorithm>
#include <array>
#include <cerrno>

namespace urnic::transport::iwarp {
namespace {

namespace mpa = wire::mpa;

// RFC 6581 section 5: 0x3FFF means "no value"; take our own wish then.
uint16_t limit(uint16_t own, uint16_t peer) noexcept {
  return peer == mpa::kIrdOrdNoValue ? own : std::min(own, peer);
}

bool valid_options(const MpaOptions& o) noexcept {
  return (o.revision == mpa::kRevision1 || o.revision == mpa::kRevision2) && o.ird <= mpa::kIrdOrdMax &&
         o.ord <= mpa::kIrdOrdMax;
}

}  // namespace

StreamParams MpaNegotiated::stream(uint32_t mss) const noexcept {
  StreamParams p;
  p.tx = tx;
  p.rx = rx;
  p.mss = mss;
  p.ord = ord;
  p.ird = ird;
  p.rtr = rtr;
  p.rfc7306 = rfc7306;
  return p;
}

MpaSetup::MpaSetup(Role role) : role_(role) {
  buf_.reserve(mpa::kHeaderSize + mpa::kMaxPrivateData);
  if (role_ == Role::kResponder) state_ = State::kAwaitRequest;
}

void MpaSetup::fail(MpaFailure why) noexcept {
  state_ = State::kFailed;
  failure_ = why;
}

bool MpaSetup::write_frame(const wire::MpaFrame& f, StreamSink& out) {
  std::array<uint8_t, mpa::kHeaderSize + mpa::kMaxPrivateData> frame{};
  auto n = wire::build_mpa_frame(f, frame);
  if (!n) return false;
  if (out.room() < *n) {
    fail(MpaFailure::kSinkFull);
    return false;
  }
  out.write(std::span<const uint8_t>(frame.data(), *n));
  return true;
}

int MpaSetup::start(const MpaOptions& opts, std::span<const uint8_t> private_data, StreamSink& out) {
  if (role_ != Role::kInitiator || state_ != State::kIdle || !valid_options(opts)) return EINVAL;
  wire::MpaFrame req;
  req.type = wire::MpaFrameType::kRequest;
  req.markers = opts.markers != MpaUse::kOff;
  req.crc = opts.crc != MpaUse::kOff;
  req.revision = opts.revision;
  if (opts.revision == mpa::kRevision2) {
    req.enhanced = req.enhanced_header = true;
    req.params.ird = opts.ird;
    req.params.ord = opts.ord;
    req.params.peer_to_peer = opts.peer_to_peer;
    // A zero-length Send would consume one of the peer's receive WQEs;
    // offer the two RTR types that do not (siw offers the same).
    req.params.rtr_write = req.params.rtr_read = opts.peer_to_peer;
  }
  if (opts.rfc7306 == Rfc7306Use::kOffer) req.reserved_flags |= mpa::kFlagUrnicRfc7306;
  req.private_data = private_data;
  if (req.pd_length() > mpa::kMaxPrivateData) return EINVAL;
  opts_ = opts;
  if (!write_frame(req, out)) return state_ == State::kFailed ? ENOBUFS : EINVAL;
  state_ = State::kAwaitReply;
  return 0;
}

std::size_t MpaSetup::feed(std::span<const uint8_t> in) {
  if (state_ != State::kAwaitRequest && state_ != State::kAwaitReply) return 0;
  std::size_t used = 0;
  // Header first (its PD_Length says how much more), then the rest.
  while (used < in.size()) {
    std::size_t want = mpa::kHeaderSize;
    if (buf_.size() >= mpa::kHeaderSize) {
      auto len = wire::mpa_frame_length(buf_);
      if (!len) {
        fail(MpaFailure::kMalformed);
        return used;
      }
      want = *len;
    }
    if (buf_.size() == want) break;
    const std::size_t n = std::min(want - buf_.size(), in.size() - used);
    buf_.insert(buf_.end(), in.begin() + static_cast<std::ptrdiff_t>(used),
                in.begin() + static_cast<std::ptrdiff_t>(used + n));
    used += n;
  }
  if (buf_.size() < mpa::kHeaderSize) return used;
  auto len = wire::mpa_frame_length(buf_);
  if (!len) {
    fail(MpaFailure::kMalformed);
    return used;
  }
  if (buf_.size() == *len) on_frame();
  return used;
}

void MpaSetup::on_frame() {
  auto f = wire::parse_mpa_frame(buf_);
  if (!f) return fail(MpaFailure::kMalformed);
  peer_ = *f;
  peer_pd_.assign(f->private_data.begin(), f->private_data.end());
  peer_.private_data = peer_pd_;
  if (role_ == Role::kResponder) {
    if (peer_.type != wire::MpaFrameType::kRequest || peer_.reject) return fail(MpaFailure::kUnexpectedFrame);
    state_ = State::kRequestReceived;
    return;
  }
  if (peer_.type != wire::MpaFrameType::kReply) return fail(MpaFailure::kUnexpectedFrame);
  // RFC 6581 section 7: a responder answers with a revision no higher than
  // the request's.
  if (peer_.revision > opts_.revision) return fail(MpaFailure::kMalformed);
  if (peer_.reject) {
    state_ = State::kRejected;
    return;
  }
  neg_.revision = peer_.revision;
  if (opts_.crc == MpaUse::kRequire && !peer_.crc) return fail(MpaFailure::kCrcRequired);
  // RFC 5044 7.1: CRC is used in both directions if either side set C.
  neg_.tx.crc = neg_.rx.crc = opts_.crc != MpaUse::kOff || peer_.crc;
  // M in a frame asks for markers in the stream its sender receives.
  neg_.tx.markers = peer_.markers;
  neg_.rx.markers = opts_.markers != MpaUse::kOff;
  neg_.ord = opts_.ord;
  neg_.ird = opts_.ird;
  // On only if we offered and the responder answered the offer.
  neg_.rfc7306 = opts_.rfc7306 == Rfc7306Use::kOffer && (peer_.reserved_flags & mpa::kFlagUrnicRfc7306) != 0;
  if (peer_.enhanced_header) {
    neg_.ord = limit(opts_.ord, peer_.params.ird);
    if (peer_.params.peer_to_peer) {
      if (!opts_.peer_to_peer) return fail(MpaFailure::kNoMatchingRtr);
      const wire::MpaEnhanced& p = peer_.params;
      const int picked = int{p.rtr_write} + int{p.rtr_read} + int{p.rtr_send};
      // RFC 6581 section 6: the reply picks exactly one of the offered types.
      if (picked != 1 || p.rtr_send) return fail(MpaFailure::kNoMatchingRtr);
      neg_.rtr = p.rtr_write ? Rtr::kSendWrite : Rtr::kSendRead;
    }
  }
  state_ = State::kEstablished;
}

int MpaSetup::accept(const MpaOptions& opts, std::span<const uint8_t> private_data, StreamSink& out) {
  if (role_ != Role::kResponder || state_ != State::kRequestReceived || !valid_options(opts)) return EINVAL;
  const wire::MpaFrame& req = peer_;
  wire::MpaFrame rep;
  rep.type = wire::MpaFrameType::kReply;
  rep.revision = std::min(req.revision, opts.revision);
  rep.crc = req.crc || opts.crc != MpaUse::kOff;
  rep.markers = opts.markers == MpaUse::kRequire || (opts.markers == MpaUse::kRequest && req.markers);
  neg_.revision = rep.revision;
  neg_.tx.crc = neg_.rx.crc = rep.crc;
  neg_.tx.markers = req.markers;
  neg_.rx.markers = rep.markers;
  neg_.ord = opts.ord;
  neg_.ird = opts.ird;
  // The bit goes back only to an initiator that offered it: a Reply to
  // anyone else is byte for byte the RFC 5044/6581 one.
  neg_.rfc7306 = opts.rfc7306 != Rfc7306Use::kOff && (req.reserved_flags & mpa::kFlagUrnicRfc7306) != 0;
  if (neg_.rfc7306) rep.reserved_flags |= mpa::kFlagUrnicRfc7306;
  if (rep.revision == mpa::kRevision2 && req.enhanced_header) {
    rep.enhanced = rep.enhanced_header = true;
    // RFC 6581 section 5: the responder's ORD must not exceed the
    // initiator's IRD.
    neg_.ord = limit(opts.ord, req.params.ird);
    rep.params.ird = neg_.ird;
    rep.params.ord = neg_.ord;
    if (req.params.peer_to_peer && opts.peer_to_peer) {
      // Prefer the zero-length Write: it needs no IRD slot at the responder.
      if (req.params.rtr_write) rep.params.rtr_write = true;
      else if (req.params.rtr_read) rep.params.rtr_read = true;
      if (rep.params.rtr_write || rep.params.rtr_read) {
        rep.params.peer_to_peer = true;
        neg_.rtr = Rtr::kAwait;
      }
    }
  }
  rep.private_data = private_data;
  if (rep.pd_length() > mpa::kMaxPrivateData) return EINVAL;
  opts_ = opts;
  if (!write_frame(rep, out)) return ENOBUFS;
  state_ = State::kEstablished;
  return 0;
}

int MpaSetup::reject(std::span<const uint8_t> private_data, StreamSink& out) {
  if (role_ != Role::kResponder || state_ != State::kRequestReceived) return EINVAL;
  wire::MpaFrame rep = wire::mpa_reject_reply(peer_, private_data);
  if (rep.pd_length() > mpa::kMaxPrivateData) return EINVAL;
  if (!write_frame(rep, out)) return ENOBUFS;
  state_ = State::kRejected;
  return 0;
}

}  // namespace urnic::transport::iwarp
