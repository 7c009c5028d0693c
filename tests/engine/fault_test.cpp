// Fault injection (engine/observe/fault): the stage that sits on a device's TX path.
// Frames are real RoCE v2 frames built as the udp link builds them, so the
// tests can check that every corruption is one the ICRC catches.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/observe/fault.hpp"
#include "engine/link/udp_link.hpp"
#include "transport/fault_model.hpp"
#include "wire/ib_opcode.hpp"
#include "wire/ip.hpp"
#include "wire/roce_frame.hpp"

using urnic::engine::FaultConfig;
using urnic::engine::FaultStage;
using urnic::engine::UdpLink;
using urnic::transport::Nanos;

namespace {

constexpr std::uint32_t kSrc = 0x7f000001;
constexpr std::uint32_t kDst = 0x7f000002;

// An RC SEND_ONLY frame whose PSN and payload identify it.
std::vector<std::uint8_t> frame(std::uint32_t psn, std::size_t payload = 64, std::uint8_t tos = 0) {
  std::vector<std::uint8_t> data(payload);
  for (std::size_t i = 0; i < payload; ++i) data[i] = static_cast<std::uint8_t>(psn + i);
  urnic::wire::IbPacket p;
  p.bth.opcode = urnic::wire::opcode::kRc | urnic::wire::opcode::kSendOnly;
  p.bth.dest_qp = 0x11;
  p.bth.psn = urnic::wire::Psn(psn);
  p.bth.pkey = 0xffff;
  p.payload = urnic::wire::Bytes(data.data(), data.size());
  p.bth.pad = static_cast<std::uint8_t>((4 - (payload & 3)) & 3);
  std::vector<std::uint8_t> out(UdpLink::kDatagramOffset + UdpLink::kMaxDatagram);
  const std::size_t n = UdpLink::encode_frame(p, kSrc, 4791, kDst, tos, out);
  REQUIRE(n > UdpLink::kDatagramOffset);
  out.resize(n);
  return out;
}

struct Released {
  std::uint32_t dst;
  std::vector<std::uint8_t> bytes;
};

std::vector<Released> drain(FaultStage& st, Nanos now) {
  std::vector<Released> out;
  st.release(now, [&](std::uint32_t dst, std::span<const std::uint8_t> f) {
    out.push_back(Released{dst, std::vector<std::uint8_t>(f.begin(), f.end())});
  });
  return out;
}

std::uint32_t psn_of(const std::vector<std::uint8_t>& f) {
  auto r = urnic::wire::parse_roce_frame(f);
  REQUIRE(r.ok());
  return r->ib.bth.psn.value();
}

FaultConfig faults(double loss, double dup, double reorder, double corrupt, Nanos delay = 0,
                   std::uint64_t seed = 1) {
  FaultConfig c;
  c.faults.loss = loss;
  c.faults.duplicate = dup;
  c.faults.reorder = reorder;
  c.faults.corrupt = corrupt;
  c.delay = delay;
  c.seed = seed;
  return c;
}

}  // namespace

TEST_CASE("fault: off by default, and a zero profile is off", "[engine][fault]") {
  FaultStage st;
  CHECK_FALSE(st.active());
  CHECK_FALSE(st.applies(17));
  st.configure(faults(0, 0, 0, 0));
  CHECK_FALSE(st.active());
  st.configure(faults(0, 0, 0, 0, 1000));
  CHECK(st.active());
  FaultConfig only_qp = faults(0.5, 0, 0, 0);
  only_qp.qpn = 17;
  st.configure(only_qp);
  CHECK(st.applies(17));
  CHECK_FALSE(st.applies(18));
}

