#include "tools/conform/agent_client.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace urnic::conform {

uint64_t Reply::num(const std::string& key) const {
  auto it = kv.find(key);
  if (it == kv.end()) throw AgentError("the agent's reply has no " + key);
  return std::strtoull(it->second.c_str(), nullptr, 0);
}

const std::string& Reply::str(const std::string& key) const {
  auto it = kv.find(key);
  if (it == kv.end()) throw AgentError("the agent's reply has no " + key);
  return it->second;
}

std::string wc_status_name(int status) {
  static const std::array<const char*, 23> names = {
      "SUCCESS", "LOC_LEN_ERR", "LOC_QP_OP_ERR", "LOC_EEC_OP_ERR", "LOC_PROT_ERR", "WR_FLUSH_ERR",
      "MW_BIND_ERR", "BAD_RESP_ERR", "LOC_ACCESS_ERR", "REM_INV_REQ_ERR", "REM_ACCESS_ERR", "REM_OP_ERR",
      "RETRY_EXC_ERR", "RNR_RETRY_EXC_ERR", "LOC_RDD_VIOL_ERR", "REM_INV_RD_REQ_ERR", "REM_ABORT_ERR",
      "INV_EECN_ERR", "INV_EEC_STATE_ERR", "FATAL_ERR", "RESP_TIMEOUT_ERR", "GENERAL_ERR", "TM_ERR"};
  if (status >= 0 && static_cast<std::size_t>(status) < names.size()) return std::string("IBV_WC_") + names[status];
  return "IBV_WC_(" + std::to_string(status) + ")";
}

AgentClient::AgentClient(const std::string& host_port) {
  const auto colon = host_port.rfind(':');
  const std::string host = host_port.substr(0, colon);
  const std::string port = colon == std::string::npos ? "7471" : host_port.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0 || !res)
    throw AgentError("cannot resolve the agent's address " + host_port);
  // The agent may still be starting: a few seconds of retries.
  for (int attempt = 0; attempt < 50 && fd_ < 0; ++attempt) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (::connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
      fd_ = fd;
      break;
    }
    close(fd);
    usleep(100000);
  }
  freeaddrinfo(res);
  if (fd_ < 0) throw AgentError("no urnic-conform-agent answers at " + host_port + " (start it on the peer)");
  const int on = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}

AgentClient::~AgentClient() {
  if (fd_ >= 0) close(fd_);
}

Reply AgentClient::call(const std::string& line) {
  const std::string out = line + "\n";
  if (::send(fd_, out.data(), out.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(out.size()))
    throw AgentError("lost the agent: " + std::string(std::strerror(errno)));
  for (;;) {
    const auto nl = pending_.find('\n');
    if (nl != std::string::npos) {
      const std::string got = pending_.substr(0, nl);
      pending_.erase(0, nl + 1);
      if (got.rfind("ok", 0) != 0) throw AgentError("agent: '" + line + "': " + (got.size() > 4 ? got.substr(4) : got));
      Reply r;
      std::istringstream in(got.substr(2));
      std::string word;
      while (in >> word) {
        const auto eq = word.find('=');
        if (eq != std::string::npos) r.kv[word.substr(0, eq)] = word.substr(eq + 1);
      }
      return r;
    }
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 30000) <= 0) throw AgentError("the agent did not answer '" + line + "' within 30 s");
    char buf[65536];
    const ssize_t n = read(fd_, buf, sizeof buf);
    if (n <= 0) throw AgentError("the agent closed the connection during '" + line + "'");
    pending_.append(buf, static_cast<std::size_t>(n));
  }
}

std::vector<Wc> AgentClient::poll(unsigned n, unsigned ms) {
  const Reply r = call("poll n=" + std::to_string(n) + " ms=" + std::to_string(ms));
  std::vector<Wc> out;
  auto it = r.kv.find("wc");
  if (it == r.kv.end() || it->second.empty()) return out;
  std::istringstream all(it->second);
  std::string one;
  while (std::getline(all, one, ';')) {
    Wc w;
    unsigned long long id = 0;
    if (std::sscanf(one.c_str(), "%llu,%d,%d,%u,%u,%u", &id, &w.status, &w.opcode, &w.byte_len, &w.imm, &w.src_qp) != 6)
      throw AgentError("unreadable completion from the agent: " + one);
    w.id = id;
    out.push_back(w);
  }
  return out;
}

}  // namespace urnic::conform
