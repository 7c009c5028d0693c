#include "transport/tag_list.hpp"

#include <cerrno>

namespace urnic::transport {

TagList::TagList(uint32_t max_num_tags) : slots_(max_num_tags) {}

TagAddResult TagList::add(uint32_t handle, const TaggedBuffer& buf, bool report_cnt, uint32_t unexpected_cnt) {
  if (handle >= slots_.size() || slots_[handle].in_use) return {EINVAL, false};
  const uint32_t i = handle;
  Slot& s = slots_[i];
  s.buf = buf;
  s.in_use = true;
  s.prev = tail_;
  s.next = kNone;
  if (tail_ == kNone) head_ = i; else slots_[tail_].next = i;
  tail_ = i;
  ++posted_;
  if (report_cnt) sw_unexpected_ = unexpected_cnt;
  s.phase = sw_unexpected_;
  return {0, s.phase != device_unexpected_};
}

void TagList::unlink(uint32_t i) {
  Slot& s = slots_[i];
  if (s.prev == kNone) head_ = s.next; else slots_[s.prev].next = s.next;
  if (s.next == kNone) tail_ = s.prev; else slots_[s.next].prev = s.prev;
  s.in_use = false;
  s.prev = s.next = kNone;
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

uint32_t TagList::find(uint64_t tag) const noexcept {
  if (!matching_enabled()) return kNone;
  for (uint32_t i = head_; i != kNone; i = slots_[i].next) {
    const TaggedBuffer& b = slots_[i].buf;
    if ((tag & b.mask) == (b.tag & b.mask)) return i;
  }
  return kNone;
}

bool TagList::would_match(uint64_t tag) const noexcept { return find(tag) != kNone; }

std::optional<TagMatch> TagList::match(uint64_t tag) {
  const uint32_t i = find(tag);
  if (i == kNone) {
    ++device_unexpected_;
    return std::nullopt;
  }
  TagMatch m{i, slots_[i].buf};
  unlink(i);
  return m;
}

}  // namespace urnic::transport
