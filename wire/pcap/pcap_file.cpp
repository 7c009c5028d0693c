#include "wire/pcap/pcap_file.hpp"

#include <pcap/pcap.h>

#include <algorithm>
#include <cstring>

namespace urnic::pcap {

struct Reader::Impl {
  pcap_t* handle = nullptr;
  bool nanosecond = false;
  int linktype = kLinktypeEthernet;
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
  impl->linktype = pcap_datalink(impl->handle);
  if (impl->linktype != DLT_EN10MB && impl->linktype != DLT_INFINIBAND && impl->linktype != DLT_ERF) {
    if (error != nullptr) *error = path + ": neither an Ethernet nor an InfiniBand (or ERF) capture";
    return std::nullopt;
  }
  impl->nanosecond = pcap_get_tstamp_precision(impl->handle) == PCAP_TSTAMP_PRECISION_NANO;
  return Reader(std::move(impl));
}

int Reader::linktype() const noexcept {
  return impl_->linktype == DLT_EN10MB ? kLinktypeEthernet : kLinktypeInfiniband;
}

namespace {

// An ERF record's InfiniBand packet: after the 16-byte header (type in
// byte 8, bit 7 saying an 8-byte extension header follows, each of which
// says the same of the next), if the type is InfiniBand. Empty otherwise.
bool erf_infiniband_payload(const u_char* data, std::size_t caplen, std::size_t* offset) {
  if (caplen < kErfHeaderSize || (data[8] & 0x7F) != kErfTypeInfiniband) return false;
  std::size_t off = kErfHeaderSize;
  bool more = (data[8] & 0x80) != 0;
  while (more) {
    if (off + 8 > caplen) return false;
    more = (data[off] & 0x80) != 0;
    off += 8;
  }
  *offset = off;
  return true;
}

}  // namespace

std::optional<Frame> Reader::next() {
  pcap_pkthdr* hdr = nullptr;
  const u_char* data = nullptr;
  for (;;) {
    if (pcap_next_ex(impl_->handle, &hdr, &data) != 1) return std::nullopt;
    std::size_t off = 0;
    if (impl_->linktype == DLT_ERF && !erf_infiniband_payload(data, hdr->caplen, &off)) continue;
    Frame f;
    const uint64_t sub = static_cast<uint64_t>(hdr->ts.tv_usec);
    f.timestamp_ns =
        static_cast<uint64_t>(hdr->ts.tv_sec) * 1'000'000'000ull + (impl_->nanosecond ? sub : sub * 1000);
    f.original_length = hdr->len - static_cast<uint32_t>(std::min<std::size_t>(off, hdr->len));
    f.data.assign(data + off, data + hdr->caplen);
    return f;
  }
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
  bool erf = false;                  // InfiniBand: each packet behind an ERF header
  std::vector<uint8_t> record;       // ... built here (grown once to the largest)
  ~Impl() {
    if (dumper != nullptr) pcap_dump_close(dumper);
    if (dead != nullptr) pcap_close(dead);
  }
};

Writer::Writer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Writer::Writer(Writer&&) noexcept = default;
Writer& Writer::operator=(Writer&&) noexcept = default;
Writer::~Writer() = default;

std::optional<Writer> Writer::create(const std::string& path, std::string* error, uint32_t snaplen, int linktype) {
  auto impl = std::make_unique<Impl>();
  impl->snaplen = snaplen;
  impl->erf = linktype == kLinktypeInfiniband;
  const int dlt = impl->erf ? DLT_ERF : DLT_EN10MB;
  impl->dead = pcap_open_dead_with_tstamp_precision(dlt, static_cast<int>(snaplen), PCAP_TSTAMP_PRECISION_NANO);
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
  if (impl_->erf) {
    // ERF (type 21, InfiniBand): a 64-bit little-endian fixed-point time
    // (seconds . 2^-32), type, flags (0x04: variable-length record),
    // record length, loss counter, wire length (both big-endian), then the
    // packet.
    std::vector<uint8_t>& r = impl_->record;
    r.resize(kErfHeaderSize + frame.size());
    const uint64_t secs = timestamp_ns / 1'000'000'000ull;
    const uint64_t frac = ((timestamp_ns % 1'000'000'000ull) << 32) / 1'000'000'000ull;
    wire::store_le<8>(r.data(), (secs << 32) | frac);
    r[8] = kErfTypeInfiniband;
    r[9] = 0x04;
    wire::store_be<2>(r.data() + 10, std::min<std::size_t>(r.size(), 0xFFFF));
    wire::store_be<2>(r.data() + 12, 0);
    wire::store_be<2>(r.data() + 14, std::min<std::size_t>(frame.size(), 0xFFFF));
    std::memcpy(r.data() + kErfHeaderSize, frame.data(), frame.size());
    frame = wire::Bytes(r);
  }
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