TEST_CASE("fault: clean frames go out unchanged, in order, when due", "[engine][fault]") {
  FaultStage st;
  st.configure(faults(0, 0, 0, 0, 5'000));
  for (std::uint32_t i = 0; i < 10; ++i) CHECK(st.submit(frame(i), UdpLink::kDatagramOffset, kDst, 1'000 + i));
  CHECK(st.held() == 10);
  CHECK(st.next_release() == 6'000);
  CHECK(drain(st, 5'999).empty());  // the delay holds them
  const auto out = drain(st, 100'000);
  REQUIRE(out.size() == 10);
  for (std::uint32_t i = 0; i < 10; ++i) {
    CHECK(out[i].dst == kDst);
    CHECK(out[i].bytes == frame(i));
  }
  CHECK(st.counters().delayed == 10);
  CHECK(st.held() == 0);
  CHECK(st.next_release() == urnic::transport::kNever);
}

TEST_CASE("fault: loss drops about the configured fraction, the same frames for the same seed",
          "[engine][fault]") {
  auto run = [](std::uint64_t seed) {
    FaultStage st;
    st.configure(faults(0.1, 0, 0, 0, 0, seed));
    std::vector<std::uint32_t> kept;
    for (std::uint32_t i = 0; i < 2000; ++i) {
      st.submit(frame(i, 8), UdpLink::kDatagramOffset, kDst, 10);
      for (const auto& r : drain(st, 10)) kept.push_back(psn_of(r.bytes));
    }
    CHECK(st.counters().dropped + kept.size() == 2000);
    return kept;
  };
  const auto a = run(42);
  const auto b = run(42);
  const auto c = run(43);
  CHECK(a == b);
  CHECK(a != c);
  // 2000 frames at 10 %: 200 expected; +-60 is over 4 standard deviations.
  CHECK(a.size() > 1740);
  CHECK(a.size() < 1860);
  CHECK(std::is_sorted(a.begin(), a.end()));
}

TEST_CASE("fault: every corrupted frame fails the ICRC check and differs in one bit", "[engine][fault]") {
  FaultStage st;
  st.configure(faults(0, 0, 0, 1.0, 0, 9));
  for (std::uint32_t i = 0; i < 500; ++i) {
    const auto orig = frame(i, i % 97);
    st.submit(orig, UdpLink::kDatagramOffset, kDst, 1);
    const auto out = drain(st, 1);
    REQUIRE(out.size() == 1);
    const auto& f = out[0].bytes;
    REQUIRE(f.size() == orig.size());
    std::size_t bits = 0, first = 0;
    for (std::size_t k = 0; k < f.size(); ++k) {
      const auto x = static_cast<unsigned>(f[k] ^ orig[k]);
      if (x != 0 && bits == 0) first = k;
      bits += static_cast<std::size_t>(__builtin_popcount(x));
    }
    CHECK(bits == 1);
    CHECK(first >= UdpLink::kDatagramOffset);      // never the L2/L3 headers the kernel writes
    CHECK(first != UdpLink::kDatagramOffset + 4);  // never the BTH byte the ICRC masks
    auto r = urnic::wire::parse_roce_frame(f);
    // A flip may make the frame unparsable (opcode, pad); if it parses, the
    // ICRC must say it is bad.
    if (r.ok()) CHECK_FALSE(r->icrc_ok);
  }
  CHECK(st.counters().corrupted == 500);
}

TEST_CASE("fault: duplication sends a second identical copy shortly after", "[engine][fault]") {
  FaultStage st;
  st.configure(faults(0, 1.0, 0, 0));
  st.submit(frame(5), UdpLink::kDatagramOffset, kDst, 100);
  const auto out = drain(st, 100 + 5'001);
  REQUIRE(out.size() == 2);
  CHECK(out[0].bytes == frame(5));
  CHECK(out[1].bytes == frame(5));
  CHECK(st.counters().duplicated == 1);
}

TEST_CASE("fault: a reordered frame is overtaken by the next ones", "[engine][fault]") {
  FaultStage st;
  FaultConfig c = faults(0, 0, 0.3, 0, 0, 3);
  c.faults.reorder_delay = 1'000;
  st.configure(c);
  std::vector<std::uint32_t> order;
  Nanos now = 0;
  for (std::uint32_t i = 0; i < 300; ++i) {
    now += 100;
    st.submit(frame(i, 8), UdpLink::kDatagramOffset, kDst, now);
    for (const auto& r : drain(st, now)) order.push_back(psn_of(r.bytes));
  }
  for (const auto& r : drain(st, now + 10'000)) order.push_back(psn_of(r.bytes));
  REQUIRE(order.size() == 300);  // nothing lost
  CHECK(st.counters().reordered > 50);
  CHECK_FALSE(std::is_sorted(order.begin(), order.end()));
  std::vector<std::uint32_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (std::uint32_t i = 0; i < 300; ++i) CHECK(sorted[i] == i);
}

TEST_CASE("fault: frames submitted while releasing wait for the next release", "[engine][fault]") {
  FaultStage st;
  st.configure(faults(0, 0, 0, 0, 1));
  st.submit(frame(1), UdpLink::kDatagramOffset, kDst, 0);
  std::size_t calls = 0;
  // Each release submits another frame already due: the call must still end.
  const std::size_t n = st.release(100, [&](std::uint32_t, std::span<const std::uint8_t>) {
    ++calls;
    st.submit(frame(2), UdpLink::kDatagramOffset, kDst, 0);
  });
  CHECK(n == 1);
  CHECK(calls == 1);
  CHECK(st.held() == 1);
}

TEST_CASE("fault: the fault model draws like the sim link (same seed, same verdicts)", "[engine][fault][sim]") {
  urnic::transport::sim::Faults f;
  f.loss = 0.2;
  f.duplicate = 0.1;
  f.corrupt = 0.1;
  urnic::transport::sim::FaultRoller a(77), b(77);
  std::size_t drops = 0;
  for (std::uint64_t i = 1; i <= 1000; ++i) {
    const auto va = a.roll(f, i);
    const auto vb = b.roll(f, i);
    CHECK(va.drop == vb.drop);
    CHECK(va.corrupt_bit == vb.corrupt_bit);
    CHECK(va.duplicate_lag == vb.duplicate_lag);
    drops += va.drop ? 1 : 0;
    if (va.duplicate) CHECK((va.duplicate_lag >= 1 && va.duplicate_lag <= 5'000));
  }
  CHECK(drops > 150);
  CHECK(drops < 250);
  f.loss = 0;
  f.drop_every = 3;
  urnic::transport::sim::FaultRoller c(1);
  CHECK_FALSE(c.roll(f, 1).drop);
  CHECK_FALSE(c.roll(f, 2).drop);
  CHECK(c.roll(f, 3).drop);
}

TEST_CASE("fault: config file keys and validation", "[engine][fault]") {
  std::string err;
  FaultConfig c;
  std::string cap;
  std::uint64_t limit = 0;
  const auto dev = nlohmann::json::parse(
      R"({"name":"urnic0","fault":{"loss":0.05,"duplicate":0.01,"reorder":0.02,"corrupt":0.03,
          "delay_us":7,"reorder_delay_us":50,"seed":9,"qpn":17},
          "capture":{"file":"/tmp/x.pcap","count":10}})");
  REQUIRE(urnic::engine::parse_observe_config(dev, c, cap, limit, err));
  CHECK(c.faults.loss == Approx(0.05));
  CHECK(c.faults.duplicate == Approx(0.01));
  CHECK(c.faults.reorder == Approx(0.02));
  CHECK(c.faults.corrupt == Approx(0.03));
  CHECK(c.delay == 7'000);
  CHECK(c.faults.reorder_delay == 50'000);
  CHECK(c.seed == 9);
  CHECK(c.qpn == 17);
  CHECK(cap == "/tmp/x.pcap");
  CHECK(limit == 10);

  FaultConfig d;
  std::string cap2;
  REQUIRE(urnic::engine::parse_observe_config(nlohmann::json::parse(R"({"capture":"/tmp/y.pcap"})"), d, cap2,
                                              limit, err));
  CHECK(cap2 == "/tmp/y.pcap");
  CHECK_FALSE(d.active());

  CHECK_FALSE(urnic::engine::parse_observe_config(nlohmann::json::parse(R"({"fault":{"loss":1.5}})"), d, cap2,
                                                  limit, err));
  CHECK(err.find("fraction") != std::string::npos);
  CHECK_FALSE(urnic::engine::parse_observe_config(nlohmann::json::parse(R"({"fault":{"loss":"x"}})"), d, cap2,
                                                  limit, err));
  CHECK_FALSE(urnic::engine::parse_observe_config(nlohmann::json::parse(R"({"capture":{"count":3}})"), d, cap2,
                                                  limit, err));
  FaultConfig nan = faults(0, 0, 0, 0);
  nan.faults.loss = std::numeric_limits<double>::quiet_NaN();
  CHECK_FALSE(urnic::engine::valid_fault_config(nan, nullptr));
}

TEST_CASE("fault: a long delay holds at most kMaxHeld frames; the rest are dropped and counted",
          "[engine][fault]") {
  FaultStage st;
  st.configure(faults(0, 0, 0, 0, 1'000'000'000));
  for (std::size_t i = 0; i < FaultStage::kMaxHeld + 5; ++i)
    st.submit(frame(static_cast<std::uint32_t>(i)), UdpLink::kDatagramOffset, kDst, 1'000);
  CHECK(st.held() == FaultStage::kMaxHeld);
  CHECK(st.counters().overflow == 5);
  CHECK(st.counters().dropped == 5);
  CHECK(drain(st, 2'000'000'000).size() == FaultStage::kMaxHeld);
}

TEST_CASE("fault: --ecn marks ECN-capable frames CE, checksum and ICRC still good, and leaves the others alone",
          "[engine][fault][ecn]") {
  FaultStage st;
  FaultConfig c;
  c.faults.ecn = 1.0;
  c.seed = 3;
  st.configure(c);
  REQUIRE(st.active());
  for (const std::uint8_t tos : {std::uint8_t{0x02}, std::uint8_t{0xB9}, std::uint8_t{0x00}, std::uint8_t{0xB8}}) {
    INFO("TOS " << int{tos});
    st.submit(frame(1, 64, tos), UdpLink::kDatagramOffset, kDst, 1);
    const auto out = drain(st, 1);
    REQUIRE(out.size() == 1);
    auto r = urnic::wire::parse_roce_frame(out[0].bytes);
    REQUIRE(r.ok());
    CHECK(r->icrc_ok);  // the ICRC masks the ECN field
    const bool ect = (tos & 3) != 0;
    CHECK(r->hdr.traffic_class == (ect ? (tos | 3) : tos));  // DSCP kept; not-ECT untouched (RFC 3168)
    const std::span<const std::uint8_t> ip(out[0].bytes.data() + UdpLink::kDatagramOffset - 28, 20);
    CHECK(urnic::wire::ipv4_header_checksum_ok(ip));
  }
  CHECK(st.counters().ce_marked == 2);
  CHECK(st.counters().dropped == 0);
}
