// urnic-conform-agent's iWARP passive side: see agent_iwarp.hpp. It links
// the system's librdmacm.so.1 (rdma-core's ABI) and nothing of urnic.
#include "tools/conform/agent_iwarp.hpp"

#include <arpa/inet.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace urnic::conform_agent {
namespace {

uint64_t num(const Args& a, const std::string& key, uint64_t dflt) {
  auto it = a.find(key);
  if (it == a.end()) return dflt;
  char* end = nullptr;
  const uint64_t v = std::strtoull(it->second.c_str(), &end, 0);
  if (end == it->second.c_str() || *end != '\0') throw std::runtime_error("bad number " + key + "=" + it->second);
  return v;
}

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

}  // namespace

struct IwAgent::State {
  // Set by `listen`, read by the CM thread.
  std::size_t buf_len = 65536;
  unsigned recv_n = 0, recv_len = 4096;
  int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  uint8_t ird = 4, ord = 4;

  rdma_event_channel* ch = nullptr;
  rdma_cm_id* listen_id = nullptr;
  std::thread thread;
  std::atomic<bool> stop{false};

  // Under `mu`: what the CM thread made and saw.
  std::mutex mu;
  std::condition_variable cv;
  std::string state = "none";
  std::string error;
  rdma_cm_id* conn_id = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_mr* mr = nullptr;
  uint8_t* buf = nullptr;
  std::size_t map_len = 0;
  std::size_t req_pd_len = 0;
  std::string req_pd_hex;
  unsigned req_ird = 0, req_ord = 0;

  void run();
  void on_connect_request(rdma_cm_id* id, const rdma_conn_param& p);
  void release_conn();
};

