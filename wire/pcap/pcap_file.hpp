// Reading and writing pcap files through libpcap. This is the one part of
// wire/ that does I/O, so it is a library of its own (urnic_pcap) and the
// codecs never depend on it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "wire/bytes.hpp"

namespace urnic::pcap {

// The link types urnic reads and writes (tcpdump.org's LINKTYPE_ values):
// Ethernet (RoCE, iWARP) and InfiniBand (issue 51): one native IB packet
// (LRH .. VCRC) per record. InfiniBand is written as LINKTYPE_ERF (197)
// records of ERF type 21 (InfiniBand) because Wireshark (4.0, Debian 12)
// does not read LINKTYPE_INFINIBAND (247) files ("network type 247 unknown
// or unsupported") but decodes ERF InfiniBand records with its
// "infiniband" dissector; files of type 247 are read too. Frame::data is
// always the IB packet itself, the ERF header stripped.
inline constexpr int kLinktypeEthernet = 1;
inline constexpr int kLinktypeInfiniband = 247;  // raw IB packets (read only)
inline constexpr int kLinktypeErf = 197;         // ERF records (InfiniBand ones: written for kLinktypeInfiniband)
inline constexpr std::uint8_t kErfTypeInfiniband = 21;
inline constexpr std::size_t kErfHeaderSize = 16;

struct Frame {
  uint64_t timestamp_ns = 0;
  uint32_t original_length = 0;  // length on the wire (>= data.size() if truncated by snaplen)
  std::vector<uint8_t> data;
};

// Reads an Ethernet- or InfiniBand-linktype pcap file frame by frame.
class Reader {
 public:
  // Returns nullopt and sets *error when the file cannot be opened or is
  // neither Ethernet (DLT_EN10MB) nor InfiniBand (DLT_INFINIBAND).
  static std::optional<Reader> open(const std::string& path, std::string* error);
  // kLinktypeEthernet, or kLinktypeInfiniband for an InfiniBand capture
  // (LINKTYPE_INFINIBAND or LINKTYPE_ERF; ERF records of other types are
  // skipped).
  [[nodiscard]] int linktype() const noexcept;
  Reader(Reader&&) noexcept;
  Reader& operator=(Reader&&) noexcept;
  ~Reader();

  // Next frame, or nullopt at the end of the file.
  std::optional<Frame> next();

 private:
  struct Impl;
  explicit Reader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// All frames of a file (tests and tools; not for large files).
std::vector<Frame> read_all(const std::string& path, std::string* error);

// Writes a pcap file with nanosecond timestamps, of link type `linktype`:
// kLinktypeEthernet, or kLinktypeInfiniband (written as ERF InfiniBand
// records, see above; write() takes the IB packet itself).
class Writer {
 public:
  static std::optional<Writer> create(const std::string& path, std::string* error, uint32_t snaplen = 65535,
                                      int linktype = kLinktypeEthernet);
  Writer(Writer&&) noexcept;
  Writer& operator=(Writer&&) noexcept;
  ~Writer();

  void write(uint64_t timestamp_ns, wire::Bytes frame);
  void flush();

 private:
  struct Impl;
  explicit Writer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace urnic::pcap
