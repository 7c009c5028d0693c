// SMPs as a subnet manager sends them, for the tests of an InfiniBand port
// (ib_sma_test: the SMA itself; ib_data_test: ports brought ACTIVE before
// data flows over LIDs).
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>

#include "engine/device/ib_sma.hpp"
#include "wire/bytes.hpp"

namespace urnic::test::ibsmp {

namespace smp = engine::smp;

inline constexpr std::uint64_t kTid = 0x0123456789abcdefULL;
inline constexpr std::uint8_t kDirected = 0x81;
inline constexpr std::uint8_t kLidRouted = 0x01;
inline constexpr std::uint8_t kGet = 0x01;
inline constexpr std::uint8_t kSet = 0x02;

using Mad = std::array<std::uint8_t, smp::kSize>;

inline Mad make_smp(std::uint8_t mgmt_class, std::uint8_t method, std::uint16_t attr, std::uint32_t modifier = 0,
                    std::uint8_t hop_ptr = 0, std::uint8_t hop_cnt = 0) {
  Mad m{};
  m[0] = 1;  // base version
  m[1] = mgmt_class;
  m[2] = 1;  // class version
  m[3] = method;
  m[6] = hop_ptr;
  m[7] = hop_cnt;
  wire::store_be64(&m[8], kTid);
  wire::store_be16(&m[16], attr);
  wire::store_be32(&m[20], modifier);
  if (mgmt_class == kDirected) {
    wire::store_be16(&m[32], 0xFFFF);  // DrSLID, DrDLID: permissive (IBA 14.2.1.2: after the M_Key)
    wire::store_be16(&m[34], 0xFFFF);
  }
  return m;
}

inline std::uint16_t status_of(const Mad& m) { return wire::load_be16(&m[4]); }
inline std::uint8_t* data_of(Mad& m) { return &m[smp::kDataOffset]; }

inline engine::SmaVerdict run_smp(engine::IbSma& sma, Mad& m, engine::SmpOrigin origin = engine::SmpOrigin::kLocal) {
  return sma.handle(std::span<std::uint8_t, smp::kSize>(m), origin);
}

// A PortInfo Set from the current PortInfo (as OpenSM builds it: Get, change, Set).
inline Mad port_info_set(engine::IbSma& sma) {
  Mad get = make_smp(kDirected, kGet, smp::kAttrPortInfo);
  REQUIRE(run_smp(sma, get) == engine::SmaVerdict::kReply);
  Mad set = make_smp(kDirected, kSet, smp::kAttrPortInfo);
  std::copy(data_of(get), data_of(get) + smp::kDataSize, data_of(set));
  return set;
}

inline void set_lid_sm_state(Mad& set, std::uint16_t lid, std::uint16_t sm_lid, std::uint8_t state) {
  wire::store_be16(data_of(set) + 16, lid);
  wire::store_be16(data_of(set) + 18, sm_lid);
  data_of(set)[32] = static_cast<std::uint8_t>((data_of(set)[32] & 0xF0) | state);
}

// What an SM's sweep does to a port that is INIT with its link up: LID and
// SM LID, then ARMED, then ACTIVE.
inline void activate_port(engine::IbSma& sma, std::uint16_t lid, std::uint16_t sm_lid) {
  Mad arm = port_info_set(sma);
  set_lid_sm_state(arm, lid, sm_lid, 3);
  REQUIRE(run_smp(sma, arm) == engine::SmaVerdict::kReply);
  REQUIRE(status_of(arm) == smp::kStatusDirection);
  Mad act = port_info_set(sma);
  set_lid_sm_state(act, lid, sm_lid, 4);
  REQUIRE(run_smp(sma, act) == engine::SmaVerdict::kReply);
  REQUIRE(status_of(act) == smp::kStatusDirection);
}

}  // namespace urnic::test::ibsmp
