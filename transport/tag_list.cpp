#include "transport/tag_list.hpp"

#include <cerrno>

namespace urnic::transport {

TagList::TagList(uint32_t max_num_tags) : slots_(max_num_tags) {
  for (uint32_t i = max_num_tags; i-- > 0;) {
    slots_[i].next = free_;
    free_ = i;
  }
}

TagAddResult TagList::add(const TaggedBuffer& buf, bool report_cnt, uint32_t unexpected_cnt) {
  if (free_ == kNone) return {ENOMEM, 0, false};
  const uint32_t i = free_;
  Slot& s = slots_[i];
  free_ = s.next;
  s.buf = buf;
  s.in_use = true;
  s.prev = tail_;
  s.next = kNone;
  if (tail_ == kNone) head_ = i; else slots_[tail_].next = i;
  tail_ = i;
  ++posted_;
  if (report_cnt) sw_unexpected_ = unexpected_cnt;
  s.phase = sw_unexpected_;
  return {0, i, s.phase != device_unexpected_};
}

void TagList::unlink(uint32_t i) {
  Slot& s = slots_[i];
  if (s.prev == kNone) head_ = s.next; else slots_[s.prev].next = s.next;
  if (s.next == kNone) tail_ = s.prev; else slots_[s.next].prev = s.prev;
  s.in_use = false;
  s.prev = kNone;
  s.next = free_;
  free_ = i;
  --posted_;
}

TagDelResult TagList::del(uint32_t handle) {
  if (handle >= slots_.size() || !slots_[handle].in_use) return {EINVAL, false};
  const bool sync_required = slots_[handle].phase != device_unexpected_;
  unlink(handle);
  return {0, sync_required};
}

bool TagList::sync(uint32_t unexpected_cnt) {
  sw_unexpected_ = unexpected_cnt;
  return matching_enabled();
}

std::optional<TagMatch> TagList::match(uint64_t tag) {
  if (matching_enabled()) {
    for (uint32_t i = head_; i != kNone; i = slots_[i].next) {
      const TaggedBuffer& b = slots_[i].buf;
      if ((tag & b.mask) == (b.tag & b.mask)) {
        TagMatch m{i, b};
        unlink(i);
        return m;
      }
    }
  }
  ++device_unexpected_;
  return std::nullopt;
}

}  // namespace urnic::transport
