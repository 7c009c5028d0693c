// urnic-conform-agent's iWARP passive side (issue 20): an rdma_cm listener
// on the device's address that accepts the tester's connection by itself
// (a thread waits for the CM events), with a registered buffer and receives
// posted before the accept. Commands (tools/conform/IWARP.md):
//   listen port=P [addr=A] [buf=N] [recv=N] [recv_len=L] [access=wr]
//          [ird=N] [ord=N]             -> ok port=P
//   conn [ms=M]   waits until ESTABLISHED (or M ms) -> ok state=... qpn= stag=
//                 lkey= addr= len= req_pd_len= req_pd=HEX16 req_ird= req_ord=
//   iwstate       -> ok state=listening|established|disconnected|error|none
// Once connected, the agent's verbs commands (recv, send, poll, mem, fill,
// state) act on the accepted QP (Agent adopts `objects()`).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

namespace urnic::conform_agent {

using Args = std::map<std::string, std::string>;

// IBV_ACCESS_REMOTE_* flags from the letters the agent's commands take (w
// write, r read, a atomic, - none); `allowed` lists those a command accepts
// and `key` names it in the error.
inline int remote_access(const std::string& letters, const std::string& allowed, const std::string& key) {
  int flags = 0;
  for (char c : letters) {
    if (c == '-') continue;
    if (allowed.find(c) == std::string::npos) {
      std::string list;
      for (char l : allowed) list += std::string(1, l) + ", ";
      throw std::runtime_error("bad " + key + " letter (" + list + "-)");
    }
    flags |= c == 'w' ? IBV_ACCESS_REMOTE_WRITE : c == 'r' ? IBV_ACCESS_REMOTE_READ : IBV_ACCESS_REMOTE_ATOMIC;
  }
  return flags;
}

struct IwObjects {
  ibv_qp* qp = nullptr;
  ibv_cq* cq = nullptr;
  ibv_mr* mr = nullptr;
  uint8_t* buf = nullptr;
  std::size_t len = 0;
};

class IwAgent {
 public:
  IwAgent();
  ~IwAgent();
  IwAgent(const IwAgent&) = delete;
  IwAgent& operator=(const IwAgent&) = delete;

  static bool handles(const std::string& cmd) { return cmd == "listen" || cmd == "conn" || cmd == "iwstate"; }
  // Throws std::runtime_error with the reason ("err ..." for the tester).
  std::string handle(const std::string& cmd, const Args& a);
  // The accepted connection's verbs objects, once ESTABLISHED.
  std::optional<IwObjects> objects();
  void destroy();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace urnic::conform_agent
