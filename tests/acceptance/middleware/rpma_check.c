/* librpma 1.2 (Debian's librpma-dev ships no examples) on urnic, for
 * acceptance-middleware-rpma (issue 19):
 *   rpma_check server ADDR PORT   a 4 KiB region: [0, 1024) a pattern for
 *                                 the client to read; hands out the region's
 *                                 descriptor as the connection's private data,
 *                                 checks the client's private data, receives
 *                                 the client's message into [3072, 4096)
 *                                 (posted before the connection, checked) and
 *                                 answers with [1024, 2048), and after the
 *                                 client disconnects checks that [2048, 3072)
 *                                 holds what the client wrote.
 *   rpma_check client ADDR PORT   connects with private data, rpma_read of
 *                                 [0, 1024) (checked), rpma_write of a second
 *                                 pattern to [2048, 3072), rpma_flush
 *                                 (visibility), rpma_send of a message and
 *                                 rpma_recv of the answer (checked), then
 *                                 disconnects.
 * Each side prints "rpma_check SIDE: ok" and exits 0 only if every step and
 * check held; otherwise it names the step. */
#include <librpma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REGION 4096
#define PART 1024
#define READ_OFF 0
#define WRITE_OFF 2048
#define SEND_OFF 1024
#define RECV_OFF 3072
static const char kHello[] = "urnic rpma_check";

static unsigned char pattern(int which, size_t i) { return (unsigned char)(which * 101 + i * 13 + 5); }

