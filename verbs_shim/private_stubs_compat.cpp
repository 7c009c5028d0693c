// The provider ABI of other rdma-core releases, at the version nodes their
// providers import (issue 52; libibverbs-compat.symbols lists them):
// rdma-core 33's libmlx5 and libefa (Debian 11), which its perftest links,
// import the whole private ABI at IBVERBS_PRIVATE_33; rdma-core 56's libmlx5
// (Debian 13) imports ibv_cmd_create_cq_ex2, new since 44, at
// IBVERBS_PRIVATE_34. Like private_stubs.cpp's, these are never reached with
// a urnic device (the providers' registration registers nothing) and fail
// cleanly if called. Each is defined under a name of its own and bound to
// its exported name and version with .symver (a non-default version: found
// by programs already linked against it, never by a new link).
#include <cerrno>

#define URNIC_STUB_BODY_INT  { errno = EOPNOTSUPP; return EOPNOTSUPP; }
#define URNIC_STUB_BODY_PTR  { errno = EOPNOTSUPP; return nullptr; }
#define URNIC_STUB_BODY_VOID {}
#define URNIC_STUB_TYPE_INT int
#define URNIC_STUB_TYPE_PTR void*
#define URNIC_STUB_TYPE_VOID void
#define URNIC_STUB_AT(kind, name, node)                                          \
  extern "C" URNIC_STUB_TYPE_##kind urnic_##node##_##name(...);                  \
  extern "C" URNIC_STUB_TYPE_##kind urnic_##node##_##name(...) URNIC_STUB_BODY_##kind \
  __asm__(".symver urnic_" #node "_" #name ", " #name "@" #node);

// Read by libibverbs' destroy paths after a device disassociation; a bool.
extern "C" {
extern bool urnic_IBVERBS_PRIVATE_33_verbs_allow_disassociate_destroy;
bool urnic_IBVERBS_PRIVATE_33_verbs_allow_disassociate_destroy = false;
}
__asm__(".symver urnic_IBVERBS_PRIVATE_33_verbs_allow_disassociate_destroy, "
        "verbs_allow_disassociate_destroy@IBVERBS_PRIVATE_33");

// rdma-core 56 (Debian 13): new in the private ABI since 44.
URNIC_STUB_AT(INT, ibv_cmd_create_cq_ex2, IBVERBS_PRIVATE_34)

// rdma-core 33 (Debian 11); ibv_query_gid_type@IBVERBS_PRIVATE_33 is a real
// one (device.cpp).
URNIC_STUB_AT(PTR, _verbs_init_and_alloc_context, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, execute_ioctl, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_advise_mr, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_alloc_dm, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_alloc_mw, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_alloc_pd, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_attach_mcast, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_close_xrcd, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_create_ah, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_create_counters, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_create_cq, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_create_cq_ex, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_create_flow, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_create_flow_action_esp, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_create_qp, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_create_qp_ex, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_create_qp_ex2, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_create_rwq_ind_table, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_create_srq, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_create_srq_ex, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_create_wq, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_dealloc_mw, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_dealloc_pd, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_dereg_mr, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_destroy_ah, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_destroy_counters, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_destroy_cq, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_destroy_flow, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_destroy_flow_action, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_destroy_qp, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_destroy_rwq_ind_table, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_destroy_srq, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_destroy_wq, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_detach_mcast, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_free_dm, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_get_context, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_modify_cq, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_modify_flow_action_esp, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_modify_qp, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_modify_qp_ex, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_modify_srq, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_modify_wq, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_open_qp, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_open_xrcd, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_poll_cq, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_post_recv, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_post_send, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_post_srq_recv, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_query_context, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_query_device_any, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_query_mr, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_query_port, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_query_qp, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_query_srq, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_read_counters, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_reg_dm_mr, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_reg_mr, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_req_notify_cq, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_rereg_mr, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, ibv_cmd_resize_cq, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(INT, verbs_init_cq, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(PTR, verbs_open_device, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(VOID, verbs_register_driver_33, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(VOID, verbs_set_ops, IBVERBS_PRIVATE_33)
URNIC_STUB_AT(VOID, verbs_uninit_context, IBVERBS_PRIVATE_33)
