// Multicast group membership of one device's UD QPs (ibv_attach_mcast,
// IBA 10.5.2.3 / 11.3.1). A UD send to a multicast GID with destination QPN
// 0xFFFFFF is delivered to every QP of the device attached to that group,
// the sender's own included (hardware loops multicast back unless a QP asks
// for IBV_QP_CREATE_BLOCK_SELF_MCAST_LB, which urnic does not offer).
// This is the device's table; the data path also joins each group with
// members on the link when the link can (engine/link/link.hpp join_group), so
// sends from other hosts arrive (engine/cm/README.md, UD multicast).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <vector>

namespace urnic::engine {

class McastGroups {
 public:
  using Gid = std::array<std::uint8_t, 16>;
  // IBA 4.1.1: multicast GIDs start with 0xFF; RoCE v2 over IPv4 uses the
  // v4-mapped form of an IPv4 multicast address (224.0.0.0/4).
  static bool is_multicast(const Gid& g);

  McastGroups(std::uint32_t max_groups, std::uint32_t max_qps_per_group, std::uint32_t max_total)
      : max_groups_(max_groups), max_per_group_(max_qps_per_group), max_total_(max_total) {}

  // 0; EINVAL for a GID that is not multicast; ENOMEM past the device
  // limits. Attaching a QP that is already a member succeeds (as uverbs).
  int attach(const Gid& g, std::uint32_t qpn);
  // 0; EINVAL if the QP is not a member of the group.
  int detach(const Gid& g, std::uint32_t qpn);
  // The QP is gone (destroyed by its process's exit): leave every group.
  void forget_qp(std::uint32_t qpn);
  [[nodiscard]] std::size_t groups_of(std::uint32_t qpn) const;
  // The QPs attached to `g`, or nullptr if none.
  [[nodiscard]] const std::vector<std::uint32_t>* members(const Gid& g) const;
  [[nodiscard]] std::size_t group_count() const { return groups_.size(); }
  // Calls f(gid) for every group with members.
  template <typename F>
  void for_each_group(F&& f) const {
    for (const auto& [g, qps] : groups_) f(g);
  }

 private:
  std::uint32_t max_groups_, max_per_group_, max_total_;
  std::uint32_t total_ = 0;
  std::map<Gid, std::vector<std::uint32_t>> groups_;
};

}  // namespace urnic::engine