#define STEP(call)                                                        \
  do {                                                                    \
    int rc_ = (call);                                                     \
    if (rc_ != 0) {                                                       \
      fprintf(stderr, "rpma_check %s: %s: %d\n", side, #call, rc_);       \
      return 1;                                                           \
    }                                                                     \
  } while (0)

static int wait_event(const char* side, struct rpma_conn* conn, enum rpma_conn_event want) {
  enum rpma_conn_event ev = RPMA_CONN_UNDEFINED;
  STEP(rpma_conn_next_event(conn, &ev));
  if (ev != want) {
    fprintf(stderr, "rpma_check %s: event %s, expected %s\n", side, rpma_utils_conn_event_2str(ev),
            rpma_utils_conn_event_2str(want));
    return 1;
  }
  return 0;
}

/* The next completion of the connection's CQ: polled first, waited for
 * only when there is none (completions that came before the CQ was armed
 * again raise no event). */
static int next_completion(const char* side, struct rpma_cq* cq, struct ibv_wc* wc) {
  for (;;) {
    int got = 0;
    const int rc = rpma_cq_get_wc(cq, 1, wc, &got);
    if (rc == 0 && got == 1) return 0;
    if (rc != RPMA_E_NO_COMPLETION) {
      fprintf(stderr, "rpma_check %s: rpma_cq_get_wc: %d\n", side, rc);
      return 1;
    }
    STEP(rpma_cq_wait(cq));
  }
}

/* Waits for a successful completion of each opcode in `want` (n of them),
 * in any order; a receive must carry `recv_len` bytes. */
static int wait_completions(const char* side, struct rpma_conn* conn, const enum ibv_wc_opcode* want, int n,
                            uint32_t recv_len) {
  struct rpma_cq* cq = NULL;
  STEP(rpma_conn_get_cq(conn, &cq));
  int seen[4] = {0, 0, 0, 0};
  if (n > 4) return 1;
  for (int done = 0; done < n; ++done) {
    struct ibv_wc wc;
    if (next_completion(side, cq, &wc) != 0) return 1;
    int match = -1;
    for (int i = 0; i < n && match < 0; ++i)
      if (!seen[i] && want[i] == wc.opcode) match = i;
    if (wc.status != IBV_WC_SUCCESS || match < 0 || (wc.opcode == IBV_WC_RECV && wc.byte_len != recv_len)) {
      fprintf(stderr, "rpma_check %s: completion: status %s, opcode %d, %u bytes (unexpected)\n", side,
              ibv_wc_status_str(wc.status), wc.opcode, wc.byte_len);
      return 1;
    }
    seen[match] = 1;
  }
  return 0;
}

static int wait_completion(const char* side, struct rpma_conn* conn, enum ibv_wc_opcode op) {
  return wait_completions(side, conn, &op, 1, PART);
}

static size_t differ(const unsigned char* at, int which) {
  size_t bad = 0;
  for (size_t i = 0; i < PART; ++i) bad += at[i] != pattern(which, i);
  return bad;
}

static int server(const char* side, struct rpma_peer* peer, const char* addr, const char* port) {
  unsigned char* buf = calloc(1, REGION);
  for (size_t i = 0; i < PART; ++i) buf[READ_OFF + i] = pattern(1, i);
  for (size_t i = 0; i < PART; ++i) buf[SEND_OFF + i] = pattern(4, i);
  struct rpma_mr_local* mr = NULL;
  STEP(rpma_mr_reg(peer, buf, REGION,
                   RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY |
                       RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV,
                   &mr));
  size_t desc_size = 0;
  STEP(rpma_mr_get_descriptor_size(mr, &desc_size));
  unsigned char desc[64];
  if (desc_size > sizeof desc) return 1;
  STEP(rpma_mr_get_descriptor(mr, desc));
  struct rpma_ep* ep = NULL;
  STEP(rpma_ep_listen(peer, addr, port, &ep));
  struct rpma_conn_req* req = NULL;
  STEP(rpma_ep_next_conn_req(ep, NULL, &req));
  struct rpma_conn_private_data in = {NULL, 0};
  STEP(rpma_conn_req_get_private_data(req, &in));
  if (in.len < sizeof kHello || memcmp(in.ptr, kHello, sizeof kHello) != 0) {
    fprintf(stderr, "rpma_check server: the client's private data (%u bytes) is not what it sent\n", in.len);
    return 1;
  }
  STEP(rpma_conn_req_recv(req, mr, RECV_OFF, PART, NULL));
  struct rpma_conn_private_data out = {desc, (uint8_t)desc_size};
  struct rpma_conn* conn = NULL;
  STEP(rpma_conn_req_connect(&req, &out, &conn));
  if (wait_event(side, conn, RPMA_CONN_ESTABLISHED) != 0) return 1;
  if (wait_completion(side, conn, IBV_WC_RECV) != 0) return 1;
  if (differ(buf + RECV_OFF, 3) != 0) {
    fprintf(stderr, "rpma_check server: %zu of %d received bytes differ\n", differ(buf + RECV_OFF, 3), PART);
    return 1;
  }
  STEP(rpma_send(conn, mr, SEND_OFF, PART, RPMA_F_COMPLETION_ALWAYS, NULL));
  if (wait_completion(side, conn, IBV_WC_SEND) != 0) return 1;
  if (wait_event(side, conn, RPMA_CONN_CLOSED) != 0) return 1;
  STEP(rpma_conn_disconnect(conn));
  STEP(rpma_conn_delete(&conn));
  STEP(rpma_ep_shutdown(&ep));
  const size_t bad = differ(buf + WRITE_OFF, 2);
  STEP(rpma_mr_dereg(&mr));
  free(buf);
  if (bad != 0) {
    fprintf(stderr, "rpma_check server: %zu of %d written bytes differ\n", bad, PART);
    return 1;
  }
  return 0;
}

static int client(const char* side, struct rpma_peer* peer, const char* addr, const char* port) {
  unsigned char* buf = calloc(1, REGION);
  for (size_t i = 0; i < PART; ++i) buf[WRITE_OFF + i] = pattern(2, i);
  for (size_t i = 0; i < PART; ++i) buf[SEND_OFF + i] = pattern(3, i);
  struct rpma_mr_local* mr = NULL;
  STEP(rpma_mr_reg(peer, buf, REGION,
                   RPMA_MR_USAGE_READ_DST | RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV, &mr));
  struct rpma_conn_req* req = NULL;
  STEP(rpma_conn_req_new(peer, addr, port, NULL, &req));
  /* The receive for the server's answer, posted before the connection. */
  STEP(rpma_conn_req_recv(req, mr, RECV_OFF, PART, NULL));
  struct rpma_conn_private_data hello = {(void*)kHello, sizeof kHello};
  struct rpma_conn* conn = NULL;
  STEP(rpma_conn_req_connect(&req, &hello, &conn));
  if (wait_event(side, conn, RPMA_CONN_ESTABLISHED) != 0) return 1;
  struct rpma_conn_private_data pd = {NULL, 0};
  STEP(rpma_conn_get_private_data(conn, &pd));
  struct rpma_mr_remote* remote = NULL;
  STEP(rpma_mr_remote_from_descriptor(pd.ptr, pd.len, &remote));
  STEP(rpma_read(conn, mr, READ_OFF, remote, READ_OFF, PART, RPMA_F_COMPLETION_ALWAYS, NULL));
  if (wait_completion(side, conn, IBV_WC_RDMA_READ) != 0) return 1;
  const size_t bad = differ(buf + READ_OFF, 1);
  if (bad != 0) {
    fprintf(stderr, "rpma_check client: %zu of %d read bytes differ\n", bad, PART);
    return 1;
  }
  STEP(rpma_write(conn, remote, WRITE_OFF, mr, WRITE_OFF, PART, RPMA_F_COMPLETION_ON_ERROR, NULL));
  STEP(rpma_flush(conn, remote, WRITE_OFF, PART, RPMA_FLUSH_TYPE_VISIBILITY, RPMA_F_COMPLETION_ALWAYS, NULL));
  /* Visibility is flushed with a READ after the write (no native flush). */
  if (wait_completion(side, conn, IBV_WC_RDMA_READ) != 0) return 1;
  /* A message and the server's answer: the send's completion and the
   * answer's receive may come in either order. */
  STEP(rpma_send(conn, mr, SEND_OFF, PART, RPMA_F_COMPLETION_ALWAYS, NULL));
  const enum ibv_wc_opcode both[2] = {IBV_WC_SEND, IBV_WC_RECV};
  if (wait_completions(side, conn, both, 2, PART) != 0) return 1;
  if (differ(buf + RECV_OFF, 4) != 0) {
    fprintf(stderr, "rpma_check client: %zu of %d received bytes differ\n", differ(buf + RECV_OFF, 4), PART);
    return 1;
  }
  STEP(rpma_conn_disconnect(conn));
  if (wait_event(side, conn, RPMA_CONN_CLOSED) != 0) return 1;
  STEP(rpma_conn_delete(&conn));
  STEP(rpma_mr_remote_delete(&remote));
  STEP(rpma_mr_dereg(&mr));
  free(buf);
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 4 || (strcmp(argv[1], "server") != 0 && strcmp(argv[1], "client") != 0)) {
    fprintf(stderr, "usage: rpma_check server|client ADDR PORT\n");
    return 2;
  }
  const char* side = argv[1];
  const int is_server = strcmp(side, "server") == 0;
  struct ibv_context* ctx = NULL;
  STEP(rpma_utils_get_ibv_context(argv[2], is_server ? RPMA_UTIL_IBV_CONTEXT_LOCAL : RPMA_UTIL_IBV_CONTEXT_REMOTE,
                                  &ctx));
  struct rpma_peer* peer = NULL;
  STEP(rpma_peer_new(ctx, &peer));
  const int rc = is_server ? server(side, peer, argv[2], argv[3]) : client(side, peer, argv[2], argv[3]);
  STEP(rpma_peer_delete(&peer));
  if (rc == 0) printf("rpma_check %s: ok\n", side);
  return rc;
}
