// One layer's counters: an `enum class E` ending in kCount, a name table
// keyed by that enum, and a plain array of them (STYLE 19, after rxe's
// rxe_hw_counters: enum, designated names, a compile-time check). Each layer
// that counts has one such table (transport/counters.hpp, engine/observe/
// stats.hpp, engine/datapath/process_memory.hpp, engine/datapath/
// conversion_watch.hpp); `urnic stats` receives
// every counter by its name (ctl::StatsEntry), so adding one is a line in the
// enum, a line in its table, and the increment where the event is decided.
//
// C++ has no designated array initializers, so a table lists
// {E::kName, "name"} pairs and `counter_table_ok` checks at compile time that
// the i-th pair names enum value i, that every value has a pair, and that the
// names fit the stats reply. The writer is the owning thread: plain
// integers, no atomics, nothing but an index on the hot path.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace urnic::transport {

// The longest counter name (ctl::kStatsNameLen - 1: the reply's name field
// keeps a NUL).
inline constexpr std::size_t kCounterNameMax = 27;

template <class E>
constexpr std::size_t counter_count() noexcept {
  return static_cast<std::size_t>(E::kCount);
}

template <class E>
struct CounterName {
  E id;
  std::string_view name;  // lower_snake_case, as `urnic stats` prints it
};

template <class E>
using CounterNames = std::array<CounterName<E>, counter_count<E>()>;

// True if entry i names enum value i, and each name is 1..kCounterNameMax
// characters of [a-z0-9_]. (A missing entry fails earlier: the array's size
// is the enum's count, and a too-short initializer leaves an empty name.)
template <class E>
consteval bool counter_table_ok(const CounterNames<E>& t) {
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (static_cast<std::size_t>(t[i].id) != i) return false;
    if (t[i].name.empty() || t[i].name.size() > kCounterNameMax) return false;
    for (char c : t[i].name)
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

// The counters of one table: plain integers, indexed by the enum.
template <class E>
class CounterArray {
 public:
  static constexpr std::size_t kSize = counter_count<E>();

  void inc(E c, std::uint64_t n = 1) noexcept { v_[static_cast<std::size_t>(c)] += n; }
  void set(E c, std::uint64_t v) noexcept { v_[static_cast<std::size_t>(c)] = v; }  // gauges
  std::uint64_t get(E c) const noexcept { return v_[static_cast<std::size_t>(c)]; }
  std::span<const std::uint64_t, kSize> values() const noexcept { return v_; }

 private:
  std::array<std::uint64_t, kSize> v_{};
};

// Calls f(name, value) for each counter of `a`, in enum order; `names` is
// the table's CounterNames.
template <class E, class F>
void for_each_counter(const CounterNames<E>& names, const CounterArray<E>& a, F&& f) {
  for (std::size_t i = 0; i < CounterArray<E>::kSize; ++i) f(names[i].name, a.values()[i]);
}

}  // namespace urnic::transport
