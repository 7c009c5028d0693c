/* librpma 1.2 (Debian's librpma-dev ships no examples) on urnic, for
 * acceptance-middleware-rpma (issue 19):
 *   rpma_check server ADDR PORT   a 4 KiB region: [0, 1024) a pattern for
 *                                 the client to read; hands out the region's
 *                                 descriptor as the connection's private data,
 *                                 checks the client's private data, and after
 *                                 the client disconnects that [2048, 3072)
 *                                 holds what the client wrote.
 *   rpma_check client ADDR PORT   connects with private data, rpma_read of
 *                                 [0, 1024) (checked), rpma_write of a second
 *                                 pattern to [2048, 3072), rpma_flush
 *                                 (visibility), then disconnects.
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

static int wait_completion(const char* side, struct rpma_conn* conn, enum ibv_wc_opcode op) {
  struct rpma_cq* cq = NULL;
  STEP(rpma_conn_get_cq(conn, &cq));
  STEP(rpma_cq_wait(cq));
  struct ibv_wc wc;
  int got = 0;
  STEP(rpma_cq_get_wc(cq, 1, &wc, &got));
  if (got != 1 || wc.status != IBV_WC_SUCCESS || wc.opcode != op) {
    fprintf(stderr, "rpma_check %s: completion: got %d, status %s, opcode %d (want %d)\n", side, got,
            ibv_wc_status_str(wc.status), wc.opcode, op);
    return 1;
  }
  return 0;
}

static int server(const char* side, struct rpma_peer* peer, const char* addr, const char* port) {
  unsigned char* buf = calloc(1, REGION);
  for (size_t i = 0; i < PART; ++i) buf[READ_OFF + i] = pattern(1, i);
  struct rpma_mr_local* mr = NULL;
  STEP(rpma_mr_reg(peer, buf, REGION,
                   RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY, &mr));
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
  struct rpma_conn_private_data out = {desc, (uint8_t)desc_size};
  struct rpma_conn* conn = NULL;
  STEP(rpma_conn_req_connect(&req, &out, &conn));
  if (wait_event(side, conn, RPMA_CONN_ESTABLISHED) != 0) return 1;
  if (wait_event(side, conn, RPMA_CONN_CLOSED) != 0) return 1;
  STEP(rpma_conn_disconnect(conn));
  STEP(rpma_conn_delete(&conn));
  STEP(rpma_ep_shutdown(&ep));
  size_t bad = 0;
  for (size_t i = 0; i < PART; ++i) bad += buf[WRITE_OFF + i] != pattern(2, i);
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
  struct rpma_mr_local* mr = NULL;
  STEP(rpma_mr_reg(peer, buf, REGION, RPMA_MR_USAGE_READ_DST | RPMA_MR_USAGE_WRITE_SRC, &mr));
  struct rpma_conn_req* req = NULL;
  STEP(rpma_conn_req_new(peer, addr, port, NULL, &req));
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
  size_t bad = 0;
  for (size_t i = 0; i < PART; ++i) bad += buf[READ_OFF + i] != pattern(1, i);
  if (bad != 0) {
    fprintf(stderr, "rpma_check client: %zu of %d read bytes differ\n", bad, PART);
    return 1;
  }
  STEP(rpma_write(conn, remote, WRITE_OFF, mr, WRITE_OFF, PART, RPMA_F_COMPLETION_ON_ERROR, NULL));
  STEP(rpma_flush(conn, remote, WRITE_OFF, PART, RPMA_FLUSH_TYPE_VISIBILITY, RPMA_F_COMPLETION_ALWAYS, NULL));
  /* Visibility is flushed with a READ after the write (no native flush). */
  if (wait_completion(side, conn, IBV_WC_RDMA_READ) != 0) return 1;
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
