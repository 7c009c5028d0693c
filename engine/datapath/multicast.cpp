#include "engine/datapath/multicast.hpp"

#include <algorithm>
#include <cerrno>

namespace urnic::engine {

bool McastGroups::is_multicast(const Gid& g) {
  if (g[0] == 0xFF) return true;
  const bool v4_mapped = std::all_of(g.begin(), g.begin() + 10, [](std::uint8_t b) { return b == 0; }) &&
                         g[10] == 0xFF && g[11] == 0xFF;
  return v4_mapped && (g[12] & 0xF0) == 0xE0;
}

int McastGroups::attach(const Gid& g, std::uint32_t qpn) {
  if (!is_multicast(g)) return EINVAL;
  auto it = groups_.find(g);
  if (it != groups_.end() && std::find(it->second.begin(), it->second.end(), qpn) != it->second.end()) return 0;
  if (it == groups_.end() && groups_.size() >= max_groups_) return ENOMEM;
  if (total_ >= max_total_) return ENOMEM;
  if (it != groups_.end() && it->second.size() >= max_per_group_) return ENOMEM;
  groups_[g].push_back(qpn);
  ++total_;
  return 0;
}

int McastGroups::detach(const Gid& g, std::uint32_t qpn) {
  auto it = groups_.find(g);
  if (it == groups_.end()) return EINVAL;
  auto q = std::find(it->second.begin(), it->second.end(), qpn);
  if (q == it->second.end()) return EINVAL;
  it->second.erase(q);
  --total_;
  if (it->second.empty()) groups_.erase(it);
  return 0;
}

void McastGroups::forget_qp(std::uint32_t qpn) {
  for (auto it = groups_.begin(); it != groups_.end();) {
    const auto n = std::erase(it->second, qpn);
    total_ -= static_cast<std::uint32_t>(n);
    it = it->second.empty() ? groups_.erase(it) : std::next(it);
  }
}

std::size_t McastGroups::groups_of(std::uint32_t qpn) const {
  std::size_t n = 0;
  for (const auto& [g, qps] : groups_) n += static_cast<std::size_t>(std::count(qps.begin(), qps.end(), qpn));
  return n;
}

const std::vector<std::uint32_t>* McastGroups::members(const Gid& g) const {
  auto it = groups_.find(g);
  return it == groups_.end() ? nullptr : &it->second;
}

}  // namespace urnic::engine
