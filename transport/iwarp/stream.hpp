// The iWARP transport's seam to a reliable byte stream (TCP in the daemon,
// an in-memory pipe in the tests). transport/ opens no socket: bytes come in
// through Transport::iw_on_stream_data, go out through a StreamSink, and the
// owner says when the stream can take more (iw_on_stream_writable) or has
// been closed by the peer (iw_on_stream_closed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "wire/fpdu.hpp"

namespace urnic::transport::iwarp {

// One direction of output. The transport writes whole FPDUs (or one whole
// MPA frame) only, and only when room() says they fit, so the stream never
// holds half an FPDU that the transport would have to remember.
class StreamSink {
 public:
  virtual ~StreamSink() = default;
  // Bytes write() accepts now (free space of the owner's send buffer).
  virtual std::size_t room() const noexcept = 0;
  // Appends `bytes` (bytes.size() <= room()) to the stream.
  virtual void write(std::span<const uint8_t> bytes) = 0;
  // No more output: the owner sends what it holds, then closes the
  // connection (after a Terminate, on a fatal error, on disconnect).
  virtual void close() = 0;
};

// The zero-length message an initiator sends first in MPA peer-to-peer
// mode (RFC 6581 section 6), as the MPA exchange chose it.
enum class Rtr : uint8_t {
  kNone,       // no peer-to-peer mode: either side may send first
  kSendWrite,  // initiator: send a zero-length RDMA Write first
  kSendRead,   // initiator: send a zero-length RDMA Read Request first
  kSendSend,   // initiator: send a zero-length Send first
  kAwait,      // responder: send nothing before the first FPDU arrives
};

// What a QP needs to run RDMAP/DDP over an established MPA stream.
struct StreamParams {
  wire::FpduConfig tx;     // what the peer asked for (its receive side)
  wire::FpduConfig rx;     // what this side asked for
  uint64_t tx_pos = 0;     // stream position of the first FPDU octet (markers)
  uint64_t rx_pos = 0;
  uint32_t mss = 1460;     // TCP segment size: every FPDU fits one segment
  uint16_t ord = 16;       // RDMA Read Requests this side may have outstanding
  uint16_t ird = 16;       // Read Requests the peer may have outstanding here
  Rtr rtr = Rtr::kNone;
  // Both peers negotiated the RFC 7306 extensions (MpaNegotiated::rfc7306):
  // atomics and Immediate Data may be sent, and are accepted.
  bool rfc7306 = false;
};

}  // namespace urnic::transport::iwarp
