#include "wire/pcap/pcap_file.hpp"

#include <pcap/pcap.h>

#include <algorithm>

namespace urnic::pcap {

struct Reader::Impl {
  pcap_t* handle = nullptr;
  bool nanosecond = false;
  ~Impl() {
    if (handle != nullptr) pcap_close(handle);
  }
};

Reader::Reader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Reader::Reader(Reader&&) noexcept = default;
Reader& Reader::operator=(Reader&&) noexcept = default;
Reader::~Reader() = default;

std::optional<Reader> Reader::open(const std::string& path, std::string* error) {
  char errbuf[PCAP_ERRBUF_SIZE] = {};
  auto impl = std::make_unique<Impl>();
  // Ask for nanosecond timestamps; libpcap scales microsecond files for us.
  impl->handle = pcap_open_offline_with_tstamp_precision(path.c_str(), PCAP_TSTAMP_PRECISION_NANO, errbuf);
  if (impl->handle == nullptr) {
    if (error != nullptr) *error = errbuf;
    return std::nullopt;
  }
  if (pcap_datalink(impl->handle) != DLT_EN10MB) {
    if (error != nullptr) *error = path + ": not an Ethernet capture";
    return std::nullopt;
  }
  impl->nanosecond = pcap_get_tstamp_precision(impl->handle) == PCAP_TSTAMP_PRECISION_NANO;
  return Reader(std::move(impl));
}

std::optional<Frame> Reader::next() {
  pcap_pkthdr* hdr = nullptr;
  const u_char* data = nullptr;
  if (pcap_next_ex(impl_->handle, &hdr, &data) != 1) return std::nullopt;
  Frame f;
  const uint64_t sub = static_cast<uint64_t>(hdr->ts.tv_usec);
  f.timestamp_ns = static_cast<uint64_t>(hdr->ts.tv_sec) * 1'000'000'000ull + (impl_->nanosecond ? sub : sub * 1000);
  f.original_length = hdr->len;
  f.data.assign(data, data + hdr->caplen);
  return f;
}

std::vector<Frame> read_all(const std::string& path, std::string* error) {
  std::vector<Frame> frames;
  auto reader = Reader::open(path, error);
  if (!reader) return frames;
  while (auto f = reader->next()) frames.push_back(std::move(*f));
  return frames;
}

struct Writer::Impl {
  pcap_t* dead = nullptr;
  pcap_dumper_t* dumper = nullptr;
  uint32_t snaplen = 0;
  ~Impl() {
    if (dumper != nullptr) pcap_dump_close(dumper);
    if (dead != nullptr) pcap_close(dead);
  }
};

Writer::Writer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Writer::Writer(Writer&&) noexcept = default;
Writer& Writer::operator=(Writer&&) noexcept = default;
Writer::~Writer() = default;

std::optional<Writer> Writer::create(const std::string& path, std::string* error, uint32_t snaplen) {
  auto impl = std::make_unique<Impl>();
  impl->snaplen = snaplen;
  impl->dead = pcap_open_dead_with_tstamp_precision(DLT_EN10MB, static_cast<int>(snaplen), PCAP_TSTAMP_PRECISION_NANO);
  if (impl->dead == nullptr) {
    if (error != nullptr) *error = "pcap_open_dead failed";
    return std::nullopt;
  }
  impl->dumper = pcap_dump_open(impl->dead, path.c_str());
  if (impl->dumper == nullptr) {
    if (error != nullptr) *error = pcap_geterr(impl->dead);
    return std::nullopt;
  }
  return Writer(std::move(impl));
}

void Writer::write(uint64_t timestamp_ns, wire::Bytes frame) {
  pcap_pkthdr hdr{};
  hdr.ts.tv_sec = static_cast<time_t>(timestamp_ns / 1'000'000'000ull);
  // With nanosecond precision the tv_usec field carries nanoseconds.
  hdr.ts.tv_usec = static_cast<suseconds_t>(timestamp_ns % 1'000'000'000ull);
  hdr.len = static_cast<bpf_u_int32>(frame.size());
  hdr.caplen = static_cast<bpf_u_int32>(std::min<std::size_t>(frame.size(), impl_->snaplen));
  pcap_dump(reinterpret_cast<u_char*>(impl_->dumper), &hdr, frame.data());
}

void Writer::flush() { pcap_dump_flush(impl_->dumper); }

}  // namespace urnic::pcap
