// Views over the InfiniBand transport headers (IBA 9.2 BTH, 9.3 extension
// headers) and the RoCE v2 CNP body (annex A17.9.2). Sizes come from
// hdr_size() in ib_opcode.hpp, so the table and the views cannot disagree.
// Where the headers start is the opcode table's business (ib_codec.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "wire/bytes.hpp"
#include "wire/ib_opcode.hpp"
#include "wire/result.hpp"

namespace urnic::wire {

// Generates the boilerplate shared by every IB header view: the size from the
// opcode table, the unchecked constructor and the length-checked parse().
template <class Derived, class Byte, std::size_t Size>
class IbHeaderView : public HeaderView<Byte, Size> {
 public:
  using HeaderView<Byte, Size>::HeaderView;
  static Result<Derived> parse(std::span<Byte> s) noexcept {
    if (s.size() < Size) return WireError::kTruncated;
    return Derived(s.data());
  }
};

// IBA 9.2, figure 100: Base Transport Header.
template <class Byte>
class BasicBthView : public IbHeaderView<BasicBthView<Byte>, Byte, kBthSize> {
  using Base = IbHeaderView<BasicBthView<Byte>, Byte, kBthSize>;

 public:
  using OpCode = Field<0, 1, 8>;
  using Se = Field<1, 1, 1, 7>;      // solicited event
  using MigReq = Field<1, 1, 1, 6>;
  using PadCnt = Field<1, 1, 2, 4>;  // pad bytes before the ICRC
  using TVer = Field<1, 1, 4>;       // transport header version, 0 (IBA 9.2.4)
  using PKey = Field<2, 2, 16>;
  // Byte 4: FECN, BECN and 6 reserved bits (RoCE: the whole byte is masked in
  // the ICRC, annex A17.8 / IBA 7.8.1).
  using Fecn = Field<4, 1, 1, 7>;
  using Becn = Field<4, 1, 1, 6>;
  using Resv6 = Field<4, 1, 6>;
  using Resv8a = Field<4, 1, 8>;
  using DestQp = Field<5, 3, 24>;
  using AckReq = Field<8, 1, 1, 7>;
  using Resv7 = Field<8, 1, 7>;
  using Psn = Field<9, 3, 24>;

  using Base::Base;
  // clang-format off
  uint8_t opcode() const noexcept { return this->template get<OpCode>(); }
  bool se() const noexcept { return this->template get<Se>() != 0; }
  bool mig_req() const noexcept { return this->template get<MigReq>() != 0; }
  uint8_t pad_cnt() const noexcept { return this->template get<PadCnt>(); }
  uint8_t tver() const noexcept { return this->template get<TVer>(); }
  uint16_t pkey() const noexcept { return this->template get<PKey>(); }
  bool fecn() const noexcept { return this->template get<Fecn>() != 0; }
  bool becn() const noexcept { return this->template get<Becn>() != 0; }
  uint8_t resv6() const noexcept { return this->template get<Resv6>(); }
  uint8_t resv8a() const noexcept { return this->template get<Resv8a>(); }
  uint32_t dest_qp() const noexcept { return this->template get<DestQp>(); }
  bool ack_req() const noexcept { return this->template get<AckReq>() != 0; }
  uint8_t resv7() const noexcept { return this->template get<Resv7>(); }
  uint32_t psn() const noexcept { return this->template get<Psn>(); }

