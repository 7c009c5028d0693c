// Control messages of the umad shim (issue 51): the drop-in libibumad.so.3
// (umad_shim/) <-> urnicd's MAD service (engine/control/umad_service). What
// the kernel's ib_umad character device is to libibumad. Same rules as
// ctl_proto.hpp (fixed layout, asserted offsets, host byte order; the MAD
// itself is the wire's 256 bytes, big-endian); the MsgType numbers
// (130..134) are declared there. No opened device is needed.
//
// A umad "port" is one control connection: UmadOpen binds it to a device's
// port and passes the daemon one end of a SOCK_SEQPACKET socket pair, on
// which the daemon writes every MAD for the port's agents (responses, and
// requests for an agent registered as a responder) as one UmadRecv each;
// the shim's end is what umad_get_fd returns. UmadSend is answered once the
// MAD went where it goes (so its response, if the port's own SMA gave one,
// is already on the socket when umad_send returns).
#pragma once

#include <cstddef>
#include <cstdint>

#include "hostif/ctl_proto.hpp"

namespace urnic::hostif::ctl {

inline constexpr std::size_t kUmadMadSize = 256;
inline constexpr std::size_t kUmadMaxPkeys = 32;
// Agents one umad port may register (the kernel's IB_UMAD_MAX_AGENTS).
inline constexpr std::uint32_t kUmadMaxAgents = 32;

// ib_mad_addr's contents (umad.h), host byte order.
struct UmadAddr {
  std::uint32_t qpn;
  std::uint32_t qkey;
  std::uint16_t lid;
  std::uint8_t sl;
  std::uint8_t path_bits;
  std::uint8_t grh_present;
  std::uint8_t gid_index;
  std::uint8_t hop_limit;
  std::uint8_t traffic_class;
  std::uint8_t gid[16];
  std::uint32_t flow_label;
  std::uint16_t pkey_index;
  std::uint16_t reserved;
};
static_assert(sizeof(UmadAddr) == 40);
static_assert(offsetof(UmadAddr, lid) == 8);
static_assert(offsetof(UmadAddr, gid) == 16);
static_assert(offsetof(UmadAddr, flow_label) == 32);
static_assert(offsetof(UmadAddr, pkey_index) == 36);

// What umad_get_ca / umad_get_port show of one port (the kernel's sysfs
// files for it).
struct UmadQueryPortReq {
  static constexpr MsgType kType = MsgType::kUmadQueryPort;
  char name[kNameLen];
  std::uint32_t port;
  std::uint32_t reserved;
};
static_assert(sizeof(UmadQueryPortReq) == 72);

struct UmadQueryPortRep {
  static constexpr MsgType kType = MsgType::kUmadQueryPort;
  std::uint64_t node_guid;          // network byte order
  std::uint64_t sys_image_guid;     // network byte order
  std::uint64_t gid_prefix;         // network byte order
  std::uint64_t port_guid;          // network byte order
  PortAttrs port;
  std::uint32_t node_type;          // enum ibv_node_type
  std::uint32_t pkey_count;
  std::uint16_t pkeys[kUmadMaxPkeys];
  char fw_ver[kNameLen];
};
static_assert(sizeof(UmadQueryPortRep) == 32 + sizeof(PortAttrs) + 8 + 2 * kUmadMaxPkeys + kNameLen);
static_assert(offsetof(UmadQueryPortRep, port) == 32);
static_assert(offsetof(UmadQueryPortRep, node_type) == 32 + sizeof(PortAttrs));

// fd[0]: the daemon's end of the port's SOCK_SEQPACKET socket pair.
struct UmadOpenReq {
  static constexpr MsgType kType = MsgType::kUmadOpen;
  char name[kNameLen];
  std::uint32_t port;
  std::uint32_t reserved;
};
static_assert(sizeof(UmadOpenReq) == 72);

struct UmadOpenRep {
  static constexpr MsgType kType = MsgType::kUmadOpen;
  std::uint64_t reserved;
};
static_assert(sizeof(UmadOpenRep) == 8);

// umad_register / umad_register_oui: method_mask empty = only responses to
// what the agent sends; a method in it = requests of that method (of this
// class and version) on the port come to this agent.
struct UmadRegisterReq {
  static constexpr MsgType kType = MsgType::kUmadRegister;
  std::uint8_t mgmt_class;
  std::uint8_t class_version;
  std::uint8_t rmpp_version;
  std::uint8_t reserved;
  std::uint32_t oui;                // vendor classes 0x30..0x4F (umad_register_oui), else 0
  std::uint32_t method_mask[4];     // bit m of word m/32: method m
};
static_assert(sizeof(UmadRegisterReq) == 24);
static_assert(offsetof(UmadRegisterReq, method_mask) == 8);

struct UmadRegisterRep {
  static constexpr MsgType kType = MsgType::kUmadRegister;
  std::uint32_t agent_id;
  std::uint32_t reserved;
};
static_assert(sizeof(UmadRegisterRep) == 8);

struct UmadUnregisterReq {
  static constexpr MsgType kType = MsgType::kUmadUnregister;
  std::uint32_t agent_id;
  std::uint32_t reserved;
};
static_assert(sizeof(UmadUnregisterReq) == 8);

struct UmadUnregisterRep {
  static constexpr MsgType kType = MsgType::kUmadUnregister;
  std::uint32_t agent_id;
  std::uint32_t reserved;
};
static_assert(sizeof(UmadUnregisterRep) == 8);

struct UmadSendReq {
  static constexpr MsgType kType = MsgType::kUmadSend;
  std::uint32_t agent_id;
  std::uint32_t timeout_ms;         // 0: no response expected
  std::uint32_t retries;
  std::uint32_t length;             // of the MAD: 24..256
  UmadAddr addr;                    // the destination
  std::uint8_t mad[kUmadMadSize];
};
static_assert(sizeof(UmadSendReq) == 16 + sizeof(UmadAddr) + kUmadMadSize);
static_assert(offsetof(UmadSendReq, addr) == 16);
static_assert(offsetof(UmadSendReq, mad) == 56);

struct UmadSendRep {
  static constexpr MsgType kType = MsgType::kUmadSend;
  std::uint64_t reserved;
};
static_assert(sizeof(UmadSendRep) == 8);

// One MAD for an agent of the port, on the port's socket (not a control
// message: no header). status: 0, or ETIMEDOUT for a request of the agent's
// that nothing will answer (the sent MAD comes back, as the kernel returns
// it after its timeout).
struct UmadRecv {
  std::uint32_t agent_id;
  std::uint32_t status;
  std::uint32_t length;
  std::uint32_t reserved;
  UmadAddr addr;                    // the source
  std::uint8_t mad[kUmadMadSize];
};
static_assert(sizeof(UmadRecv) == 16 + sizeof(UmadAddr) + kUmadMadSize);
static_assert(offsetof(UmadRecv, addr) == 16);
static_assert(offsetof(UmadRecv, mad) == 56);

}  // namespace urnic::hostif::ctl
