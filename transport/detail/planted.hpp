// Private: the planted bugs (issue 20; PlantedBugs in transport/types.hpp)
// exist only in the conformance test build (issue 46). The two sources
// that hold them, responder.cpp and iw_tx.cpp, are compiled once for the
// product (URNIC_PLANTED_BUGS undefined: kPlantedBugs is false and every
// planted() test folds away, so urnicd has no planted-bug branch) and once
// more with URNIC_PLANTED_BUGS=1 into urnic_transport_planted, whose two
// objects only the test daemon urnicd-conform links, ahead of
// urnic_transport (transport/meson.build). Include it from those two
// sources only: elsewhere the macro would not say which build this is.
#pragma once

#include "transport/transport.hpp"

#ifndef URNIC_PLANTED_BUGS
#define URNIC_PLANTED_BUGS 0
#endif

namespace urnic::transport::detail {
namespace {  // one value per object: the product's and the test build's differ

constexpr bool kPlantedBugs = URNIC_PLANTED_BUGS != 0;

// Whether the device's config planted `bug`: in the test build as it says,
// in the product never.
constexpr bool planted(const TransportConfig& cfg, bool PlantedBugs::*bug) noexcept {
  if constexpr (kPlantedBugs) {
    return cfg.planted.*bug;
  } else {
    (void)cfg;
    (void)bug;
    return false;
  }
}

}  // namespace
}  // namespace urnic::transport::detail
