// The iWARP cases (`--transport iwarp`, issue 20): the tester is the MPA
// initiator over a kernel TCP socket (iwarp_endpoint.hpp); the agent
// listens through rdma_cm on the device's address (agent_iwarp.hpp).
// Verdicts and exceptions as for RoCE (conform_case.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tools/conform/conform_case.hpp"
#include "tools/conform/iwarp_endpoint.hpp"

namespace urnic::conform {

struct IwEnv {
  AgentClient& agent;
  Transcript& log;
  const PeerInfo& peer;
  const Options& opt;
  uint32_t device_ip = 0;  // the address the agent listens on
  uint16_t port = 0;       // this case's listening port (one per case: no re-listen races)
};

struct IwCaseDef {
  std::string id;    // e.g. "iw.mpa.crc-reply"
  std::string rule;  // what it checks, citing the RFC section
  std::function<void(IwEnv&)> run;
};

void add_iwarp_mpa_cases(std::vector<IwCaseDef>& out);
void add_iwarp_ddp_cases(std::vector<IwCaseDef>& out);

// ---- shared by the two files (cases_iwarp_mpa.cpp) ----

// What a case's connection asks for in its MPA Request.
struct IwSetup {
  std::string listen_args;  // added to `listen` (buf=, recv=, recv_len=, access=, ird=, ord=)
  uint8_t revision = wire::mpa::kRevision2;
  bool crc = true;
  bool markers = false;
  uint16_t ird = 1, ord = 4;   // the tester's, in the enhanced header
  std::vector<uint8_t> private_data;
  // Pause between the Reply and the RTR. RFC 5044 7.1.2 lets the initiator
  // send at once; the Linux siw responder can lose data that follows its
  // Reply that closely (docs of the peer VMs), so the cases wait 20 ms and
  // iw.mpa.rtr-immediate alone checks the immediate RTR.
  std::chrono::milliseconds rtr_delay{20};
};

// One established connection: the agent's QP and buffer.
struct IwSession {
  std::unique_ptr<IwConn> conn;
  wire::MpaFrame reply;
  std::vector<uint8_t> reply_bytes;
  uint32_t qpn = 0, stag = 0, lkey = 0, len = 0;
  uint64_t addr = 0;
  uint32_t send_msn = 1, rreq_msn = 1;  // the tester's next MSN on QN 0 and QN 1
  Reply conn_reply;
};

// `listen` on the agent, TCP connect, MPA Request; returns the connection
// and what came back (for the MPA cases that judge the answer themselves).
std::unique_ptr<IwConn> iw_connect(IwEnv& env, const IwSetup& s);
wire::MpaFrame iw_request(const IwSetup& s);
// The whole setup: a valid Reply is required (Failure otherwise), the RTR
// is sent if the Reply asks for one (RFC 6581 section 6), FPDU mode starts
// with the negotiated CRC and markers, and the agent reports its QP.
IwSession iw_open(IwEnv& env, const IwSetup& s = {});

// A tagged RDMA Write segment / an untagged Send / a Read Request.
wire::DdpRdmapPacket iw_write(uint32_t stag, uint64_t to, const std::vector<uint8_t>& data, bool last = true);
wire::DdpRdmapPacket iw_send(uint32_t msn, const std::vector<uint8_t>& data, uint32_t mo = 0, bool last = true);
wire::DdpRdmapPacket iw_read_request(uint32_t msn, const wire::ReadRequest& r);
std::vector<uint8_t> iw_encode(const wire::DdpRdmapPacket& p);

// The Terminate the device must send after `sent` (the offending ULPDU):
// layer/etype/ecode, and the copied DDP header (RFC 5040 4.8, D bit) when
// `ddp_hdr`, and the copied Read Request header (R bit) when `rdma_hdr`.
// Allowed alternatives: `alt_ecodes` (with a Warning when `alt_warns`).
// An undecodable FPDU that carries the Terminate opcode, read by hand: its
// control word's bytes as RFC 5040 4.8 lays them out (empty if it is no
// Terminate).
std::string iw_raw_terminate_text(const IwRx& r);

wire::Terminate iw_expect_terminate(IwEnv& env, IwSession& s, uint8_t layer, uint8_t etype, uint8_t ecode,
                                    const std::vector<uint8_t>& sent, bool ddp_hdr, bool rdma_hdr,
                                    std::chrono::milliseconds wait, std::vector<uint8_t> alt_ecodes = {},
                                    bool alt_warns = false);

}  // namespace urnic::conform
