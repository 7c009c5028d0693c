// A device's flow steering table (ibv_create_flow on raw packet QPs): which
// raw QPs get a copy of a frame. What mlx5 documents (ibv_create_flow(3),
// "Flow domains and priority"), and what urnic does where it leaves room:
//   - NORMAL rules: the matching rules with the lowest priority value win;
//     every QP with a matching rule of that priority gets one copy (mlx5
//     merges rules of one match into one entry with several destinations,
//     which is how two QPs share a MAC; for rules of one priority that
//     overlap only partly mlx5 leaves the choice open: urnic copies to each).
//   - ALL_DEFAULT: a frame no NORMAL rule took; MC_DEFAULT: the same, for a
//     multicast destination MAC.
//   - SNIFFER: a copy of every frame, whatever else takes it.
//   - Frames the device's RoCE engine handles (RoCE v1/v2 to one of its
//     addresses) reach NORMAL rules only when the rule names RoCE
//     (flow_match.hpp asks_for_roce), never DEFAULT rules; such a rule
//     without IBV_FLOW_ATTR_FLAGS_DONT_TRAP takes the frame away from the
//     RoCE engine (`trapped`), as mlx5's bypass steering sees frames before
//     its RoCE path; with DONT_TRAP it gets a copy and RoCE goes on.
// A frame that matches nothing reaches no QP (counted by the caller).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/datapath/flow_match.hpp"
#include "hostif/flow_spec.hpp"

namespace urnic::engine {

class FlowTable {
 public:
  // Adds `rule` steering to QP `qpn`; returns the rule's id (never 0).
  std::uint32_t add(std::uint32_t qpn, const hostif::flow::FlowRule& rule);
  // False if no rule has that id.
  bool remove(std::uint32_t id);
  [[nodiscard]] bool empty() const noexcept { return rules_.empty(); }
  [[nodiscard]] std::size_t size() const noexcept { return rules_.size(); }

  struct Steer {
    bool trapped = false;  // a RoCE frame a rule took from the RoCE engine
  };
  // The QPs that get a copy of the frame `k` (into `out`, cleared first,
  // each QP once, in rule order). `roce`: the device's RoCE engine handles
  // the frame. `except`: a QP that gets no copy (the sender of a frame
  // looped back on the device; 0: none).
  Steer steer(const FrameKey& k, bool roce, std::vector<std::uint32_t>& out, std::uint32_t except = 0) const;

 private:
  struct Entry {
    std::uint32_t id = 0;
    std::uint32_t qpn = 0;
    hostif::flow::FlowRule rule;
  };
  std::vector<Entry> rules_;
  std::uint32_t next_id_ = 1;
};

}  // namespace urnic::engine
