// Views over the InfiniBand transport headers (IBA 9.2 BTH, 9.3 extension
// headers) and the RoCE v2 CNP body (annex A17.9.2). Sizes come from
// hdr_size() in ib_opcode.hpp, so the table and the views cannot disagree.
// Where the headers start is the opcode table's business (ib_codec.hpp).
// Each field is one URNIC_WIRE_FIELD line (wire/bytes.hpp): accessor name,
// descriptor name, then byte, first bit (0 = MSB) and width in bits exactly
// as the IBA figure draws it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "wire/bytes.hpp"
#include "wire/ib_opcode.hpp"
#include "wire/result.hpp"

namespace urnic::wire {

// IBA 9.2, figure 100: Base Transport Header.
template <class Byte>
class BasicBthView : public FixedSizeView<BasicBthView<Byte>, Byte, kBthSize> {
  using Base = FixedSizeView<BasicBthView<Byte>, Byte, kBthSize>;

 public:
  using Base::Base;
  URNIC_WIRE_FIELD(opcode, OpCode, 0, 0, 8)
  URNIC_WIRE_FIELD(se, Se, 1, 0, 1)  // solicited event
  URNIC_WIRE_FIELD(mig_req, MigReq, 1, 1, 1)
  URNIC_WIRE_FIELD(pad_cnt, PadCnt, 1, 2, 2)  // pad bytes before the ICRC
  URNIC_WIRE_FIELD(tver, TVer, 1, 4, 4)       // transport header version, 0 (IBA 9.2.4)
  URNIC_WIRE_FIELD(pkey, PKey, 2, 0, 16)
  // Byte 4: FECN, BECN and 6 reserved bits (RoCE: the whole byte is masked in
  // the ICRC, annex A17.8 / IBA 7.8.1).
  URNIC_WIRE_FIELD(fecn, Fecn, 4, 0, 1)
  URNIC_WIRE_FIELD(becn, Becn, 4, 1, 1)
  URNIC_WIRE_FIELD(resv6, Resv6, 4, 2, 6)
  URNIC_WIRE_FIELD(resv8a, Resv8a, 4, 0, 8)
  URNIC_WIRE_FIELD(dest_qp, DestQp, 5, 0, 24)
  URNIC_WIRE_FIELD(ack_req, AckReq, 8, 0, 1)
  URNIC_WIRE_FIELD(resv7, Resv7, 8, 1, 7)
  URNIC_WIRE_FIELD(psn, Psn, 9, 0, 24)
};
using BthView = BasicBthView<const uint8_t>;
using MutBthView = BasicBthView<uint8_t>;

// IBA 9.3.1, figure 102: Reliable Datagram ETH (RD is not implemented; the
// view exists so a decoder can name it).
template <class Byte>
class BasicRdethView : public FixedSizeView<BasicRdethView<Byte>, Byte, hdr_size(Hdr::kRdeth)> {
  using Base = FixedSizeView<BasicRdethView<Byte>, Byte, hdr_size(Hdr::kRdeth)>;

 public:
  using Base::Base;
  URNIC_WIRE_FIELD(resv8, Resv8, 0, 0, 8)
  URNIC_WIRE_FIELD(een, Een, 1, 0, 24)  // end-to-end context
};
using RdethView = BasicRdethView<const uint8_t>;
using MutRdethView = BasicRdethView<uint8_t>;

// IBA 9.3.2, figure 103: Datagram ETH.
template <class Byte>
class BasicDethView : public FixedSizeView<BasicDethView<Byte>, Byte, hdr_size(Hdr::kDeth)> {
  using Base = FixedSizeView<BasicDethView<Byte>, Byte, hdr_size(Hdr::kDeth)>;

 public:
  using Base::Base;
  URNIC_WIRE_FIELD(qkey, QKey, 0, 0, 32)
  URNIC_WIRE_FIELD(resv8, Resv8, 4, 0, 8)
  URNIC_WIRE_FIELD(src_qp, SrcQp, 5, 0, 24)
};
using DethView = BasicDethView<const uint8_t>;
using MutDethView = BasicDethView<uint8_t>;

// The XRC annex of the IBA: XRC ETH, the destination XRC SRQ of an XRC
// request (8 reserved bits, 24-bit XRCSRQ).
template <class Byte>
class BasicXrcethView : public FixedSizeView<BasicXrcethView<Byte>, Byte, hdr_size(Hdr::kXrceth)> {
  using Base = FixedSizeView<BasicXrcethView<Byte>, Byte, hdr_size(Hdr::kXrceth)>;

