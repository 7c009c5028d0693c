// `urnic frame check` (issue 20): the rules, one finding per deviation, and
// the report of one capture. The rule table is the one list of what the
// checker checks: each rule has an id, the section of the spec it enforces
// and a title; docs/CONFORMANCE.md shows the same table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace urnic::tools::check {

enum class Severity : uint8_t { kInfo, kWarning, kViolation };
std::string_view to_string(Severity s) noexcept;

enum class Family : uint8_t { kRoce, kIwarp };

// Rule ids (the JUnit test case names).
namespace rule {
inline constexpr std::string_view kRoceIcrc = "roce.icrc";
inline constexpr std::string_view kRoceHeaders = "roce.headers";
inline constexpr std::string_view kRocePad = "roce.pad";
inline constexpr std::string_view kRoceUdpChecksum = "roce.udp-checksum";
inline constexpr std::string_view kRoceUdpSport = "roce.udp-sport";
inline constexpr std::string_view kRocePsnSequence = "roce.psn-sequence";
inline constexpr std::string_view kRoceRetransmission = "roce.retransmission";
inline constexpr std::string_view kRoceRetryInterval = "roce.retry-interval";
inline constexpr std::string_view kRoceAckPsn = "roce.ack-psn";
inline constexpr std::string_view kRoceNakRetry = "roce.nak-retry";
inline constexpr std::string_view kRoceMsn = "roce.msn";
inline constexpr std::string_view kRoceOpcodeSequence = "roce.opcode-sequence";
inline constexpr std::string_view kRocePayloadSize = "roce.payload-size";
inline constexpr std::string_view kRoceReadResponse = "roce.read-response";
inline constexpr std::string_view kRoceAtomicAck = "roce.atomic-ack";
inline constexpr std::string_view kRoceCnp = "roce.cnp";
inline constexpr std::string_view kIbVcrc = "ib.vcrc";
inline constexpr std::string_view kIwMpaFrame = "iwarp.mpa-frame";
inline constexpr std::string_view kIwMpaRevision = "iwarp.mpa-revision";
inline constexpr std::string_view kIwMpaPdLength = "iwarp.mpa-pd-length";
inline constexpr std::string_view kIwMpaFlags = "iwarp.mpa-flags";
inline constexpr std::string_view kIwMpaReject = "iwarp.mpa-reject";
inline constexpr std::string_view kIwFpduLength = "iwarp.fpdu-length";
inline constexpr std::string_view kIwFpduPad = "iwarp.fpdu-pad";
inline constexpr std::string_view kIwFpduCrc = "iwarp.fpdu-crc";
inline constexpr std::string_view kIwFpduMarker = "iwarp.fpdu-marker";
inline constexpr std::string_view kIwDdpHeader = "iwarp.ddp-header";
inline constexpr std::string_view kIwDdpMsn = "iwarp.ddp-msn";
inline constexpr std::string_view kIwDdpMo = "iwarp.ddp-mo";
inline constexpr std::string_view kIwDdpLast = "iwarp.ddp-last";
inline constexpr std::string_view kIwDdpTo = "iwarp.ddp-to";
inline constexpr std::string_view kIwRdmapRead = "iwarp.rdmap-read";
inline constexpr std::string_view kIwRdmapTerminate = "iwarp.rdmap-terminate";
}  // namespace rule

struct Rule {
  std::string_view id;
  Family family;
  std::string_view citation;  // IBA Vol. 1 rel. 1.4 / RoCEv2 annex / RFC section
  std::string_view title;     // what must hold
};

// Every rule, RoCE first, in the order of docs/CONFORMANCE.md.
std::span<const Rule> rules() noexcept;

struct Finding {
  std::string_view rule;
  Severity severity = Severity::kViolation;
  std::vector<uint64_t> frames;  // 1-based frame numbers, as tshark counts
  std::string flow;
  std::string message;  // one line: what was expected, what was seen
};

// Where the checkers put their findings.
class Findings {
 public:
  void add(std::string_view rule_id, Severity s, std::vector<uint64_t> frames, std::string flow, std::string message);
  const std::vector<Finding>& all() const noexcept { return all_; }
  std::vector<Finding> take() noexcept { return std::move(all_); }

 private:
  std::vector<Finding> all_;
};

// Per flow (RoCE: src GID, dst GID, dest QP; iWARP: a TCP connection).
struct FlowSummary {
  std::string name;
  std::string kind;  // "RC", "UC", "UD", "CNP", "iWARP", ...
  uint64_t frames = 0;
  std::vector<std::string> notes;  // "requests 60 (PSN 0x0..0x3b)", ...
};

struct Report {
  std::string capture;
  uint64_t frames = 0;
  std::vector<std::string> notes;  // capture-wide: PMTU assumption, ...
  std::vector<FlowSummary> flows;
  std::vector<Finding> findings;
  std::size_t count(Severity s) const noexcept;
};

}  // namespace urnic::tools::check
