#include "transport/tm_header.hpp"

namespace urnic::transport {
namespace {

uint64_t load_be(std::span<const std::byte> p, size_t at, size_t n) noexcept {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v = (v << 8) | std::to_integer<uint64_t>(p[at + i]);
  return v;
}

void store_be(std::span<std::byte> p, size_t at, size_t n, uint64_t v) noexcept {
  for (size_t i = n; i-- > 0; v >>= 8) p[at + i] = static_cast<std::byte>(v & 0xFF);
}

}  // namespace

std::optional<Tmh> parse_tmh(std::span<const std::byte> msg) noexcept {
  if (msg.size() < kTmhBytes) return std::nullopt;
  const auto op = std::to_integer<uint8_t>(msg[0]);
  if (op > static_cast<uint8_t>(TmhOp::kEager)) return std::nullopt;
  return Tmh{static_cast<TmhOp>(op), static_cast<uint32_t>(load_be(msg, 4, 4)), load_be(msg, 8, 8)};
}

std::optional<Rvh> parse_rvh(std::span<const std::byte> msg) noexcept {
  if (msg.size() < kTmhBytes + kRvhBytes) return std::nullopt;
  return Rvh{load_be(msg, kTmhBytes, 8), static_cast<uint32_t>(load_be(msg, kTmhBytes + 8, 4)),
             static_cast<uint32_t>(load_be(msg, kTmhBytes + 12, 4))};
}

void write_tmh(std::span<std::byte, kTmhBytes> out, const Tmh& tmh) noexcept {
  out[0] = static_cast<std::byte>(tmh.op);
  store_be(out, 1, 3, 0);  // reserved
  store_be(out, 4, 4, tmh.app_ctx);
  store_be(out, 8, 8, tmh.tag);
}

void write_rvh(std::span<std::byte, kRvhBytes> out, const Rvh& rvh) noexcept {
  store_be(out, 0, 8, rvh.va);
  store_be(out, 8, 4, rvh.rkey);
  store_be(out, 12, 4, rvh.length);
}

}  // namespace urnic::transport
