// The tester's side of urnic-conform-agent's protocol (agent.cpp): one text
// line per command, one line back, "ok key=value ..." or "err reason".
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace urnic::conform {

// The agent failed a command or the connection broke: the case cannot go
// on (an ERROR verdict, not a FAIL of the implementation).
struct AgentError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Reply {
  std::map<std::string, std::string> kv;
  uint64_t num(const std::string& key) const;
  const std::string& str(const std::string& key) const;
};

// One work completion as the agent reports it (ibv_wc's fields).
struct Wc {
  uint64_t id = 0;
  int status = 0;  // enum ibv_wc_status
  int opcode = 0;  // enum ibv_wc_opcode
  uint32_t byte_len = 0;
  uint32_t imm = 0;
  uint32_t src_qp = 0;
};

// ibv_wc_status's name, e.g. "IBV_WC_RETRY_EXC_ERR".
std::string wc_status_name(int status);

class AgentClient {
 public:
  // Connects to HOST:PORT; throws AgentError.
  explicit AgentClient(const std::string& host_port);
  AgentClient(const AgentClient&) = delete;
  AgentClient& operator=(const AgentClient&) = delete;
  ~AgentClient();

  // Sends one command and returns its reply; "err" replies throw AgentError.
  Reply call(const std::string& line);
  // The completions the agent polled: `poll n=N ms=MS`.
  std::vector<Wc> poll(unsigned n, unsigned ms);

 private:
  int fd_ = -1;
  std::string pending_;
};

}  // namespace urnic::conform