 public:
  using Base::Base;
  URNIC_WIRE_FIELD(resv8, Resv8, 0, 0, 8)
  URNIC_WIRE_FIELD(xrc_srq, XrcSrq, 1, 0, 24)
};
using XrcethView = BasicXrcethView<const uint8_t>;
using MutXrcethView = BasicXrcethView<uint8_t>;

// IBA 9.3.3, figure 104: RDMA ETH.
template <class Byte>
class BasicRethView : public FixedSizeView<BasicRethView<Byte>, Byte, hdr_size(Hdr::kReth)> {
  using Base = FixedSizeView<BasicRethView<Byte>, Byte, hdr_size(Hdr::kReth)>;

 public:
  using Base::Base;
  URNIC_WIRE_FIELD(va, Va, 0, 0, 64)
  URNIC_WIRE_FIELD(rkey, RKey, 8, 0, 32)
  URNIC_WIRE_FIELD(dma_len, DmaLen, 12, 0, 32)
};
using RethView = BasicRethView<const uint8_t>;
using MutRethView = BasicRethView<uint8_t>;

// IBA 9.3.4, figure 105: Atomic ETH.
template <class Byte>
class BasicAtomicEthView : public FixedSizeView<BasicAtomicEthView<Byte>, Byte, hdr_size(Hdr::kAtomicEth)> {
  using Base = FixedSizeView<BasicAtomicEthView<Byte>, Byte, hdr_size(Hdr::kAtomicEth)>;

 public:
  using Base::Base;
  URNIC_WIRE_FIELD(va, Va, 0, 0, 64)
  URNIC_WIRE_FIELD(rkey, RKey, 8, 0, 32)
  URNIC_WIRE_FIELD(swap_add, SwapAdd, 12, 0, 64)  // swap (CmpSwap) or add (FetchAdd) data
  URNIC_WIRE_FIELD(compare, Compare, 20, 0, 64)
};
using AtomicEthView = BasicAtomicEthView<const uint8_t>;
using MutAtomicEthView = BasicAtomicEthView<uint8_t>;

// IBA 9.3.5, figure 106: ACK ETH.
template <class Byte>
class BasicAethView : public FixedSizeView<BasicAethView<Byte>, Byte, hdr_size(Hdr::kAeth)> {
  using Base = FixedSizeView<BasicAethView<Byte>, Byte, hdr_size(Hdr::kAeth)>;

 public:
  using Base::Base;
  URNIC_WIRE_FIELD(syndrome, Syndrome, 0, 0, 8)
  URNIC_WIRE_FIELD(msn, Msn, 1, 0, 24)
};
using AethView = BasicAethView<const uint8_t>;
using MutAethView = BasicAethView<uint8_t>;

// IBA 9.5.3, figure 108: Atomic Acknowledge ETH.
template <class Byte>
class BasicAtomicAckEthView : public FixedSizeView<BasicAtomicAckEthView<Byte>, Byte, hdr_size(Hdr::kAtomicAckEth)> {
  using Base = FixedSizeView<BasicAtomicAckEthView<Byte>, Byte, hdr_size(Hdr::kAtomicAckEth)>;

 public:
  using Base::Base;
  URNIC_WIRE_FIELD(orig, OrigRemDt, 0, 0, 64)  // the original remote data
};
using AtomicAckEthView = BasicAtomicAckEthView<const uint8_t>;
using MutAtomicAckEthView = BasicAtomicAckEthView<uint8_t>;

// IBA 9.3.6, figure 107: Immediate Data.
template <class Byte>
class BasicImmDtView : public FixedSizeView<BasicImmDtView<Byte>, Byte, hdr_size(Hdr::kImmDt)> {
  using Base = FixedSizeView<BasicImmDtView<Byte>, Byte, hdr_size(Hdr::kImmDt)>;

 public:
  using Base::Base;
  URNIC_WIRE_FIELD(imm, Imm, 0, 0, 32)
};
using ImmDtView = BasicImmDtView<const uint8_t>;
using MutImmDtView = BasicImmDtView<uint8_t>;

// IBA 9.3.7 (1.2 errata, base memory management extensions): Invalidate ETH.
template <class Byte>
class BasicIethView : public FixedSizeView<BasicIethView<Byte>, Byte, hdr_size(Hdr::kIeth)> {
  using Base = FixedSizeView<BasicIethView<Byte>, Byte, hdr_size(Hdr::kIeth)>;

 public:
  using Base::Base;
  URNIC_WIRE_FIELD(rkey, RKey, 0, 0, 32)
};
using IethView = BasicIethView<const uint8_t>;
using MutIethView = BasicIethView<uint8_t>;

// RoCEv2 annex A17.9.2: a CNP is a BTH (opcode 0x81, the destination QP that
// saw congestion marks, PSN 0, FECN 0, BECN 1) followed by 16 reserved bytes.
template <class Byte>
class BasicCnpView : public FixedSizeView<BasicCnpView<Byte>, Byte, hdr_size(Hdr::kCnpPad)> {
  using Base = FixedSizeView<BasicCnpView<Byte>, Byte, hdr_size(Hdr::kCnpPad)>;

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
