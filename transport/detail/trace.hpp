// Datapath tracing (STYLE 20): "qp#N WHAT FROM->TO (reason)". Compiled out
// unless URNIC_TRACE_TRANSPORT is defined (e.g. -Dcpp_args=-DURNIC_TRACE_TRANSPORT).
#pragma once

#ifdef URNIC_TRACE_TRANSPORT
#include <cstdint>
#include <cstdio>
#include <string_view>

namespace urnic::transport::detail {
inline void trace_transition(uint32_t qpn, std::string_view what, std::string_view from, std::string_view to,
                             std::string_view why) {
  std::fprintf(stderr, "qp#%u %.*s %.*s->%.*s (%.*s)\n", qpn, static_cast<int>(what.size()), what.data(),
               static_cast<int>(from.size()), from.data(), static_cast<int>(to.size()), to.data(),
               static_cast<int>(why.size()), why.data());
}
}  // namespace urnic::transport::detail
#define URNIC_TRACE(qpn, what, from, to, why) ::urnic::transport::detail::trace_transition(qpn, what, from, to, why)
#else
#define URNIC_TRACE(qpn, what, from, to, why) \
  do {                                        \
  } while (false)
#endif
