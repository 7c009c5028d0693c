// Registry::cm(): the daemon's one CmService (engine/cm), created on first
// use over the devices and data paths registered by then.
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/cm/cm_service.hpp"
#include "engine/control/session.hpp"
#include "engine/datapath/clock.hpp"

namespace urnic::engine {

CmService& Registry::cm() {
  if (!cm_) {
    // RoCE devices speak the IB CM through their GSI; iWARP devices TCP +
    // MPA through their data path's sockets (engine/cm/cm_iwarp.cpp).
    std::vector<CmDevice> devs;
    std::vector<Device*> served;
    for (auto& d : devices_) {
      served.push_back(d.get());
      CmDevice c = cm_device_of(*d);
      DataPath* dp = datapath(d.get());
      if (dp != nullptr && d->iwarp()) c.dp = dp;
      else if (dp != nullptr)
        c.send = [dp](std::uint8_t sgid_index, const std::array<std::uint8_t, 16>& dgid,
                      std::span<const std::uint8_t> mad) { dp->send_gsi(sgid_index, dgid, mad); };
      devs.push_back(std::move(c));
    }
    cm_ = std::make_shared<CmService>(std::move(devs), engine_now);
    for (std::size_t i = 0; i < served.size(); ++i) {
      if (DataPath* dp = datapath(served[i]); dp != nullptr) {
        cm_->attach(dp, i);
        dp->set_gsi_handler(cm_.get());
        if (IwStreams* st = dp->iw_streams(); st != nullptr) {
          CmService* cm = cm_.get();
          st->set_closed_handler([cm, i](std::uint32_t qpn, transport::Nanos t) { cm->iw_stream_closed(i, qpn, t); });
        }
      }
    }
  }
  return *cm_;
}

}  // namespace urnic::engine
