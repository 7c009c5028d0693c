#include "tools/cli/check/findings.hpp"

#include <algorithm>
#include <array>

namespace urnic::tools::check {
namespace {

constexpr std::array kRules{
    Rule{rule::kRoceIcrc, Family::kRoce, "IBA 7.8.1; RoCEv2 annex A17.8",
         "the ICRC verifies (a frame with a bad ICRC is left out of every other rule)"},
    Rule{rule::kRoceHeaders, Family::kRoce, "IBA 9.2, 9.3; annex A16, A17.4",
         "a frame to UDP port 4791 (or EtherType 0x8915) decodes: valid opcode, TVer 0, lengths"},
    Rule{rule::kRocePad, Family::kRoce, "IBA 9.2.4", "PadCnt pads the payload to a multiple of 4 bytes"},
    Rule{rule::kRoceUdpChecksum, Family::kRoce, "RoCEv2 annex A17.4.2", "the UDP checksum is 0 or correct"},
    Rule{rule::kRoceUdpSport, Family::kRoce, "RoCEv2 annex A17.5.1",
         "UDP source port entropy: the distinct source ports of each flow (info)"},
    Rule{rule::kRocePsnSequence, Family::kRoce, "IBA 9.7.1, 9.7.2",
         "each new request PSN is the previous + 1 (a READ: + its response count), mod 2^24"},
    Rule{rule::kRoceRetransmission, Family::kRoce, "IBA 9.7.5.1, 9.7.6",
         "a request PSN going back is a retransmission (counted, info)"},
    Rule{rule::kRoceRetryInterval, Family::kRoce, "IBA 9.7.6.1.3, 9.7.5.2.2, 9.7.5.2.8",
         "a retransmission follows a NAK, an RNR NAK or an ACK timeout (no sooner than --min-retry-us)"},
    Rule{rule::kRoceAckPsn, Family::kRoce, "IBA 9.7.5.1.3, 9.7.6",
         "an ACK/NAK acknowledges a PSN the requester has sent (not beyond the highest)"},
    Rule{rule::kRoceNakRetry, Family::kRoce, "IBA 9.7.5.2.2",
         "a NAK PSN sequence error is followed by a retransmission from its PSN"},
    Rule{rule::kRoceMsn, Family::kRoce, "IBA 9.3.5, 9.7.5.1", "the AETH MSN does not decrease"},
    Rule{rule::kRoceOpcodeSequence, Family::kRoce, "IBA 9.4, 9.7.5.1",
         "FIRST, MIDDLE..., LAST of one message; no MIDDLE/LAST without FIRST, no new message inside one"},
    Rule{rule::kRocePayloadSize, Family::kRoce, "IBA 9.4.1, 9.7.5.1",
         "FIRST/MIDDLE carry exactly one PMTU, LAST 1..PMTU, ONLY 0..PMTU"},
    Rule{rule::kRoceReadResponse, Family::kRoce, "IBA 9.4.3, 9.7.5.1",
         "READ responses start at the request's PSN, are FIRST/MIDDLE/LAST or ONLY and cover the DMA length"},
    Rule{rule::kRoceAtomicAck, Family::kRoce, "IBA 9.4.5, 9.5.3",
         "an ATOMIC ACKNOWLEDGE carries the PSN of an outstanding atomic request"},
    Rule{rule::kRoceCnp, Family::kRoce, "RoCEv2 annex A17.9.2", "a CNP's 16 reserved bytes are zero"},
    Rule{rule::kIbVcrc, Family::kRoce, "IBA 7.8.2",
         "an InfiniBand packet's VCRC verifies (a packet with a bad VCRC is left out of every other rule)"},
    Rule{
        rule::kIwMpaFrame, Family::kIwarp, "RFC 5044 7.1",
        "the stream starts with an MPA Request (key \"MPA ID Req Frame\"), answered by a Reply (\"MPA ID Rep Frame\")"},
    Rule{rule::kIwMpaRevision, Family::kIwarp, "RFC 5044 7.1; RFC 6581 5",
         "revision 1 or 2 (2 with the enhanced header), the Reply's no higher than the Request's"},
    Rule{rule::kIwMpaPdLength, Family::kIwarp, "RFC 5044 7.1", "private data length at most 512"},
    Rule{rule::kIwMpaFlags, Family::kIwarp, "RFC 5044 7.1",
         "C in the Reply if C in the Request; R only in a Reply; reserved flag bits zero (warning)"},
    Rule{rule::kIwMpaReject, Family::kIwarp, "RFC 5044 7.1.1",
         "a rejecting Reply (R) ends the connection: no FPDUs follow (the reject itself: info)"},
    Rule{rule::kIwFpduLength, Family::kIwarp, "RFC 5044 4.1, 4.2", "ULPDU_Length frames the stream"},
    Rule{rule::kIwFpduPad, Family::kIwarp, "RFC 5044 4.1", "pad octets are zero (warning)"},
    Rule{rule::kIwFpduCrc, Family::kIwarp, "RFC 5044 4.4",
         "CRC32c verifies when negotiated; the field is 0 when not (warning)"},
    Rule{rule::kIwFpduMarker, Family::kIwarp, "RFC 5044 4.3",
         "when negotiated, a marker every 512 octets points at the start of its FPDU"},
    Rule{rule::kIwDdpHeader, Family::kIwarp, "RFC 5041 5.1-5.3; RFC 5040 4.2, 4.3",
         "DDP/RDMAP versions 1, a known opcode on its buffer model and queue, lengths"},
    Rule{rule::kIwDdpMsn, Family::kIwarp, "RFC 5041 5.3",
         "untagged MSN: 1 for the first message of a queue, then + 1 per message"},
    Rule{rule::kIwDdpMo, Family::kIwarp, "RFC 5041 5.3",
         "untagged MO: 0 on a message's first segment, then the octets before it"},
    Rule{rule::kIwDdpLast, Family::kIwarp, "RFC 5041 5.1",
         "a message ends with one Last segment before the next message on its queue"},
    Rule{rule::kIwDdpTo, Family::kIwarp, "RFC 5041 5.2",
         "tagged: the segments of a message continue the TO of the previous one"},
    Rule{rule::kIwRdmapRead, Family::kIwarp, "RFC 5040 4.4, 5.3",
         "Read Responses, in request order, fill the sink STag from the sink TO for exactly the read size"},
    Rule{rule::kIwRdmapTerminate, Family::kIwarp, "RFC 5040 4.8, 7; RFC 5041 7; RFC 5044 8",
         "a Terminate's layer/type/code is a defined combination (each Terminate: info)"},
};

}  // namespace

std::string_view to_string(Severity s) noexcept {
  switch (s) {
    case Severity::kInfo:
      return "info";
    case Severity::kWarning:
      return "warning";
    case Severity::kViolation:
      return "violation";
  }
  return "?";
}

std::span<const Rule> rules() noexcept { return kRules; }

void Findings::add(std::string_view rule_id, Severity s, std::vector<uint64_t> frames, std::string flow,
                   std::string message) {
  all_.push_back(Finding{rule_id, s, std::move(frames), std::move(flow), std::move(message)});
}

std::size_t Report::count(Severity s) const noexcept {
  return static_cast<std::size_t>(
      std::count_if(findings.begin(), findings.end(), [s](const Finding& f) { return f.severity == s; }));
}

}  // namespace urnic::tools::check
