// XRC domains and XRC target QPs (the IBA XRC annex), the objects that
// outlive the process that made them: as the kernel's ib_xrcd, a domain
// opened through a file is the device's one for that file's inode, shared
// by every process that opens the same file, and an XRC_RECV (target) QP
// belongs to its domain, not to a process: it lives while any handle on it
// does (its creator's, and those ibv_open_qp gave out).
//
// Lifetimes are shared_ptrs: every session handle on a domain (XrcdObj),
// every XRC SRQ and every target QP in it holds the domain; every handle on
// a target QP (QpObj) holds the QP. The last one releases the transport's
// object. The inode table and a domain's QPN table hold weak_ptrs only.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "engine/control/qp_control.hpp"
#include "transport/types.hpp"

namespace urnic::engine {

class DataPath;
class Device;
struct XrcTgtQp;

struct XrcDomain {
  XrcDomain(Device& dev, DataPath* dp, int file_fd);
  ~XrcDomain();
  XrcDomain(const XrcDomain&) = delete;
  XrcDomain& operator=(const XrcDomain&) = delete;

  Device& dev;
  DataPath* dp;                  // null in control-plane-only tests
  // The file the domain was opened through, kept open while the domain
  // exists so its inode cannot be reused for another file (the kernel
  // holds the inode itself). -1: a private domain.
  int file_fd;
  transport::XrcdHandle txrcd{};
  std::map<std::uint32_t, std::weak_ptr<XrcTgtQp>> tgt_qps;  // by QPN, for ibv_open_qp
};

struct XrcTgtQp {
  XrcTgtQp(std::shared_ptr<XrcDomain> d, std::uint32_t n, std::unique_ptr<QpControl> c);
  ~XrcTgtQp();
  XrcTgtQp(const XrcTgtQp&) = delete;
  XrcTgtQp& operator=(const XrcTgtQp&) = delete;

  std::shared_ptr<XrcDomain> domain;
  std::uint32_t qpn;
  std::unique_ptr<QpControl> ctl;
};

// The domains opened through files, per device and inode (in the Registry).
class XrcDomainTable {
 public:
  std::shared_ptr<XrcDomain> find(const Device* dev, dev_t fs, ino_t ino);
  void insert(const Device* dev, dev_t fs, ino_t ino, const std::shared_ptr<XrcDomain>& d);

 private:
  using Key = std::tuple<const Device*, dev_t, ino_t>;
  void purge();  // forget domains that are gone
  std::map<Key, std::weak_ptr<XrcDomain>> map_;
};

}  // namespace urnic::engine
