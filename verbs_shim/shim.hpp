// Internals of the drop-in libibverbs.so.1 (not installed, not an API).
//
// Every object handed to the application is the rdma-core struct from the
// system's <infiniband/verbs.h> (never re-declared here), embedded as the
// first member of a standard-layout wrapper so the shim can get back to its
// own state; daemon object handles live in the structs' own `handle` fields.
#pragma once

#include <infiniband/verbs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <span>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "hostif/ctl_proto.hpp"
#include "hostif/ctl_mailbox.hpp"
#include "hostif/doorbell_page.hpp"
#include "hostif/shm_ring.hpp"
#include "direct_memory.hpp"
#include "mr_conversion.hpp"
#include "ring_memory.hpp"

namespace urnic::shim {

namespace ctl = urnic::hostif::ctl;

// The value a C caller put in an enum parameter or field, whatever it is. C
// allows any int there (a bad value must get EINVAL or "unknown", as from
// rdma-core); in C++ loading an enum outside its range is undefined
// (clang's -fsanitize=enum stops on it), so the bytes are read as the
// int instead (verbs.h's enums are int-sized).
template <class E>
inline int raw_enum(const E& e) noexcept {
  static_assert(std::is_enum_v<E> && sizeof(E) == sizeof(int));
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

// How a verb that returns an object fails, as a kernel provider's does: a
// null pointer with errno set (`return fail_null(EINVAL);`).
inline std::nullptr_t fail_null(int err) {
  errno = err;
  return nullptr;
}

// A control connection to urnicd (one per opened device context, plus
// short-lived ones for device discovery). Thread-safe: one request at a time.
// The part of a connection forked processes share (ctl_client.cpp).
struct SharedCallState;

class CtlClient {
 public:
  // Connect, starting urnicd if none answers (see connect_daemon()). Returns
  // nullptr and sets `err` on failure.
  static std::unique_ptr<CtlClient> open(int& err);
  // An already greeted connection (ibv_import_device's duplicated cmd_fd);
  // the client owns `fd` from now on unless release_fd() gives it back.
  static std::unique_ptr<CtlClient> adopt(int fd) { return std::unique_ptr<CtlClient>(new CtlClient(fd)); }
  void release_fd() { fd_ = -1; }
  ~CtlClient();
  CtlClient(const CtlClient&) = delete;
  CtlClient& operator=(const CtlClient&) = delete;

  // One request/reply. Returns 0 or a positive errno (the daemon's status, or
  // EIO if the daemon went away), and on failure sets errno to it too: a
  // kernel provider's verb fails in its uverbs write(), which sets errno, and
  // callers check it (ibv_dealloc_pd returning EBUSY leaves errno EBUSY).
  // Descriptors that came with the reply are appended to `fds` (or closed
  // when `fds` is null or the call failed).
  template <ctl::Message Req, ctl::Message Rep>
  int call(const Req& req, Rep& rep, std::vector<int>* fds = nullptr);
  // The same, passing `send_fd` with the request (SCM_RIGHTS; the daemon
  // gets its own copy, the caller keeps `send_fd`).
  template <ctl::Message Req, ctl::Message Rep>
  int call_passing_fd(const Req& req, Rep& rep, int send_fd, std::vector<int>* fds = nullptr);

  // A destroy request: as call(), but once the daemon is gone (EIO and
  // gone()) it succeeds, because the daemon's death already freed the
  // object (verbs_shim/device_fatal.cpp); the caller then frees its part.
  template <ctl::Message Req, ctl::Message Rep>
  int call_destroy(const Req& req, Rep& rep) {
    const int err = call(req, rep);
    return err == EIO && gone() ? 0 : err;
  }

  // The daemon's end of the connection is closed: it died, or dropped us.
  // Set by a failed request, by the end of the async or a completion
  // channel's stream, or by peer_hung_up(); never cleared.
  [[nodiscard]] bool gone() const { return gone_.load(std::memory_order_acquire); }
  [[nodiscard]] const std::atomic<bool>& gone_flag() const { return gone_; }
  void mark_gone() { gone_.store(true, std::memory_order_release); }
  // Asks the kernel, without blocking, whether the daemon's end hung up
  // (one poll(2); the data path calls it rarely, see device_fatal.cpp).
  bool peer_hung_up();

  [[nodiscard]] std::uint32_t daemon_pid() const { return daemon_pid_; }
  // Before a request that registers memory: what a root daemon requires of
  // a client of another user (no_new_privs).
  void before_registering();
  // The connection's socket: what ibv_context.cmd_fd shows (the uverbs fd
  // of a kernel device; ibv_import_device takes a duplicate of it).
  [[nodiscard]] int fd() const { return fd_; }

  // The session's control mailbox (hostif/ctl_mailbox.hpp), opened after
  // OpenDevice: from then on the calls it carries go through it. `page`
  // (sizeof MailboxLayout, mapped here; unmapped with this client), its
  // bit in `doorbells`, and the engine's eventfd `*kick_fd` (written when
  // the engine sleeps) are the context's.
  void attach_mailbox(void* page, std::uint32_t bit, hostif::DoorbellPage* doorbells, const int* kick_fd);

 private:
  explicit CtlClient(int fd);
  // The calls on the socket of every process that shares it by fork, one at
  // a time (ctl_client.cpp, SocketTurn); -1 on its own errno.
  int socket_call(std::span<const std::byte> req, std::uint32_t seq, std::vector<std::byte>& reply,
                  std::vector<int>& fds, std::span<const int> send_fds);
  int call_raw(std::vector<std::byte> req, std::vector<std::byte>& reply, std::vector<int>& fds,
               std::span<const int> send_fds = {});
  // Looks for the reply for a few microseconds before recvmsg sleeps.
  void await_reply() const;
  // A call through the mailbox: 0 and the reply, or 0 and an empty reply
  // (send it on the socket), or EIO (the daemon is gone).
  int mailbox_call(std::span<const std::byte> req, std::uint32_t seq, std::vector<std::byte>& reply);
  hostif::CtlMailbox mailbox_;
  void* mailbox_map_ = nullptr;
  std::uint32_t mailbox_bit_ = 0;
  hostif::DoorbellPage* doorbells_ = nullptr;
  const int* kick_fd_ = nullptr;
  unsigned mailbox_generation_ = 0;  // the fork generation it was attached in (ctl_client.cpp)
  template <ctl::Message Rep>
  int check_reply(int err, const std::vector<std::byte>& reply, Rep& rep);
  int fd_;
  std::mutex mu_;
  // A MAP_SHARED page (ctl_client.cpp, SharedCallState) that forked
  // children inherit with the socket: the sequence numbers and the turn on
  // the socket of all of them. Null when it could not be mapped.
  SharedCallState* shared_ = nullptr;
  std::uint32_t seq_ = 0;  // used when shared_ is null
  std::uint32_t daemon_pid_ = 0;
  bool root_daemon_ = false;  // the daemon runs as root and we do not
  std::atomic<bool> gone_{false};
};

template <ctl::Message Rep>
int CtlClient::check_reply(int err, const std::vector<std::byte>& reply, Rep& rep) {
  if (err != 0) return err;
  const auto h = ctl::decode_header(reply);
  if (!h || h->type != static_cast<std::uint16_t>(Rep::kType)) return EIO;
  if (h->status != 0) return h->status;
  if (auto body = ctl::decode<Rep>(reply)) {
    rep = *body;
    return 0;
  }
  return EIO;
}

// The descriptors of a reply go to `fds`, or are closed when the call failed
// or nobody wants them; errno is `err` (set after the closes, which may
// change it).
inline int keep_reply_fds(int err, std::vector<int>& got, std::vector<int>* fds) {
  if (err != 0 || fds == nullptr) {
    for (int fd : got) ::close(fd);
  } else {
    fds->insert(fds->end(), got.begin(), got.end());
  }
  if (err != 0) errno = err;
  return err;
}

template <ctl::Message Req, ctl::Message Rep>
int CtlClient::call_passing_fd(const Req& req, Rep& rep, int send_fd, std::vector<int>* fds) {
  std::vector<std::byte> reply;
  std::vector<int> got;
  const int sent[1] = {send_fd};
  const int err = check_reply(call_raw(ctl::encode(req, 0), reply, got, sent), reply, rep);
  return keep_reply_fds(err, got, fds);
}

template <ctl::Message Req, ctl::Message Rep>
int CtlClient::call(const Req& req, Rep& rep, std::vector<int>* fds) {
  std::vector<std::byte> reply;
  std::vector<int> got;
  const int err = check_reply(call_raw(ctl::encode(req, 0), reply, got), reply, rep);
  return keep_reply_fds(err, got, fds);
}

// The device as the application sees it before opening. `after_` must stay
// zero: mlx5dv/efadv read the pointer right after struct ibv_device to decide
// whether a device is theirs.
struct ShimDevice {
  ibv_device dev;
  void* after_;
  std::uint64_t guid_be;
  int index;
};
static_assert(std::is_standard_layout_v<ShimDevice>);

struct ShimContext;

struct ShimCq {
  ibv_cq_ex cqx;             // ibv_cq is its prefix (ibv_cq_ex_to_cq)
  ShimContext* ctx;
  hostif::SpscRing ring;     // engine produces, we consume
  RingMapping map;           // its ring's pages (verbs_shim/ring_memory.hpp)
  std::mutex* poll_mu;       // serializes pollers (the ring is single-consumer)
  std::uint32_t comp_events_reported;
  // ibv_cq_ex polling (extended.cpp): the CQE start_poll/next_poll made
  // current, copied out of the ring; its slot is released by the next
  // next_poll or end_poll.
  hostif::CqeSlot cur;
  std::uint32_t held;        // ring slots taken and not yet released (0 or 1)
  std::uint64_t wc_flags;    // IBV_WC_EX_WITH_* the CQ was created with
  std::uint32_t stride;      // slot size: sizeof CqeSlot, or CqeTmSlot (IBV_WC_EX_WITH_TM_INFO)
  std::uint32_t cur_tm_priv; // ibv_wc_read_tm_info of `cur` (TM_INFO CQs)
  std::uint64_t cur_tm_tag;
  struct ShimSrq* tm_srq;    // the TM SRQ completing here, if any (verbs_shim/tm.cpp)
  std::uint32_t empty_polls; // polls that found the ring empty (device_fatal.cpp)
  const std::atomic<bool>* device_gone;  // its context's CtlClient::gone_flag()
};
static_assert(std::is_standard_layout_v<ShimCq>);

struct ShimSrq {
  ibv_srq srq;
  hostif::SpscRing ring;     // we produce, engine consumes
  RingMapping map;           // its ring's pages (verbs_shim/ring_memory.hpp)
  std::mutex* post_mu;
  std::uint32_t doorbell;    // its bit in the context's doorbell page
  std::uint32_t max_wr, max_sge;
  std::uint32_t srq_num;     // ibv_get_srq_num (what XRC initiators name)
  struct TmTags* tm;         // a TM SRQ's tag handles (verbs_shim/tm.cpp), else null
  ShimCq* tm_cq;             // a TM SRQ's CQ
};
static_assert(std::is_standard_layout_v<ShimSrq>);

struct QpExState;            // ibv_qp_ex work requests being built (extended.cpp)

struct ShimQp {
  ibv_qp_ex qpx;             // ibv_qp is its first member (qp_base)
  QpExState* ext;            // non-null when created with send_ops_flags
  hostif::SpscRing sq, rq;
  RingMapping map;           // its ring's pages (verbs_shim/ring_memory.hpp)
  std::mutex* post_mu;
  std::uint32_t doorbell;    // its bit in the context's doorbell page (both rings)
  ctl::QpCaps caps;
  std::uint32_t sq_sig_all;
};
static_assert(std::is_standard_layout_v<ShimQp>);

// An XRC domain handle (ibv_open_xrcd; verbs_shim/xrc.cpp).
struct ShimXrcd {
  ibv_xrcd xrcd;
  std::uint32_t handle;
};
static_assert(std::is_standard_layout_v<ShimXrcd>);

struct ShimAh {
  ibv_ah ah;
  ctl::AhAttrs attr;
};
static_assert(std::is_standard_layout_v<ShimAh>);

// A protection domain or a parent domain (ibv_alloc_parent_domain;
// verbs_shim/parent_domain.cpp). A parent domain carries its protection
// domain's daemon handle in pd.handle, so every verb that takes an ibv_pd
// works on either; only dealloc tells them apart.
// An MR this library registered (ibv_reg_mr: allocated with calloc and
// freed by ibv_dereg_mr; imported MRs are plain ibv_mrs, freed by
// ibv_unimport_mr). `direct`: the region of its whole pages the daemon maps.
struct ShimMr {
  ibv_mr mr;
  DirectGrant direct;
};
inline ShimMr* shim_of_mr(ibv_mr* mr) { return static_cast<ShimMr*>(static_cast<void*>(mr)); }

// A thread domain (ibv_alloc_td; verbs_shim/parent_domain.cpp).
struct ShimTd {
  ibv_td td;
  std::atomic<std::uint32_t> parents;  // the parent domains made with it
};
static_assert(std::is_standard_layout_v<ShimTd>);

struct ShimPd {
  ibv_pd pd;
  ShimPd* protection_domain;      // a parent domain's PD, nullptr for a PD
  void* pd_context;               // IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT
  std::atomic<std::uint32_t> parents;  // a PD's live parent domains
  // A parent domain's: its thread domain, its allocators
  // (IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS, verbs_shim/ring_memory.hpp),
  // and the QPs, CQs and SRQs made on it (dealloc EBUSY meanwhile).
  ShimTd* td;
  void* (*alloc)(ibv_pd*, void*, std::size_t, std::size_t, std::uint64_t);
  void (*free)(ibv_pd*, void*, void*, std::uint64_t);
  std::atomic<std::uint32_t> users;
};
static_assert(std::is_standard_layout_v<ShimPd>);
inline ShimPd* shim_of_pd(ibv_pd* pd) { return static_cast<ShimPd*>(static_cast<void*>(pd)); }
ShimPd* new_shim_pd(ibv_context* context, std::uint32_t handle);

// The rings mapped into this process, by kind (objects.cpp): each CQ, each
// QP with rings and each SRQ is one shared mapping, and the kernel's
// vm.max_map_count caps the mappings of a process. ibv_query_device reports
// no more of each than this process can still map plus what it holds
// (device.cpp, cap_by_map_count).
struct MappedRings {
  std::atomic<std::int64_t> cqs{0}, qps{0}, srqs{0};
};
MappedRings& mapped_rings();

// A WQ's receive ring as the daemon's death flushes it (wq.cpp registers
// it, device_fatal.cpp reads it under the WQ's post lock).
struct WqRing {
  ibv_wq* wq = nullptr;
  hostif::SpscRing* rq = nullptr;
  std::mutex* post_mu = nullptr;
};

// An opened device. The application holds &vctx->context; vctx->priv points
// back here (priv belongs to libibverbs, which we are).
struct ShimContext {
  verbs_context* vctx = nullptr;
  ShimDevice* dev = nullptr;
  std::unique_ptr<CtlClient> client;
  ctl::OpenDeviceRep info{};   // attributes, port, GID/P_Key tables at open
  int doorbell_fd = -1;        // the engine's eventfd (see ring_doorbell)
  hostif::DoorbellPage doorbells;  // the session's page (hostif/doorbell_page.hpp)
  void* doorbell_map = nullptr;
  // The daemon's death (verbs_shim/device_fatal.cpp): the QPs with rings,
  // whose outstanding WQEs are then flushed into their CQs; when the
  // control socket was last asked whether the daemon is alive; whether
  // ibv_get_async_event has reported IBV_EVENT_DEVICE_FATAL yet.
  std::mutex qps_mu;
  std::vector<ShimQp*> qps;
  std::vector<WqRing> wqs;  // the WQs' receive rings, flushed after the QPs'
  std::atomic<std::int64_t> next_liveness_check_ns{0};
  std::atomic<bool> fatal_reported{false};
  // Lazy conversion of registered memory (mr_conversion.hpp): made with the
  // first MR that has whole pages; after `client` so that it goes first.
  std::mutex converter_mu;
  bool converter_tried = false;
  std::unique_ptr<MrConverter> converter;
  // Async events read from the socket ahead of the application: a destroy
  // drains the socket to drop its object's events (async_events.cpp).
  std::mutex async_mu;
  std::deque<ctl::AsyncEvent> async_pending;
};
// Drops every queued async event of `object` (its ibv_qp, ibv_srq or ibv_cq
// address), after its destroy succeeded (verbs_shim/async_events.cpp).
void drop_async_events_of(ibv_context* context, const void* object);
// The context's converter, made on first use; nullptr if it has none.
MrConverter* converter_of(ibv_context* ctx);

ShimContext* shim_of(ibv_context* ctx);
inline CtlClient& client_of(ibv_context* ctx) { return *shim_of(ctx)->client; }
inline ShimCq* shim_of(ibv_cq* cq) { return static_cast<ShimCq*>(static_cast<void*>(cq)); }
inline ShimQp* shim_of(ibv_qp* qp) { return static_cast<ShimQp*>(static_cast<void*>(qp)); }
inline ShimSrq* shim_of(ibv_srq* srq) { return static_cast<ShimSrq*>(static_cast<void*>(srq)); }
inline ShimAh* shim_of(ibv_ah* ah) { return static_cast<ShimAh*>(static_cast<void*>(ah)); }
inline ShimXrcd* shim_of(ibv_xrcd* x) { return static_cast<ShimXrcd*>(static_cast<void*>(x)); }

// After publishing WQEs on the rings of the QP or SRQ that owns doorbell
// bit `bit`: ring it in the session's page and, if the engine has declared
// itself asleep there, write its eventfd. The page's fences pair with the
// engine's (DoorbellPage::try_sleep): either the engine sees our bit, or
// we see `sleeping` and kick, so no post is left unnoticed; and no system
// call is made while it spins.
void ring_doorbell(ibv_context* ctx, std::uint32_t bit);

// Fill the ops tables of a new context (objects.cpp).
void install_ops(verbs_context* vctx);

// objects.cpp: the ibv_post_send body (caller holds post_mu). With
// `all_or_nothing` (ibv_wr_complete) nothing is published when any WR fails,
// and IBV_WR_ATOMIC_WRITE (only ibv_wr_atomic_write builds it) is accepted.
int post_send_locked(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr, bool all_or_nothing);
ibv_qp* create_qp_common(ibv_pd* pd, ibv_qp_init_attr* attr);
// objects.cpp: map an SRQ ring the daemon created and fill the ShimSrq
// (ibv_create_srq and XRC SRQs). Takes `fd`. Returns the ibv_srq or null
// with errno set (the daemon's SRQ is then destroyed).
ibv_srq* finish_srq(ibv_context* ctx, ShimSrq* s, const ctl::CreateSrqRep& rep, int fd, ibv_pd* pd,
                    void* srq_context);

// tm.cpp: tag matching. The tm_caps ibv_query_device_ex reports; a TM SRQ
// (ibv_create_srq_ex with IBV_SRQT_TM); ibv_post_srq_ops; its teardown.
void fill_tm_caps(const ShimContext& ctx, ibv_tm_caps& caps);
ibv_srq* create_tm_srq(ibv_context* context, ibv_srq_init_attr_ex* attr);
void destroy_tm_state(ShimSrq* s);
void install_tm_ops(verbs_context* vctx);
// A polled CQE that names a tag handle (CqeSlot::tm_ref) updates its TM
// SRQ's handle free list. Returns true when the CQE is the shim's own (the
// completion of an unsignaled DEL, which the shim asked for to learn when
// the handle is free) and must not reach the application. The caller holds
// the CQ's poll_mu.
bool tm_cqe_consumed(ShimCq* c, const hostif::CqeSlot& e);
inline bool cqe_hidden(ShimCq* c, const hostif::CqeSlot& e) { return e.tm_ref != 0 && tm_cqe_consumed(c, e); }

// xrc.cpp: XRC domains, XRC SRQs, XRC_RECV QPs, ibv_open_qp.
ibv_qp* create_xrc_recv_qp(ibv_context* context, ibv_qp_init_attr_ex* attr);
void install_xrc_ops(verbs_context* vctx);
void install_parent_domain_ops(verbs_context* vctx);
// ibv_modify_cq: CQ moderation (verbs_shim/cq_moderation.cpp).
int op_modify_cq(ibv_cq* cq, ibv_modify_cq_attr* attr);
// dm.cpp: device memory (alloc_dm, free_dm, reg_dm_mr) where the device has a pool.
void install_dm_ops(verbs_context* vctx);
// flow.cpp: ibv_create_flow / ibv_destroy_flow (raw packet QPs' steering).
void install_flow_ops(verbs_context* vctx);
// wq.cpp: WQs, receive WQ indirection tables, RSS QPs (ibv_create_qp_ex
// with IBV_QP_INIT_ATTR_IND_TABLE / RX_HASH).
void install_wq_ops(verbs_context* vctx);
ibv_qp* create_rss_qp(ibv_context* context, ibv_qp_init_attr_ex* attr);
void fill_rss_caps(const ShimContext& ctx, ibv_device_attr_ex& attr);
// objects.cpp: drops the unpolled completions of QP (or WQ) `qpn` from `cq`.
void clean_cq_of(ibv_cq* cq, std::uint32_t qpn);

// mw.cpp: memory windows (the context ops ibv_alloc_mw / ibv_bind_mw /
// ibv_dealloc_mw call).
ibv_mw* mw_alloc(ibv_pd* pd, ibv_mw_type type);
int mw_bind(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* bind);
int mw_dealloc(ibv_mw* mw);

// extended.cpp: ibv_qp_ex and ibv_cq_ex over the same shared rings.
bool qp_ex_ops_supported(ibv_qp_type type, std::uint64_t send_ops_flags);
bool setup_qp_ex(ShimQp* q, std::uint64_t send_ops_flags);
void teardown_qp_ex(ShimQp* q);
void install_extended_ops(verbs_context* vctx);
// The ibv_cq_ex read_* / poll pointers of a CQ (ibv_create_cq fills them too,
// so ibv_cq_ex_to_cq round trips work either way).
void setup_cq_ex(ShimCq* c, std::uint64_t wc_flags);

// objects.cpp: ibv_create_cq with the daemon's CQ flags (ctl::kCqFlag*);
// ibv_create_cq is this with 0, ibv_create_cq_ex passes what its wc_flags need
// and its parent domain (IBV_CQ_INIT_ATTR_MASK_PD), whose allocators place
// the ring (ring_memory.hpp).
ibv_cq* create_cq_with_flags(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
                             int comp_vector, std::uint32_t cq_flags, ibv_pd* domain = nullptr);

// device_fatal.cpp: the daemon's death as a device fatal error.
// The daemon is known to be gone (one atomic load: the posting verbs' check).
inline bool device_dead(const ShimContext* s) { return s->client->gone(); }
// The same from a poll that found its CQ empty: every 64th such poll, and
// then at most every 10 ms, asks the kernel whether the control socket hung
// up (liveness_check). A spinning poller learns of the death that way; the
// empty poll itself pays one load and an increment (inline, on the CQ).
bool liveness_check(ShimCq* c);
inline bool device_dead_on_empty_poll(ShimCq* c) {
  if (c->device_gone->load(std::memory_order_acquire)) return true;
  if (++c->empty_polls % 64 != 0) return false;
  return liveness_check(c);
}
// A poll that found nothing, after device_dead_on_empty_poll. The daemon
// that will produce the completion is a process on the same cores, and on
// a machine whose cores are all taken by busy pollers it runs only when one
// of them yields (issue 47: a woken daemon otherwise waits for the
// scheduler's next tick, 4 ms at HZ=250). So the poller hands the daemon
// its time slice:
// - at once, on every empty poll, while the engine has doorbells of this
//   context it has not taken (DoorbellPage::rung_untaken): the work it
//   waits for is queued behind a daemon that is not running;
// - otherwise on every 16th empty poll after 256 in a row (a few
//   microseconds of spinning): the engine took the work and may have been
//   preempted in the middle of it, or the completion comes from a peer.
// When nothing else wants the CPU, sched_yield returns at once.
void yield_if_idle_poller(ShimCq* c);
inline bool poller_should_yield(std::uint32_t empty_polls, bool engine_owes_take) {
  return engine_owes_take || (empty_polls >= 256 && empty_polls % 16 == 0);
}
inline void after_empty_poll(ShimCq* c) {
  const hostif::DoorbellPage& page = c->ctx->doorbells;
  if (poller_should_yield(c->empty_polls, page.valid() && page.rung_untaken())) yield_if_idle_poller(c);
}
inline void after_full_poll(ShimCq* c) { c->empty_polls = 0; }
// After the death, the next flushed completion of a WQE that was posted to
// a QP completing to `c` and never completed (IBV_WC_WR_FLUSH_ERR, as the
// engine flushes a QP in the Error state). Returns false when there are no
// more. The caller holds c->poll_mu.
bool next_flush_cqe(ShimCq* c, hostif::CqeSlot& out);
// A QP with rings joins its context's list at creation and leaves it before
// its rings are unmapped.
void register_qp(ShimContext* s, ShimQp* q);
void unregister_qp(ShimContext* s, ShimQp* q);
// A WQ likewise (wq.cpp): its receives are flushed into its CQ with qp_num
// its wq_num, as its completions carry.
void register_wq(ShimContext* s, const WqRing& w);
void unregister_wq(ShimContext* s, ibv_wq* wq);

// Debug logging to stderr when URNIC_DEBUG is set.
void debug_log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace urnic::shim
