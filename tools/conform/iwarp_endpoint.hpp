// The tester's iWARP endpoint (issue 20): the initiator's side of one MPA
// connection over a kernel TCP socket (TCP itself is not under test). The
// tester writes the MPA Request (RFC 5044 7.1, RFC 6581) and every FPDU
// itself, bit by bit, through the wire/ codecs (mpa.hpp, fpdu.hpp,
// ddp_rdmap.hpp), and parses what the device under test sends back. Every
// frame either way becomes a line of the case's transcript; with --iface,
// an IwRecorder writes the TCP segments of the run to the pcap.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tools/conform/raw_port.hpp"
#include "wire/ddp_rdmap.hpp"
#include "wire/fpdu.hpp"
#include "wire/mpa.hpp"

namespace urnic::conform {

// Case transcript lines, timed from the case's start.
class Transcript {
 public:
  void set(std::vector<std::string>* t) noexcept {
    lines_ = t;
    t0_ = Clock::now();
  }
  void note(const std::string& line);

 private:
  std::vector<std::string>* lines_ = nullptr;
  Clock::time_point t0_ = Clock::now();
};

// What the tester changes in an FPDU it sends.
struct IwTx {
  bool corrupt_crc = false;  // flips the CRC field (only meaningful when CRC is on)
  std::string label;         // what the transcript says about it
};

// What came back after an MPA Request.
struct MpaAnswer {
  std::optional<wire::MpaFrame> reply;  // private_data points into `bytes`
  std::vector<uint8_t> bytes;           // everything received before the end of the wait
  bool closed = false;                  // FIN or RST seen
  std::string error;                    // bytes that are no MPA Reply
};

// One FPDU from the device (or the end of the stream).
struct IwRx {
  std::vector<uint8_t> ulpdu;
  std::optional<wire::DdpRdmapPacket> pkt;  // spans point into `ulpdu`: move, never copy
  wire::CrcCheck crc = wire::CrcCheck::kOff;
  std::string decode_error;                 // ULPDU that does not decode
  bool closed = false;                      // the stream ended (FIN/RST) instead
  bool timeout = false;                     // nothing within the wait
  bool framing_error = false;               // the deframer lost the stream (markers, length)
  IwRx() = default;
  IwRx(IwRx&&) = default;
  IwRx& operator=(IwRx&&) = default;
  IwRx(const IwRx&) = delete;
};

class IwConn {
 public:
  // Connects a TCP socket to ipv4:port; throws std::runtime_error.
  IwConn(uint32_t ipv4, uint16_t port, Transcript& log);
  ~IwConn();
  IwConn(const IwConn&) = delete;
  IwConn& operator=(const IwConn&) = delete;

  void send_raw(const std::vector<uint8_t>& bytes, const std::string& label);
  void send_mpa(const wire::MpaFrame& f);
  MpaAnswer read_mpa(std::chrono::milliseconds wait);

  // Enters FPDU mode with what the MPA exchange negotiated; `leftover` is
  // stream bytes read past the Reply.
  void start_fpdus(wire::FpduConfig tx, wire::FpduConfig rx, const std::vector<uint8_t>& leftover = {});
  // Encodes and sends one DDP segment (headers + payload).
  void send(const wire::DdpRdmapPacket& p, const IwTx& opt = {});
  // Sends an already encoded ULPDU (a case that tampers with header bits).
  void send_ulpdu(const std::vector<uint8_t>& ulpdu, const IwTx& opt = {});
  IwRx next(std::chrono::milliseconds wait);
  // True if the peer closes (FIN/RST) within `wait`; FPDUs before it are noted.
  bool wait_closed(std::chrono::milliseconds wait);

  const wire::FpduConfig& tx_config() const noexcept { return tx_cfg_; }

 private:
  // Reads what is there until `until`; false on timeout, sets closed_.
  bool fill(Clock::time_point until);

  int fd_ = -1;
  Transcript& log_;
  std::vector<uint8_t> in_;   // received, not yet consumed
  bool closed_ = false;
  wire::FpduConfig tx_cfg_;
  uint64_t tx_pos_ = 0;
  std::optional<wire::FpduDeframer> rx_;
};

// One line for a transcript: opcode, buffer model, STag/TO or QN/MSN/MO,
// payload size; a Terminate's layer/etype/ecode.
std::string describe(const wire::DdpRdmapPacket& p);
std::string describe(const wire::MpaFrame& f);

// Records the run's frames (the TCP segments of every case) to the pcap:
// a thread that reads the tester's interface (RawPort records both ways).
class IwRecorder {
 public:
  explicit IwRecorder(RawPort& port);
  ~IwRecorder();

 private:
  RawPort& port_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace urnic::conform