  void set_opcode(uint8_t v) const noexcept requires Base::kWritable { this->template set<OpCode>(v); }
  void set_se(bool v) const noexcept requires Base::kWritable { this->template set<Se>(v ? 1 : 0); }
  void set_mig_req(bool v) const noexcept requires Base::kWritable { this->template set<MigReq>(v ? 1 : 0); }
  void set_pad_cnt(uint8_t v) const noexcept requires Base::kWritable { this->template set<PadCnt>(v); }
  void set_tver(uint8_t v) const noexcept requires Base::kWritable { this->template set<TVer>(v); }
  void set_pkey(uint16_t v) const noexcept requires Base::kWritable { this->template set<PKey>(v); }
  void set_fecn(bool v) const noexcept requires Base::kWritable { this->template set<Fecn>(v ? 1 : 0); }
  void set_becn(bool v) const noexcept requires Base::kWritable { this->template set<Becn>(v ? 1 : 0); }
  void set_resv6(uint8_t v) const noexcept requires Base::kWritable { this->template set<Resv6>(v); }
  void set_resv8a(uint8_t v) const noexcept requires Base::kWritable { this->template set<Resv8a>(v); }
  void set_dest_qp(uint32_t v) const noexcept requires Base::kWritable { this->template set<DestQp>(v); }
  void set_ack_req(bool v) const noexcept requires Base::kWritable { this->template set<AckReq>(v ? 1 : 0); }
  void set_resv7(uint8_t v) const noexcept requires Base::kWritable { this->template set<Resv7>(v); }
  void set_psn(uint32_t v) const noexcept requires Base::kWritable { this->template set<Psn>(v); }
  // clang-format on
};
using BthView = BasicBthView<const uint8_t>;
using MutBthView = BasicBthView<uint8_t>;

// IBA 9.3.1, figure 102: Reliable Datagram ETH (RD is not implemented; the
// view exists so a decoder can name it).
template <class Byte>
class BasicRdethView : public IbHeaderView<BasicRdethView<Byte>, Byte, hdr_size(Hdr::kRdeth)> {
  using Base = IbHeaderView<BasicRdethView<Byte>, Byte, hdr_size(Hdr::kRdeth)>;

 public:
  using Resv8 = Field<0, 1, 8>;
  using Een = Field<1, 3, 24>;  // end-to-end context
  using Base::Base;
  // clang-format off
  uint32_t een() const noexcept { return this->template get<Een>(); }
  void set_een(uint32_t v) const noexcept requires Base::kWritable { this->template set<Een>(v); }
  // clang-format on
};
using RdethView = BasicRdethView<const uint8_t>;
using MutRdethView = BasicRdethView<uint8_t>;

// IBA 9.3.2, figure 103: Datagram ETH.
template <class Byte>
class BasicDethView : public IbHeaderView<BasicDethView<Byte>, Byte, hdr_size(Hdr::kDeth)> {
  using Base = IbHeaderView<BasicDethView<Byte>, Byte, hdr_size(Hdr::kDeth)>;

 public:
  using QKey = Field<0, 4, 32>;
  using Resv8 = Field<4, 1, 8>;
  using SrcQp = Field<5, 3, 24>;
  using Base::Base;
  // clang-format off
  uint32_t qkey() const noexcept { return this->template get<QKey>(); }
  uint8_t resv8() const noexcept { return this->template get<Resv8>(); }
  uint32_t src_qp() const noexcept { return this->template get<SrcQp>(); }
  void set_qkey(uint32_t v) const noexcept requires Base::kWritable { this->template set<QKey>(v); }
  void set_resv8(uint8_t v) const noexcept requires Base::kWritable { this->template set<Resv8>(v); }
  void set_src_qp(uint32_t v) const noexcept requires Base::kWritable { this->template set<SrcQp>(v); }
  // clang-format on
};
using DethView = BasicDethView<const uint8_t>;
using MutDethView = BasicDethView<uint8_t>;

// The XRC annex of the IBA: XRC ETH, the destination XRC SRQ of an XRC
// request (8 reserved bits, 24-bit XRCSRQ).
template <class Byte>
class BasicXrcethView : public IbHeaderView<BasicXrcethView<Byte>, Byte, hdr_size(Hdr::kXrceth)> {
  using Base = IbHeaderView<BasicXrcethView<Byte>, Byte, hdr_size(Hdr::kXrceth)>;

