// urnic-conform-agent: the peer-side half of `urnic conform` (issue 20).
//
// Runs next to the RDMA implementation under test (urnic through its drop-in
// libibverbs, the kernel's rxe in a peer VM, a hardware NIC) and sets up the
// verbs objects the tester's cases need: one QP at a time with a registered
// buffer, its receives and sends, its completions and the buffer's bytes.
// The tester drives it over TCP with one text line per command and gets one
// line back: "ok key=value ..." or "err <what went wrong>". The commands are
// listed in tools/conform/README.md; the tester's side is agent_client.cpp.
//
// It links the system's libibverbs.so.1 (the rdma-core ABI) and nothing of
// urnic, so the same binary runs against any provider.
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "tools/conform/agent_iwarp.hpp"

namespace {

using Args = std::map<std::string, std::string>;

struct Error {
  std::string what;
};

uint64_t num(const Args& a, const std::string& key, std::optional<uint64_t> dflt = std::nullopt) {
  auto it = a.find(key);
  if (it == a.end()) {
    if (dflt) return *dflt;
    throw Error{"missing " + key + "="};
  }
  errno = 0;
  char* end = nullptr;
  const uint64_t v = std::strtoull(it->second.c_str(), &end, 0);
  if (errno != 0 || end == it->second.c_str() || *end != '\0') throw Error{"bad number " + key + "=" + it->second};
  return v;
}

std::string str(const Args& a, const std::string& key, const std::string& dflt) {
  auto it = a.find(key);
  return it == a.end() ? dflt : it->second;
}

std::string gid_text(const ibv_gid& g) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, g.raw, buf, sizeof buf);
  return buf;
}

ibv_gid parse_gid(const std::string& s) {
  ibv_gid g{};
  if (inet_pton(AF_INET6, s.c_str(), g.raw) == 1) return g;
  in_addr v4{};
  if (inet_pton(AF_INET, s.c_str(), &v4) == 1) {
    g.raw[10] = g.raw[11] = 0xFF;
    std::memcpy(g.raw + 12, &v4, 4);
    return g;
  }
  throw Error{"bad GID " + s};
}

ibv_mtu mtu_enum(uint64_t bytes) {
  switch (bytes) {
    case 256: return IBV_MTU_256;
    case 512: return IBV_MTU_512;
    case 1024: return IBV_MTU_1024;
    case 2048: return IBV_MTU_2048;
    case 4096: return IBV_MTU_4096;
    default: throw Error{"bad mtu " + std::to_string(bytes)};
  }
}

std::string hex(const uint8_t* p, std::size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  s.reserve(n * 2);
  for (std::size_t i = 0; i < n; ++i) {
    s += d[p[i] >> 4];
    s += d[p[i] & 15];
  }
  return s;
}

// The verbs objects of one test case; `open` makes the context and PD once.
class Agent {
 public:
  ~Agent() {
    destroy();
    if (pd_) ibv_dealloc_pd(pd_);
    if (ctx_) ibv_close_device(ctx_);
  }

  std::string handle(const std::string& cmd, const Args& a) {
    if (cmd == "open") return open(a);
    if (cmd == "destroy") {
      destroy();
      iw_.destroy();
      return "ok";
    }
    if (urnic::conform_agent::IwAgent::handles(cmd)) return iw(cmd, a);
    if (!ctx_) throw Error{"no device: send open first"};
    if (cmd == "create") return create(a);
    if (!qp_) throw Error{"no QP: send create first"};
    if (cmd == "connect") return connect(a);
    if (cmd == "recv") return post_recv(a);
    if (cmd == "send") return post_send(a);
    if (cmd == "poll") return poll(a);
    if (cmd == "mem") return mem(a);
    if (cmd == "fill") return fill(a);
    if (cmd == "state") return state();
    throw Error{"unknown command " + cmd};
  }

