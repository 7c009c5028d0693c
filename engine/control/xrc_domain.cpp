#include "engine/control/xrc_domain.hpp"

#include <unistd.h>

#include "engine/datapath/datapath.hpp"
#include "engine/device/device.hpp"

namespace urnic::engine {

XrcDomain::XrcDomain(Device& d, DataPath* p, int fd) : dev(d), dp(p), file_fd(fd) {
  if (dp != nullptr) txrcd = dp->transport().alloc_xrcd();
}

XrcDomain::~XrcDomain() {
  // Every XRC SRQ and target QP in it held it, so the transport's domain
  // has no users left.
  if (dp != nullptr) dp->transport().dealloc_xrcd(txrcd);
  if (file_fd >= 0) ::close(file_fd);
}

XrcTgtQp::XrcTgtQp(std::shared_ptr<XrcDomain> d, std::uint32_t n, std::unique_ptr<QpControl> c)
    : domain(std::move(d)), qpn(n), ctl(std::move(c)) {
  ++domain->dev.usage().qps;
}

XrcTgtQp::~XrcTgtQp() {
  domain->tgt_qps.erase(qpn);
  if (domain->dp != nullptr) {
    domain->dp->transport().destroy_qp(qpn);
  } else {
    domain->dev.free_qpn(qpn);
  }
  --domain->dev.usage().qps;
}

void XrcDomainTable::purge() {
  for (auto it = map_.begin(); it != map_.end();) it = it->second.expired() ? map_.erase(it) : std::next(it);
}

std::shared_ptr<XrcDomain> XrcDomainTable::find(const Device* dev, dev_t fs, ino_t ino) {
  purge();
  auto it = map_.find(Key{dev, fs, ino});
  return it == map_.end() ? nullptr : it->second.lock();
}

void XrcDomainTable::insert(const Device* dev, dev_t fs, ino_t ino, const std::shared_ptr<XrcDomain>& d) {
  purge();
  map_[Key{dev, fs, ino}] = d;
}

}  // namespace urnic::engine