 public:
  using Resv8 = Field<0, 1, 8>;
  using XrcSrq = Field<1, 3, 24>;
  using Base::Base;
  // clang-format off
  uint32_t xrc_srq() const noexcept { return this->template get<XrcSrq>(); }
  void set_xrc_srq(uint32_t v) const noexcept requires Base::kWritable { this->template set<XrcSrq>(v); }
  // clang-format on
};
using XrcethView = BasicXrcethView<const uint8_t>;
using MutXrcethView = BasicXrcethView<uint8_t>;

// IBA 9.3.3, figure 104: RDMA ETH.
template <class Byte>
class BasicRethView : public IbHeaderView<BasicRethView<Byte>, Byte, hdr_size(Hdr::kReth)> {
  using Base = IbHeaderView<BasicRethView<Byte>, Byte, hdr_size(Hdr::kReth)>;

 public:
  using Va = Field<0, 8, 64>;
  using RKey = Field<8, 4, 32>;
  using DmaLen = Field<12, 4, 32>;
  using Base::Base;
  // clang-format off
  uint64_t va() const noexcept { return this->template get<Va>(); }
  uint32_t rkey() const noexcept { return this->template get<RKey>(); }
  uint32_t dma_len() const noexcept { return this->template get<DmaLen>(); }
  void set_va(uint64_t v) const noexcept requires Base::kWritable { this->template set<Va>(v); }
  void set_rkey(uint32_t v) const noexcept requires Base::kWritable { this->template set<RKey>(v); }
  void set_dma_len(uint32_t v) const noexcept requires Base::kWritable { this->template set<DmaLen>(v); }
  // clang-format on
};
using RethView = BasicRethView<const uint8_t>;
using MutRethView = BasicRethView<uint8_t>;

// IBA 9.3.4, figure 105: Atomic ETH.
template <class Byte>
class BasicAtomicEthView : public IbHeaderView<BasicAtomicEthView<Byte>, Byte, hdr_size(Hdr::kAtomicEth)> {
  using Base = IbHeaderView<BasicAtomicEthView<Byte>, Byte, hdr_size(Hdr::kAtomicEth)>;

 public:
  using Va = Field<0, 8, 64>;
  using RKey = Field<8, 4, 32>;
  using SwapAdd = Field<12, 8, 64>;  // swap (CmpSwap) or add (FetchAdd) data
  using Compare = Field<20, 8, 64>;
  using Base::Base;
  // clang-format off
  uint64_t va() const noexcept { return this->template get<Va>(); }
  uint32_t rkey() const noexcept { return this->template get<RKey>(); }
  uint64_t swap_add() const noexcept { return this->template get<SwapAdd>(); }
  uint64_t compare() const noexcept { return this->template get<Compare>(); }
  void set_va(uint64_t v) const noexcept requires Base::kWritable { this->template set<Va>(v); }
  void set_rkey(uint32_t v) const noexcept requires Base::kWritable { this->template set<RKey>(v); }
  void set_swap_add(uint64_t v) const noexcept requires Base::kWritable { this->template set<SwapAdd>(v); }
  void set_compare(uint64_t v) const noexcept requires Base::kWritable { this->template set<Compare>(v); }
  // clang-format on
};
using AtomicEthView = BasicAtomicEthView<const uint8_t>;
using MutAtomicEthView = BasicAtomicEthView<uint8_t>;

// IBA 9.3.5, figure 106: ACK ETH.
template <class Byte>
class BasicAethView : public IbHeaderView<BasicAethView<Byte>, Byte, hdr_size(Hdr::kAeth)> {
  using Base = IbHeaderView<BasicAethView<Byte>, Byte, hdr_size(Hdr::kAeth)>;