void IwAgent::State::on_connect_request(rdma_cm_id* id, const rdma_conn_param& p) {
  std::unique_lock lk(mu);
  if (conn_id != nullptr) {  // one connection per listener
    lk.unlock();
    rdma_reject(id, nullptr, 0);
    return;
  }
  conn_id = id;
  req_pd_len = p.private_data_len;
  req_ird = p.responder_resources;
  req_ord = p.initiator_depth;
  static const char* d = "0123456789abcdef";
  req_pd_hex.clear();
  const auto* pd_bytes = static_cast<const uint8_t*>(p.private_data);
  for (std::size_t i = 0; pd_bytes && i < p.private_data_len && i < 16; ++i) {
    req_pd_hex += d[pd_bytes[i] >> 4];
    req_pd_hex += d[pd_bytes[i] & 15];
  }
  auto fail = [&](const std::string& why) {
    error = why;
    state = "error";
    cv.notify_all();
    lk.unlock();
    rdma_reject(id, nullptr, 0);
  };
  pd = ibv_alloc_pd(id->verbs);
  if (!pd) return fail(errno_text("ibv_alloc_pd"));
  cq = ibv_create_cq(id->verbs, 256, nullptr, nullptr, 0);
  if (!cq) return fail(errno_text("ibv_create_cq"));
  map_len = (buf_len + 4095) & ~std::size_t{4095};
  void* m = mmap(nullptr, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return fail("mmap failed");
  buf = static_cast<uint8_t*>(m);
  for (std::size_t i = 0; i < buf_len; ++i) buf[i] = static_cast<uint8_t>(i * 7 + 3);
  mr = ibv_reg_mr(pd, buf, buf_len, access);
  if (!mr) return fail(errno_text("ibv_reg_mr"));
  ibv_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = 64;
  ia.cap.max_recv_wr = 64;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  if (rdma_create_qp(id, pd, &ia) != 0) return fail(errno_text("rdma_create_qp"));
  for (unsigned i = 0; i < recv_n; ++i) {
    ibv_sge s{reinterpret_cast<uintptr_t>(buf) + std::size_t{i} * recv_len, recv_len, mr->lkey};
    ibv_recv_wr wr{}, *bad = nullptr;
    wr.wr_id = 1000 + i;
    wr.sg_list = &s;
    wr.num_sge = 1;
    if (ibv_post_recv(id->qp, &wr, &bad) != 0) return fail(errno_text("ibv_post_recv"));
  }
  rdma_conn_param cp{};
  cp.responder_resources = ird;
  cp.initiator_depth = ord;
  state = "accepting";
  lk.unlock();
  if (rdma_accept(id, &cp) != 0) {
    std::lock_guard g(mu);
    error = errno_text("rdma_accept");
    state = "error";
    cv.notify_all();
  }
}

void IwAgent::State::run() {
  pollfd pfd{ch->fd, POLLIN, 0};
  while (!stop.load()) {
    if (::poll(&pfd, 1, 50) <= 0) continue;
    rdma_cm_event* ev = nullptr;
    if (rdma_get_cm_event(ch, &ev) != 0) continue;
    const rdma_cm_event_type type = ev->event;
    rdma_cm_id* id = ev->id;
    const rdma_conn_param param = ev->param.conn;
    // The private data lives in the event: copy what on_connect_request needs first.
    std::string pd_copy(static_cast<const char*>(param.private_data ? param.private_data : ""),
                        param.private_data ? param.private_data_len : 0);
    rdma_conn_param p2 = param;
    p2.private_data = pd_copy.data();
    rdma_ack_cm_event(ev);
    switch (type) {
      case RDMA_CM_EVENT_CONNECT_REQUEST: on_connect_request(id, p2); break;
      case RDMA_CM_EVENT_ESTABLISHED: {
        std::lock_guard g(mu);
        state = "established";
        cv.notify_all();
        break;
      }
      case RDMA_CM_EVENT_DISCONNECTED: {
        std::lock_guard g(mu);
        state = "disconnected";
        cv.notify_all();
        break;
      }
      case RDMA_CM_EVENT_REJECTED:
      case RDMA_CM_EVENT_CONNECT_ERROR:
      case RDMA_CM_EVENT_UNREACHABLE: {
        std::lock_guard g(mu);
        state = "error";
        error = rdma_event_str(type);
        cv.notify_all();
        break;
      }
      default: break;
    }
  }
}

void IwAgent::State::release_conn() {
  if (conn_id) {
    rdma_disconnect(conn_id);
    if (conn_id->qp) rdma_destroy_qp(conn_id);
  }
  if (mr) ibv_dereg_mr(mr);
  if (cq) ibv_destroy_cq(cq);
  if (pd) ibv_dealloc_pd(pd);
  if (buf) munmap(buf, map_len);
  if (conn_id) rdma_destroy_id(conn_id);
  conn_id = nullptr;
  mr = nullptr;
  cq = nullptr;
  pd = nullptr;
  buf = nullptr;
}

IwAgent::IwAgent() = default;
IwAgent::~IwAgent() { destroy(); }

void IwAgent::destroy() {
  if (!s_) return;
  s_->stop = true;
  if (s_->thread.joinable()) s_->thread.join();
  s_->release_conn();
  if (s_->listen_id) rdma_destroy_id(s_->listen_id);
  if (s_->ch) rdma_destroy_event_channel(s_->ch);
  s_.reset();
}

std::optional<IwObjects> IwAgent::objects() {
  if (!s_) return std::nullopt;
  std::lock_guard g(s_->mu);
  if (!s_->conn_id || !s_->conn_id->qp || !s_->mr) return std::nullopt;
  return IwObjects{s_->conn_id->qp, s_->cq, s_->mr, s_->buf, s_->buf_len};
}

std::string IwAgent::handle(const std::string& cmd, const Args& a) {
  if (cmd == "listen") {
    destroy();
    s_ = std::make_unique<State>();
    State& s = *s_;
    s.buf_len = num(a, "buf", 65536);
    if (s.buf_len == 0 || s.buf_len > (64u << 20)) throw std::runtime_error("buf must be 1..64 MiB");
    s.recv_n = static_cast<unsigned>(num(a, "recv", 0));
    s.recv_len = static_cast<unsigned>(num(a, "recv_len", 4096));
    if (s.recv_n > 64 || std::size_t{s.recv_n} * s.recv_len > s.buf_len)
      throw std::runtime_error("recv*recv_len must fit the buffer (at most 64 receives)");
    auto it = a.find("access");
    s.access = IBV_ACCESS_LOCAL_WRITE | remote_access(it == a.end() ? "wr" : it->second, "wr", "access");
    s.ird = static_cast<uint8_t>(num(a, "ird", 4));
    s.ord = static_cast<uint8_t>(num(a, "ord", 4));
    const uint64_t port = num(a, "port", 0);
    if (port == 0 || port > 65535) throw std::runtime_error("listen needs port=1..65535");
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(port));
    auto ai = a.find("addr");
    if (inet_pton(AF_INET, ai == a.end() ? "0.0.0.0" : ai->second.c_str(), &sa.sin_addr) != 1)
      throw std::runtime_error("bad addr=");
    s.ch = rdma_create_event_channel();
    if (!s.ch) throw std::runtime_error(errno_text("rdma_create_event_channel"));
    if (rdma_create_id(s.ch, &s.listen_id, nullptr, RDMA_PS_TCP) != 0)
      throw std::runtime_error(errno_text("rdma_create_id"));
    if (rdma_bind_addr(s.listen_id, reinterpret_cast<sockaddr*>(&sa)) != 0)
      throw std::runtime_error(errno_text("rdma_bind_addr"));
    if (rdma_listen(s.listen_id, 4) != 0) throw std::runtime_error(errno_text("rdma_listen"));
    s.state = "listening";
    s.thread = std::thread([&s] { s.run(); });
    return "ok port=" + std::to_string(port);
  }
  if (!s_) {
    if (cmd == "iwstate") return "ok state=none";
    throw std::runtime_error("no listener: send listen first");
  }
  State& s = *s_;
  std::unique_lock lk(s.mu);
  if (cmd == "conn") {
    const auto ms = std::chrono::milliseconds(num(a, "ms", 2000));
    s.cv.wait_for(lk, ms, [&] { return s.state == "established" || s.state == "error" || s.state == "disconnected"; });
  }
  std::ostringstream o;
  o << "ok state=" << s.state;
  if (!s.error.empty()) o << " error=" << s.error.substr(0, s.error.find(' '));
  if (cmd == "conn" && s.conn_id && s.conn_id->qp && s.mr) {
    o << " qpn=" << s.conn_id->qp->qp_num << " stag=" << s.mr->rkey << " lkey=" << s.mr->lkey
      << " addr=" << reinterpret_cast<uintptr_t>(s.buf) << " len=" << s.buf_len << " req_pd_len=" << s.req_pd_len
      << " req_pd=" << (s.req_pd_hex.empty() ? "-" : s.req_pd_hex) << " req_ird=" << s.req_ird
      << " req_ord=" << s.req_ord;
  }
  return o.str();
}

}  // namespace urnic::conform_agent
