// Reading and writing pcap files through libpcap. This is the one part of
// wire/ that does I/O, so it is a library of its own (urnic_pcap) and the
// codecs never depend on it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "wire/bytes.hpp"

namespace urnic::pcap {

struct Frame {
  uint64_t timestamp_ns = 0;
  uint32_t original_length = 0;  // length on the wire (>= data.size() if truncated by snaplen)
  std::vector<uint8_t> data;
};

// Reads an Ethernet-linktype pcap file frame by frame.
class Reader {
 public:
  // Returns nullopt and sets *error when the file cannot be opened or is not
  // Ethernet (DLT_EN10MB).
  static std::optional<Reader> open(const std::string& path, std::string* error);
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

// Writes an Ethernet pcap file with nanosecond timestamps.
class Writer {
 public:
  static std::optional<Writer> create(const std::string& path, std::string* error, uint32_t snaplen = 65535);
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