 private:
  // The iWARP commands (agent_iwarp.hpp); once the tester's connection is
  // accepted, the verbs commands act on its QP, CQ and buffer (borrowed:
  // destroy() leaves them to the IwAgent).
  std::string iw(const std::string& cmd, const Args& a) {
    if (cmd == "listen") destroy();
    std::string r;
    try {
      r = iw_.handle(cmd, a);
    } catch (const std::exception& e) {
      throw Error{e.what()};
    }
    if (cmd == "conn" && !qp_) {
      if (auto o = iw_.objects()) {
        qp_ = o->qp;
        cq_ = o->cq;
        mr_ = o->mr;
        buf_ = o->buf;
        len_ = o->len;
        qp_type_ = IBV_QPT_RC;
        borrowed_ = true;
      }
    }
    return r;
  }

  std::string open(const Args& a) {
    if (ctx_) throw Error{"already open"};
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (!list || n == 0) throw Error{"no RDMA device (ibv_get_device_list)"};
    const std::string want = str(a, "dev", "");
    ibv_device* dev = nullptr;
    for (int i = 0; i < n && !dev; ++i)
      if (want.empty() || want == ibv_get_device_name(list[i])) dev = list[i];
    if (!dev) {
      ibv_free_device_list(list);
      throw Error{"no device " + want};
    }
    dev_name_ = ibv_get_device_name(dev);
    ctx_ = ibv_open_device(dev);
    ibv_free_device_list(list);
    if (!ctx_) throw Error{"ibv_open_device: " + std::string(std::strerror(errno))};
    pd_ = ibv_alloc_pd(ctx_);
    if (!pd_) throw Error{"ibv_alloc_pd: " + std::string(std::strerror(errno))};
    ibv_port_attr pa{};
    if (ibv_query_port(ctx_, 1, &pa) != 0) throw Error{"ibv_query_port failed"};
    port_mtu_ = 128u << pa.active_mtu;
    // The GID: the one asked for, else the first IPv4-mapped one of the
    // RoCE version asked for (roce=2, the default, or roce=1), what the
    // tester speaks (a device without GID types: the first IPv4-mapped one).
    const uint64_t roce = num(a, "roce", 2);
    if (roce != 1 && roce != 2) throw Error{"roce is 1 or 2"};
    if (a.count("gid")) {
      gid_index_ = static_cast<int>(num(a, "gid"));
    } else {
      gid_index_ = -1;
      const ibv_gid_type want_type = roce == 1 ? IBV_GID_TYPE_ROCE_V1 : IBV_GID_TYPE_ROCE_V2;
      for (int i = 0; i < pa.gid_tbl_len && i < 64 && gid_index_ < 0; ++i) {
        ibv_gid_entry e{};
        static const uint8_t v4prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
        if (ibv_query_gid_ex(ctx_, 1, static_cast<uint32_t>(i), &e, 0) == 0) {
          if (std::memcmp(e.gid.raw, v4prefix, 12) == 0 && e.gid_type == want_type) gid_index_ = i;
          continue;
        }
        ibv_gid g{};
        if (ibv_query_gid(ctx_, 1, i, &g) == 0 && std::memcmp(g.raw, v4prefix, 12) == 0) gid_index_ = i;
      }
      if (gid_index_ < 0) {
        if (roce == 1) throw Error{"no IPv4-mapped RoCE v1 GID on " + dev_name_};
        gid_index_ = 0;
      }
    }
    if (ibv_query_gid(ctx_, 1, gid_index_, &gid_) != 0) throw Error{"ibv_query_gid failed"};
    ibv_device_attr da{};
    ibv_query_device(ctx_, &da);
    std::ostringstream o;
    o << "ok dev=" << dev_name_ << " gid=" << gid_text(gid_) << " gid_index=" << gid_index_
      << " active_mtu=" << port_mtu_ << " transport=" << (ctx_->device->transport_type == IBV_TRANSPORT_IWARP ? "iwarp" : "ib")
      << " atomic=" << (da.atomic_cap != IBV_ATOMIC_NONE ? 1 : 0) << " max_qp_rd_atom=" << da.max_qp_rd_atom;
    return o.str();
  }