 public:
  using Syndrome = Field<0, 1, 8>;
  using Msn = Field<1, 3, 24>;
  using Base::Base;
  // clang-format off
  uint8_t syndrome() const noexcept { return this->template get<Syndrome>(); }
  uint32_t msn() const noexcept { return this->template get<Msn>(); }
  void set_syndrome(uint8_t v) const noexcept requires Base::kWritable { this->template set<Syndrome>(v); }
  void set_msn(uint32_t v) const noexcept requires Base::kWritable { this->template set<Msn>(v); }
  // clang-format on
};
using AethView = BasicAethView<const uint8_t>;
using MutAethView = BasicAethView<uint8_t>;

// IBA 9.5.3, figure 108: Atomic Acknowledge ETH.
template <class Byte>
class BasicAtomicAckEthView : public IbHeaderView<BasicAtomicAckEthView<Byte>, Byte, hdr_size(Hdr::kAtomicAckEth)> {
  using Base = IbHeaderView<BasicAtomicAckEthView<Byte>, Byte, hdr_size(Hdr::kAtomicAckEth)>;

 public:
  using OrigRemDt = Field<0, 8, 64>;  // the original remote data
  using Base::Base;
  // clang-format off
  uint64_t orig() const noexcept { return this->template get<OrigRemDt>(); }
  void set_orig(uint64_t v) const noexcept requires Base::kWritable { this->template set<OrigRemDt>(v); }
  // clang-format on
};
using AtomicAckEthView = BasicAtomicAckEthView<const uint8_t>;
using MutAtomicAckEthView = BasicAtomicAckEthView<uint8_t>;

// IBA 9.3.6, figure 107: Immediate Data.
template <class Byte>
class BasicImmDtView : public IbHeaderView<BasicImmDtView<Byte>, Byte, hdr_size(Hdr::kImmDt)> {
  using Base = IbHeaderView<BasicImmDtView<Byte>, Byte, hdr_size(Hdr::kImmDt)>;

 public:
  using Imm = Field<0, 4, 32>;
  using Base::Base;
  // clang-format off
  uint32_t imm() const noexcept { return this->template get<Imm>(); }
  void set_imm(uint32_t v) const noexcept requires Base::kWritable { this->template set<Imm>(v); }
  // clang-format on
};
using ImmDtView = BasicImmDtView<const uint8_t>;
using MutImmDtView = BasicImmDtView<uint8_t>;

// IBA 9.3.7 (1.2 errata, base memory management extensions): Invalidate ETH.
template <class Byte>
class BasicIethView : public IbHeaderView<BasicIethView<Byte>, Byte, hdr_size(Hdr::kIeth)> {
  using Base = IbHeaderView<BasicIethView<Byte>, Byte, hdr_size(Hdr::kIeth)>;

 public:
  using RKey = Field<0, 4, 32>;
  using Base::Base;
  // clang-format off
  uint32_t rkey() const noexcept { return this->template get<RKey>(); }
  void set_rkey(uint32_t v) const noexcept requires Base::kWritable { this->template set<RKey>(v); }
  // clang-format on
};
using IethView = BasicIethView<const uint8_t>;
using MutIethView = BasicIethView<uint8_t>;

// RoCEv2 annex A17.9.2: a CNP is a BTH (opcode 0x81, the destination QP that
// saw congestion marks, PSN 0, FECN 0, BECN 1) followed by 16 reserved bytes.
template <class Byte>
class BasicCnpView : public IbHeaderView<BasicCnpView<Byte>, Byte, hdr_size(Hdr::kCnpPad)> {
  using Base = IbHeaderView<BasicCnpView<Byte>, Byte, hdr_size(Hdr::kCnpPad)>;

 public:
  using Base::Base;
  // True when all 16 bytes are zero, as the annex says senders set them.
  bool reserved_zero() const noexcept {
    for (std::size_t i = 0; i < Base::kSize; ++i)
      if (this->p_[i] != 0) return false;
    return true;
  }
  void clear() const noexcept
    requires Base::kWritable
  {
    for (std::size_t i = 0; i < Base::kSize; ++i) this->p_[i] = 0;
  }
};
using CnpView = BasicCnpView<const uint8_t>;
using MutCnpView = BasicCnpView<uint8_t>;

}  // namespace urnic::wire
