// An RC SEND Only packet (ACK requested, padded to 4 bytes) for the link
// tests (udp_link_test, afpacket_link_test) to send through a link.
#pragma once

#include <cstdint>

#include "wire/ib_codec.hpp"

namespace urnic::test {

inline wire::IbPacket send_only(std::uint32_t qpn, std::uint32_t psn, wire::Bytes payload) {
  wire::IbPacket p;
  p.bth.opcode = wire::opcode::kRc | wire::opcode::kSendOnly;
  p.bth.dest_qp = qpn;
  p.bth.psn = wire::Psn(psn);
  p.bth.ack_req = true;
  p.bth.pad = wire::ib_pad_for(payload.size());
  p.payload = payload;
  return p;
}

}  // namespace urnic::test
