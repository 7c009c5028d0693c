#include "tools/sysfs/verbs_collect.hpp"

#include <infiniband/verbs.h>
#include <net/if.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

namespace urnic::sysfs {

namespace {

bool query_port(ibv_context* ctx, std::uint8_t num, PortView* p, std::string* error) {
  ibv_port_attr pa{};
  if (const int rc = ibv_query_port(ctx, num, &pa); rc != 0) {
    *error = std::string("ibv_query_port: ") + std::strerror(rc);
    return false;
  }
  p->num = num;
  p->state = pa.state;
  p->phys_state = pa.phys_state;
  p->link_layer = pa.link_layer;
  p->lid = pa.lid;
  p->sm_lid = pa.sm_lid;
  p->lmc = pa.lmc;
  p->sm_sl = pa.sm_sl;
  p->cap_mask = pa.port_cap_flags;
  p->active_width = pa.active_width;
  p->active_speed = pa.active_speed;
  for (int i = 0; i < pa.gid_tbl_len; ++i) {
    GidRow row;
    ibv_gid_entry e{};
    // ENODATA: an empty slot (the zero GID, no attributes).
    if (ibv_query_gid_ex(ctx, num, static_cast<std::uint32_t>(i), &e, 0) == 0) {
      std::memcpy(row.gid.data(), e.gid.raw, 16);
      row.valid = true;
      row.roce_v2 = e.gid_type == IBV_GID_TYPE_ROCE_V2;
      char name[IF_NAMESIZE] = {};
      if (e.ndev_ifindex != 0 && ::if_indextoname(e.ndev_ifindex, name) != nullptr) row.ndev = name;
    }
    p->gids.push_back(row);
  }
  for (int i = 0; i < pa.pkey_tbl_len; ++i) {
    __be16 pkey = 0;
    if (ibv_query_pkey(ctx, num, i, &pkey) != 0) break;
    p->pkeys.push_back(be16toh(pkey));
  }
  return true;
}

}  // namespace

bool collect_devices(std::vector<DeviceView>* out, std::string* error) {
  int n = 0;
  std::unique_ptr<ibv_device*, decltype(&ibv_free_device_list)> list(ibv_get_device_list(&n), &ibv_free_device_list);
  if (!list || n == 0) {
    *error = "libibverbs lists no RDMA device";
    return false;
  }
  for (int i = 0; i < n; ++i) {
    ibv_device* dev = list.get()[i];
    DeviceView v;
    v.name = ibv_get_device_name(dev);
    v.uverbs = dev->dev_name;
    std::unique_ptr<ibv_context, decltype(&ibv_close_device)> ctx(ibv_open_device(dev), &ibv_close_device);
    if (!ctx) {
      *error = "ibv_open_device " + v.name + ": " + std::strerror(errno);
      return false;
    }
    ibv_device_attr da{};
    if (const int rc = ibv_query_device(ctx.get(), &da); rc != 0) {
      *error = "ibv_query_device " + v.name + ": " + std::strerror(rc);
      return false;
    }
    v.node_type = static_cast<std::uint32_t>(dev->node_type);
    v.node_guid = da.node_guid;
    v.sys_image_guid = da.sys_image_guid;
    v.fw_ver = da.fw_ver;
    for (std::uint8_t port = 1; port <= da.phys_port_cnt; ++port) {
      PortView p;
      if (!query_port(ctx.get(), port, &p, error)) {
        *error = v.name + ": " + *error;
        return false;
      }
      for (const GidRow& g : p.gids)
        if (!g.ndev.empty() && std::find(v.netdevs.begin(), v.netdevs.end(), g.ndev) == v.netdevs.end())
          v.netdevs.push_back(g.ndev);
      v.ports.push_back(std::move(p));
    }
    out->push_back(std::move(v));
  }
  return true;
}

}  // namespace urnic::sysfs
