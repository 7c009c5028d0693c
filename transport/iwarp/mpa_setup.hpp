// MPA connection setup (RFC 5044 section 7.1, RFC 6581) as a pure state
// machine: the exchange of one MPA Request and one MPA Reply at the start of
// a fresh TCP stream, before either direction switches to FPDUs. The
// connection manager runs it (the request's private data must reach the
// listening application before a QP exists); the result feeds the QP's
// StreamParams.
//
//   initiator: start() -> kAwaitReply -> feed(reply) -> kEstablished | kRejected | kFailed
//   responder: feed(request) -> kRequestReceived -> accept() -> kEstablished
//                                                -> reject()  -> kRejected
//
// feed() consumes only the MPA frame: FPDUs that follow it in the same read
// are left to the caller (they belong to the QP).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "transport/iwarp/stream.hpp"
#include "wire/mpa.hpp"

namespace urnic::transport::iwarp {

// How this side uses an optional MPA feature (CRC, markers); for CRC the
// counterpart of siw's module parameter mpa_crc_required.
//
// CRC (RFC 5044 7.1.2: CRC is used in both directions if either side sets C):
//   kOff      C=0 in this side's frame; CRC is still used if the peer sets C.
//   kRequest  C=1 in this side's frame, so CRC is used.
//   kRequire  as kRequest; an initiator also fails the connection
//             (kCrcRequired) on a Reply with C=0, a responder that did not
//             agree (siw as initiator with mpa_crc_required does the same).
// Markers (M asks for markers in the stream the frame's sender receives;
// urnic inserts them whenever the peer asks, in any mode):
//   kOff      M=0: no markers in what this side receives.
//   kRequest  markers both ways if the peer does them: an initiator asks
//             (a responder that cannot insert them rejects, as siw does);
//             a responder asks only if the Request asked, so it never
//             fails an initiator without markers.
//   kRequire  M=1 in either role: the peer inserts them or refuses.
enum class MpaUse : uint8_t { kOff, kRequest, kRequire };

// The RFC 7306 extensions (atomics, Immediate Data). RFC 7306 leaves their
// negotiation to connection setup; urnic peers agree on them with a
// reserved MPA flag bit (wire::mpa::kFlagUrnicRfc7306) that RFC 5044
// receivers ignore, so the application's private data stays exactly its own:
//   kOff     never: every frame is what RFC 5044/6581 alone would send.
//   kAccept  a responder that sees the bit in the Request sets it in its
//            Reply; an initiator does not offer. Every byte sent to a peer
//            that did not offer first is as with kOff.
//   kOffer   as kAccept, and an initiator sets the bit in its Request; the
//            extensions are on iff the Reply carries it back (a peer that
//            does not know the bit never sets it).
enum class Rfc7306Use : uint8_t { kOff, kAccept, kOffer };

// What this side asks for or accepts.
struct MpaOptions {
  uint8_t revision = wire::mpa::kRevision2;  // 1 (RFC 5044) or 2 (RFC 6581)
  MpaUse crc = MpaUse::kRequest;
  MpaUse markers = MpaUse::kOff;
  uint16_t ird = 16;       // inbound Read Requests this side accepts at once
  uint16_t ord = 16;       // outbound Read Requests this side wants
  bool peer_to_peer = true;  // revision 2: negotiate an RTR message
  Rfc7306Use rfc7306 = Rfc7306Use::kOff;
};

// The outcome once both frames have been exchanged.
struct MpaNegotiated {
  uint8_t revision = wire::mpa::kRevision1;
  wire::FpduConfig tx;  // markers if the peer asked for them; CRC if either did
  wire::FpduConfig rx;
  uint16_t ord = 0;  // after RFC 6581 negotiation (never above the peer's IRD)
  uint16_t ird = 0;
  Rtr rtr = Rtr::kNone;
  bool rfc7306 = false;  // both sides speak the RFC 7306 extensions
  StreamParams stream(uint32_t mss) const noexcept;
};

// Why the exchange failed (kFailed); maps onto RFC 5044/6581 MPA error codes.
enum class MpaFailure : uint8_t {
  kNone,
  kMalformed,      // bad key, revision, length or reserved use: RFC 5044 "invalid request/reply"
  kUnexpectedFrame,  // a reply where a request was due or the other way round
  kNoMatchingRtr,  // RFC 6581: peer-to-peer offered/picked no RTR type both support
  kCrcRequired,    // initiator: this side requires CRC, the Reply has C=0
  kSinkFull,       // the stream could not take the frame
};

class MpaSetup {
 public:
  enum class Role : uint8_t { kInitiator, kResponder };
  enum class State : uint8_t { kIdle, kAwaitRequest, kAwaitReply, kRequestReceived, kEstablished, kRejected, kFailed };

  explicit MpaSetup(Role role);

  // Initiator: sends the MPA Request (private_data at most 512 bytes minus
  // the enhanced header). EINVAL for oversized private data or bad options.
  int start(const MpaOptions& opts, std::span<const uint8_t> private_data, StreamSink& out);

  // Stream bytes in; returns how many were consumed (the rest, if any, are
  // FPDUs for the QP). State changes tell the outcome.
  std::size_t feed(std::span<const uint8_t> in);

  // Responder, in kRequestReceived: answers the request.
  int accept(const MpaOptions& opts, std::span<const uint8_t> private_data, StreamSink& out);
  int reject(std::span<const uint8_t> private_data, StreamSink& out);

  State state() const noexcept { return state_; }
  MpaFailure failure() const noexcept { return failure_; }
  // The peer's frame (request on the responder, reply on the initiator),
  // its private data copied (without the enhanced header).
  const wire::MpaFrame& peer_frame() const noexcept { return peer_; }
  std::span<const uint8_t> peer_private_data() const noexcept { return peer_pd_; }
  const MpaNegotiated& negotiated() const noexcept { return neg_; }

 private:
  bool write_frame(const wire::MpaFrame& f, StreamSink& out);
  void on_frame();
  void fail(MpaFailure why) noexcept;

  Role role_;
  State state_ = State::kIdle;
  MpaFailure failure_ = MpaFailure::kNone;
  MpaOptions opts_;
  std::vector<uint8_t> buf_;       // the peer's frame while it arrives (<= 532 bytes)
  wire::MpaFrame peer_;            // private_data points into peer_pd_
  std::vector<uint8_t> peer_pd_;
  MpaNegotiated neg_;
};

}  // namespace urnic::transport::iwarp
