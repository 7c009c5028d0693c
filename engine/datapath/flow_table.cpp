#include "engine/datapath/flow_table.hpp"

#include <algorithm>

namespace urnic::engine {

namespace fl = hostif::flow;

std::uint32_t FlowTable::add(std::uint32_t qpn, const fl::FlowRule& rule) {
  const std::uint32_t id = next_id_++;
  if (next_id_ == 0) next_id_ = 1;
  rules_.push_back(Entry{id, qpn, rule});
  return id;
}

bool FlowTable::remove(std::uint32_t id) {
  const auto it = std::find_if(rules_.begin(), rules_.end(), [id](const Entry& e) { return e.id == id; });
  if (it == rules_.end()) return false;
  rules_.erase(it);
  return true;
}

FlowTable::Steer FlowTable::steer(const FrameKey& k, bool roce, std::vector<std::uint32_t>& out,
                                  std::uint32_t except) const {
  out.clear();
  Steer s;
  auto give = [&](std::uint32_t qpn) {
    if (qpn != except && std::find(out.begin(), out.end(), qpn) == out.end()) out.push_back(qpn);
  };
  // The winning priority of the NORMAL rules that match.
  bool normal = false;
  std::uint16_t best = 0;
  for (const Entry& e : rules_) {
    if (e.rule.type != fl::kAttrNormal || (roce && !asks_for_roce(e.rule)) || !flow_matches(e.rule, k)) continue;
    if (!normal || e.rule.priority < best) best = e.rule.priority;
    normal = true;
  }
  for (const Entry& e : rules_) {
    switch (e.rule.type) {
      case fl::kAttrNormal:
        if (!normal || e.rule.priority != best || (roce && !asks_for_roce(e.rule)) || !flow_matches(e.rule, k))
          break;
        give(e.qpn);
        if ((e.rule.flags & fl::kFlagDontTrap) == 0 && roce) s.trapped = true;
        break;
      case fl::kAttrAllDefault:
        if (!normal && !roce) give(e.qpn);
        break;
      case fl::kAttrMcDefault:
        if (!normal && !roce && k.multicast()) give(e.qpn);
        break;
      case fl::kAttrSniffer: give(e.qpn); break;
      default: break;
    }
  }
  return s;
}

}  // namespace urnic::engine
