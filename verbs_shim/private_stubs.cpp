// IBVERBS_PRIVATE_34: the provider ABI of rdma-core 44 (libibverbs/driver.h,
// not installed). urnic has no providers, but libmlx5 and libefa, which
// perftest links directly, import these and everything is linked BIND_NOW:
// the symbols must exist for the program to start. They are never reached
// with a working device (verbs_register_driver_34 registers nothing), and if
// one is called anyway it fails cleanly: EOPNOTSUPP, or NULL with errno.
//
// The real prototypes are in driver.h; a stub only needs the right kind of
// return value, so the ones returning int take (...) and return EOPNOTSUPP.
#include <cerrno>
#include <cstddef>

#define URNIC_STUB_INT(name)  \
  extern "C" int name(...);   \
  extern "C" int name(...) {  \
    errno = EOPNOTSUPP;       \
    return EOPNOTSUPP;        \
  }
#define URNIC_STUB_PTR(name)   \
  extern "C" void* name(...);  \
  extern "C" void* name(...) { \
    errno = EOPNOTSUPP;        \
    return nullptr;            \
  }
#define URNIC_STUB_VOID(name) \
  extern "C" void name(...);  \
  extern "C" void name(...) {}

// Read by libibverbs' destroy paths after a device disassociation; a bool.
extern "C" {
extern bool verbs_allow_disassociate_destroy;
bool verbs_allow_disassociate_destroy = false;
}

// Provider constructors call this; registering nothing keeps mlx5/efa idle.
URNIC_STUB_VOID(verbs_register_driver_34)
URNIC_STUB_VOID(__verbs_log)
URNIC_STUB_VOID(verbs_set_ops)
URNIC_STUB_VOID(verbs_uninit_context)
URNIC_STUB_PTR(_verbs_init_and_alloc_context)
URNIC_STUB_PTR(verbs_open_device)
URNIC_STUB_INT(verbs_init_cq)
URNIC_STUB_INT(__ioctl_final_num_attrs)
URNIC_STUB_INT(execute_ioctl)
URNIC_STUB_INT(ibv_cmd_advise_mr)
URNIC_STUB_INT(ibv_cmd_alloc_dm)
URNIC_STUB_INT(ibv_cmd_alloc_mw)
URNIC_STUB_INT(ibv_cmd_alloc_pd)
URNIC_STUB_INT(ibv_cmd_attach_mcast)
URNIC_STUB_INT(ibv_cmd_close_xrcd)
URNIC_STUB_INT(ibv_cmd_create_ah)
URNIC_STUB_INT(ibv_cmd_create_counters)
URNIC_STUB_INT(ibv_cmd_create_cq)
URNIC_STUB_INT(ibv_cmd_create_cq_ex)
URNIC_STUB_INT(ibv_cmd_create_flow)
URNIC_STUB_INT(ibv_cmd_create_flow_action_esp)
URNIC_STUB_INT(ibv_cmd_create_qp)
URNIC_STUB_INT(ibv_cmd_create_qp_ex)
URNIC_STUB_INT(ibv_cmd_create_qp_ex2)
URNIC_STUB_INT(ibv_cmd_create_rwq_ind_table)
URNIC_STUB_INT(ibv_cmd_create_srq)
URNIC_STUB_INT(ibv_cmd_create_srq_ex)
URNIC_STUB_INT(ibv_cmd_create_wq)
URNIC_STUB_INT(ibv_cmd_dealloc_mw)
URNIC_STUB_INT(ibv_cmd_dealloc_pd)
URNIC_STUB_INT(ibv_cmd_dereg_mr)
URNIC_STUB_INT(ibv_cmd_destroy_ah)
URNIC_STUB_INT(ibv_cmd_destroy_counters)
URNIC_STUB_INT(ibv_cmd_destroy_cq)
URNIC_STUB_INT(ibv_cmd_destroy_flow)
URNIC_STUB_INT(ibv_cmd_destroy_flow_action)
URNIC_STUB_INT(ibv_cmd_destroy_qp)
URNIC_STUB_INT(ibv_cmd_destroy_rwq_ind_table)
URNIC_STUB_INT(ibv_cmd_destroy_srq)
URNIC_STUB_INT(ibv_cmd_destroy_wq)
URNIC_STUB_INT(ibv_cmd_detach_mcast)
URNIC_STUB_INT(ibv_cmd_free_dm)
URNIC_STUB_INT(ibv_cmd_get_context)
URNIC_STUB_INT(ibv_cmd_modify_cq)
URNIC_STUB_INT(ibv_cmd_modify_flow_action_esp)
URNIC_STUB_INT(ibv_cmd_modify_qp)
URNIC_STUB_INT(ibv_cmd_modify_qp_ex)
URNIC_STUB_INT(ibv_cmd_modify_srq)
URNIC_STUB_INT(ibv_cmd_modify_wq)
URNIC_STUB_INT(ibv_cmd_open_qp)
URNIC_STUB_INT(ibv_cmd_open_xrcd)
URNIC_STUB_INT(ibv_cmd_poll_cq)
URNIC_STUB_INT(ibv_cmd_post_recv)
URNIC_STUB_INT(ibv_cmd_post_send)
URNIC_STUB_INT(ibv_cmd_post_srq_recv)
URNIC_STUB_INT(ibv_cmd_query_context)
URNIC_STUB_INT(ibv_cmd_query_device_any)
URNIC_STUB_INT(ibv_cmd_query_mr)
URNIC_STUB_INT(ibv_cmd_query_port)
URNIC_STUB_INT(ibv_cmd_query_qp)
URNIC_STUB_INT(ibv_cmd_query_srq)
URNIC_STUB_INT(ibv_cmd_read_counters)
URNIC_STUB_INT(ibv_cmd_reg_dm_mr)
URNIC_STUB_INT(ibv_cmd_reg_dmabuf_mr)
URNIC_STUB_INT(ibv_cmd_reg_mr)
URNIC_STUB_INT(ibv_cmd_req_notify_cq)
URNIC_STUB_INT(ibv_cmd_rereg_mr)
URNIC_STUB_INT(ibv_cmd_resize_cq)