  std::string create(const Args& a) {
    destroy();
    const std::string type = str(a, "type", "rc");
    qp_type_ = type == "rc" ? IBV_QPT_RC : type == "uc" ? IBV_QPT_UC : type == "ud" ? IBV_QPT_UD
                                                                                  : throw Error{"bad type " + type};
    len_ = num(a, "buf", 65536);
    if (len_ == 0 || len_ > (64u << 20)) throw Error{"buf must be 1..64 MiB"};
    const std::size_t map_len = (len_ + 4095) & ~std::size_t{4095};
    void* p = mmap(nullptr, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw Error{"mmap failed"};
    buf_ = static_cast<uint8_t*>(p);
    map_len_ = map_len;
    for (std::size_t i = 0; i < len_; ++i) buf_[i] = static_cast<uint8_t>(i * 7 + 3);
    const int access = IBV_ACCESS_LOCAL_WRITE | urnic::conform_agent::remote_access(str(a, "access", "wra"), "wra", "access");
    mr_ = ibv_reg_mr(pd_, buf_, len_, access);
    if (!mr_) throw Error{"ibv_reg_mr: " + std::string(std::strerror(errno))};
    cq_ = ibv_create_cq(ctx_, 256, nullptr, nullptr, 0);
    if (!cq_) throw Error{"ibv_create_cq: " + std::string(std::strerror(errno))};
    ibv_qp_init_attr ia{};
    ia.send_cq = ia.recv_cq = cq_;
    ia.qp_type = qp_type_;
    ia.cap.max_send_wr = 64;
    ia.cap.max_recv_wr = 64;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    ia.sq_sig_all = 0;
    qp_ = ibv_create_qp(pd_, &ia);
    if (!qp_) throw Error{"ibv_create_qp: " + std::string(std::strerror(errno))};
    sq_psn_ = static_cast<uint32_t>(num(a, "psn", 0x100)) & 0xFFFFFF;
    qkey_ = static_cast<uint32_t>(num(a, "qkey", 0x11111111));
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_INIT;
    at.pkey_index = 0;
    at.port_num = 1;
    int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
    if (qp_type_ == IBV_QPT_UD) {
      at.qkey = qkey_;
      mask |= IBV_QP_QKEY;
    } else {
      // The QP's remote access (qp_access=, default all) apart from the
      // MR's (access=): a refusal by the QP is an invalid request, one by
      // the MR a remote access error.
      at.qp_access_flags = static_cast<unsigned>(
          urnic::conform_agent::remote_access(str(a, "qp_access", "wra"), "wra", "qp_access"));
      mask |= IBV_QP_ACCESS_FLAGS;
    }
    if (ibv_modify_qp(qp_, &at, mask) != 0) throw Error{"INIT: " + std::string(std::strerror(errno))};
    std::ostringstream o;
    o << "ok qpn=" << qp_->qp_num << " psn=" << sq_psn_ << " rkey=" << mr_->rkey << " lkey=" << mr_->lkey
      << " addr=" << reinterpret_cast<uintptr_t>(buf_) << " len=" << len_ << " qkey=" << qkey_;
    return o.str();
  }

  std::string connect(const Args& a) {
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_RTR;
    int mask = IBV_QP_STATE;
    if (qp_type_ != IBV_QPT_UD) {
      at.path_mtu = mtu_enum(num(a, "mtu", 1024));
      at.dest_qp_num = static_cast<uint32_t>(num(a, "dqpn"));
      at.rq_psn = static_cast<uint32_t>(num(a, "rq_psn")) & 0xFFFFFF;
      at.ah_attr.is_global = 1;
      at.ah_attr.grh.dgid = parse_gid(str(a, "dgid", ""));
      at.ah_attr.grh.sgid_index = static_cast<uint8_t>(gid_index_);
      at.ah_attr.grh.hop_limit = 64;
      at.ah_attr.grh.traffic_class = static_cast<uint8_t>(num(a, "tclass", 0));
      at.ah_attr.port_num = 1;
      mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
      if (qp_type_ == IBV_QPT_RC) {
        at.max_dest_rd_atomic = static_cast<uint8_t>(num(a, "rd_atomic", 4));
        at.min_rnr_timer = static_cast<uint8_t>(num(a, "min_rnr", 12));
        mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
      }
    }
    if (ibv_modify_qp(qp_, &at, mask) != 0) throw Error{"RTR: " + std::string(std::strerror(errno))};
    ibv_qp_attr rts{};
    rts.qp_state = IBV_QPS_RTS;
    rts.sq_psn = sq_psn_;
    mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
    if (qp_type_ == IBV_QPT_RC) {
      rts.timeout = static_cast<uint8_t>(num(a, "timeout", 14));
      rts.retry_cnt = static_cast<uint8_t>(num(a, "retry", 7));
      rts.rnr_retry = static_cast<uint8_t>(num(a, "rnr_retry", 7));
      rts.max_rd_atomic = static_cast<uint8_t>(num(a, "rd_atomic", 4));
      mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
    }
    if (ibv_modify_qp(qp_, &rts, mask) != 0) throw Error{"RTS: " + std::string(std::strerror(errno))};
    if (qp_type_ == IBV_QPT_UD && a.count("dgid")) {
      ibv_ah_attr ah{};
      ah.is_global = 1;
      ah.grh.dgid = parse_gid(str(a, "dgid", ""));
      ah.grh.sgid_index = static_cast<uint8_t>(gid_index_);
      ah.grh.hop_limit = 64;
      ah.port_num = 1;
      ah_ = ibv_create_ah(pd_, &ah);
      if (!ah_) throw Error{"ibv_create_ah: " + std::string(std::strerror(errno))};
      ud_dqpn_ = static_cast<uint32_t>(num(a, "dqpn"));
      ud_dqkey_ = static_cast<uint32_t>(num(a, "dqkey", qkey_));
    }
    return "ok";
  }

  ibv_sge sge(const Args& a) {
    const uint64_t off = num(a, "off", 0), len = num(a, "len", 0);
    if (off > len_ || len > len_ - off) throw Error{"off/len outside the buffer"};
    ibv_sge s{};
    s.addr = reinterpret_cast<uintptr_t>(buf_) + off;
    s.length = static_cast<uint32_t>(len);
    s.lkey = static_cast<uint32_t>(num(a, "lkey", mr_->lkey));
    return s;
  }

  std::string post_recv(const Args& a) {
    const uint64_t n = num(a, "n", 1), len = num(a, "len", 4096), off = num(a, "off", 0);
    for (uint64_t i = 0; i < n; ++i) {
      Args one{{"off", std::to_string(off + i * len)}, {"len", std::to_string(len)}};
      ibv_sge s = sge(one);
      ibv_recv_wr wr{}, *bad = nullptr;
      wr.wr_id = 1000 + i;
      wr.sg_list = &s;
      wr.num_sge = 1;
      if (ibv_post_recv(qp_, &wr, &bad) != 0) throw Error{"ibv_post_recv: " + std::string(std::strerror(errno))};
    }
    return "ok";
  }

  std::string post_send(const Args& a) {
    const std::string op = str(a, "op", "send");
    ibv_sge s = sge(a);
    ibv_send_wr wr{}, *bad = nullptr;
    wr.wr_id = num(a, "id", 1);
    wr.sg_list = &s;
    wr.num_sge = s.length == 0 && op != "read" ? 0 : 1;
    wr.send_flags = num(a, "unsig", 0) ? 0 : IBV_SEND_SIGNALED;
    if (op == "send") wr.opcode = IBV_WR_SEND;
    else if (op == "send_imm") wr.opcode = IBV_WR_SEND_WITH_IMM;
    else if (op == "write") wr.opcode = IBV_WR_RDMA_WRITE;
    else if (op == "write_imm") wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    else if (op == "read") wr.opcode = IBV_WR_RDMA_READ;
    else if (op == "faa") wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
    else if (op == "cas") wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
    else throw Error{"bad op " + op};
    wr.imm_data = htonl(static_cast<uint32_t>(num(a, "imm", 0)));
    if (op == "write" || op == "write_imm" || op == "read") {
      wr.wr.rdma.remote_addr = num(a, "raddr");
      wr.wr.rdma.rkey = static_cast<uint32_t>(num(a, "rkey"));
    } else if (op == "faa" || op == "cas") {
      wr.wr.atomic.remote_addr = num(a, "raddr");
      wr.wr.atomic.rkey = static_cast<uint32_t>(num(a, "rkey"));
      wr.wr.atomic.compare_add = num(a, op == "faa" ? "add" : "cmp", 0);
      wr.wr.atomic.swap = num(a, "swp", 0);
    }
    if (qp_type_ == IBV_QPT_UD) {
      if (!ah_) throw Error{"UD send without an address: connect with dgid= dqpn="};
      wr.wr.ud.ah = ah_;
      wr.wr.ud.remote_qpn = ud_dqpn_;
      wr.wr.ud.remote_qkey = ud_dqkey_;
    }
    if (ibv_post_send(qp_, &wr, &bad) != 0) throw Error{"ibv_post_send: " + std::string(std::strerror(errno))};
    return "ok";
  }

  // Completions until n of them or ms milliseconds: "wc=id,status,opcode,byte_len,imm,src_qp;..."
  std::string poll(const Args& a) {
    const uint64_t want = num(a, "n", 1), ms = num(a, "ms", 1000);
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    std::vector<ibv_wc> got;
    while (got.size() < want) {
      ibv_wc wc[16];
      const int n = ibv_poll_cq(cq_, 16, wc);
      if (n < 0) throw Error{"ibv_poll_cq failed"};
      got.insert(got.end(), wc, wc + n);
      if (n == 0) {
        if (std::chrono::steady_clock::now() >= until) break;
        usleep(200);
      }
    }
    std::ostringstream o;
    o << "ok n=" << got.size() << " wc=";  // status and opcode as numbers: ibv_wc_status, ibv_wc_opcode
    for (std::size_t i = 0; i < got.size(); ++i) {
      const ibv_wc& w = got[i];
      o << (i ? ";" : "") << w.wr_id << ',' << static_cast<int>(w.status) << ',' << w.opcode << ','
        << w.byte_len << ',' << ((w.wc_flags & IBV_WC_WITH_IMM) ? ntohl(w.imm_data) : 0) << ',' << w.src_qp;
    }
    return o.str();
  }

  std::string mem(const Args& a) {
    ibv_sge s = sge(a);
    return "ok hex=" + hex(reinterpret_cast<uint8_t*>(s.addr), s.length);
  }

  std::string fill(const Args& a) {
    ibv_sge s = sge(a);
    std::memset(reinterpret_cast<void*>(s.addr), static_cast<int>(num(a, "byte", 0)), s.length);
    return "ok";
  }

  std::string state() {
    ibv_qp_attr at{};
    ibv_qp_init_attr ia{};
    if (ibv_query_qp(qp_, &at, IBV_QP_STATE, &ia) != 0) throw Error{"ibv_query_qp failed"};
    static const char* names[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR", "UNKNOWN"};
    const auto state = static_cast<unsigned>(at.qp_state);
    return std::string("ok state=") + names[state < 8 ? state : 7];
  }

  void destroy() {
    if (borrowed_) {
      qp_ = nullptr;
      cq_ = nullptr;
      mr_ = nullptr;
      buf_ = nullptr;
      borrowed_ = false;
    }
    if (ah_) ibv_destroy_ah(ah_);
    if (qp_) ibv_destroy_qp(qp_);
    if (cq_) ibv_destroy_cq(cq_);
    if (mr_) ibv_dereg_mr(mr_);
    if (buf_) munmap(buf_, map_len_);
    ah_ = nullptr;
    qp_ = nullptr;
    cq_ = nullptr;
    mr_ = nullptr;
    buf_ = nullptr;
  }

  urnic::conform_agent::IwAgent iw_;
  bool borrowed_ = false;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  std::string dev_name_;
  int gid_index_ = 0;
  ibv_gid gid_{};
  unsigned port_mtu_ = 0;
  ibv_qp_type qp_type_ = IBV_QPT_RC;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  ibv_mr* mr_ = nullptr;
  ibv_ah* ah_ = nullptr;
  uint8_t* buf_ = nullptr;
  std::size_t len_ = 0, map_len_ = 0;
  uint32_t sq_psn_ = 0, qkey_ = 0, ud_dqpn_ = 0, ud_dqkey_ = 0;
};

// One line "cmd key=value ..." into its command and arguments.
std::string parse_line(const std::string& line, Args& args) {
  std::istringstream in(line);
  std::string cmd, word;
  in >> cmd;
  while (in >> word) {
    auto eq = word.find('=');
    if (eq == std::string::npos) throw Error{"argument without '=': " + word};
    args[word.substr(0, eq)] = word.substr(eq + 1);
  }
  return cmd;
}

// Serves one tester connection: a fresh Agent (device, PD) per connection.
void serve(int fd) {
  Agent agent;
  std::string pending;
  char chunk[4096];
  for (;;) {
    auto nl = pending.find('\n');
    if (nl == std::string::npos) {
      const ssize_t n = read(fd, chunk, sizeof chunk);
      if (n <= 0) return;
      pending.append(chunk, static_cast<std::size_t>(n));
      if (pending.size() > (1u << 20)) return;
      continue;
    }
    std::string line = pending.substr(0, nl);
    pending.erase(0, nl + 1);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::string reply;
    try {
      Args args;
      const std::string cmd = parse_line(line, args);
      if (cmd == "quit") return;
      reply = cmd.empty() ? "err empty command" : agent.handle(cmd, args);
    } catch (const Error& e) {
      reply = "err " + e.what;
    } catch (const std::exception& e) {  // the shared helpers' (remote_access), the library's
      reply = std::string("err ") + e.what();
    }
    reply += '\n';
    for (std::size_t off = 0; off < reply.size();) {
      const ssize_t n = write(fd, reply.data() + off, reply.size() - off);
      if (n <= 0) return;
      off += static_cast<std::size_t>(n);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string addr = "0.0.0.0";
  int port = 7471;
  bool once = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--listen" && i + 1 < argc) {
      const std::string v = argv[++i];
      const auto colon = v.rfind(':');
      addr = v.substr(0, colon);
      if (colon != std::string::npos) port = std::atoi(v.c_str() + colon + 1);
    } else if (a == "--once") {
      once = true;
    } else {
      std::fprintf(stderr,
                   "usage: urnic-conform-agent [--listen ADDR:PORT] [--once]\n"
                   "  serves urnic conform's tester (default 0.0.0.0:7471); --once: one tester, then exit\n");
      return 2;
    }
  }
  const int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int on = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) != 1 ||
      bind(ls, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || listen(ls, 4) != 0) {
    std::fprintf(stderr, "urnic-conform-agent: cannot listen on %s:%d: %s\n", addr.c_str(), port, std::strerror(errno));
    return 1;
  }
  std::printf("urnic-conform-agent: listening on %s:%d\n", addr.c_str(), port);
  std::fflush(stdout);
  do {
    const int fd = accept4(ls, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    const int nodelay = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &nodelay, sizeof nodelay);
    serve(fd);
    close(fd);
  } while (!once);
  close(ls);
  return 0;
}
