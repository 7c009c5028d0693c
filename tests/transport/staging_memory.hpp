// A MemoryAccess that does what engine/datapath/process_memory.hpp does,
// over a LocalMemory (write_fault_test.cpp, iwarp_pair.hpp): responder
// writes are staged and made at settle() (or before any read or atomic),
// and a write into [hole_lo, hole_hi) then faults and is reported with its
// tag, as a range the application unmapped after registering it.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "tests/transport/fixture.hpp"

namespace urnic::transport::test {

class StagingMemory final : public MemoryAccess {
 public:
  explicit StagingMemory(LocalMemory& m) : inner_(m) {}
  uint64_t hole_lo = 0, hole_hi = 0;
  std::size_t flushes = 0;

  bool read(MemDomain d, uint64_t va, std::span<uint8_t> out) override {
    flush();
    return inner_.read(d, va, out);
  }
  bool write(MemDomain d, uint64_t va, std::span<const uint8_t> in) override {
    return stage_write(d, va, in, WriteTag{});
  }
  bool stage_write(MemDomain d, uint64_t va, std::span<const uint8_t> in, const WriteTag& tag) override {
    staged_.push_back({d, va, {in.begin(), in.end()}, tag});
    return true;
  }
  void settle(std::vector<WriteTag>& faulted) override {
    flush();
    faulted.insert(faulted.end(), faults_.begin(), faults_.end());
    faults_.clear();
  }
  bool compare_swap(MemDomain d, uint64_t va, uint64_t c, uint64_t s, uint64_t& orig) override {
    flush();
    return inner_.compare_swap(d, va, c, s, orig);
  }
  bool fetch_add(MemDomain d, uint64_t va, uint64_t add, uint64_t& orig) override {
    flush();
    return inner_.fetch_add(d, va, add, orig);
  }
  bool atomic_write(MemDomain d, uint64_t va, uint64_t v) override {
    flush();
    return inner_.atomic_write(d, va, v);
  }

 private:
  struct Staged {
    MemDomain dom;
    uint64_t va;
    std::vector<uint8_t> bytes;
    WriteTag tag;
  };
  void flush() {
    if (staged_.empty()) return;
    ++flushes;
    for (const Staged& s : staged_) {
      const bool hole = s.va < hole_hi && s.va + s.bytes.size() > hole_lo;
      if (hole || !inner_.write(s.dom, s.va, s.bytes)) {
        if (s.tag.qpn != 0) faults_.push_back(s.tag);
      }
    }
    staged_.clear();
  }
  LocalMemory& inner_;
  std::deque<Staged> staged_;
  std::vector<WriteTag> faults_;
};

}  // namespace urnic::transport::test
