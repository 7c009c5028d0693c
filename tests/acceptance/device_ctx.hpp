// The first device of the list opened with a PD, for the Catch2 acceptance
// programs (released in reverse order on scope exit). A program that checks
// the list or wants more (a CQ) derives from it.
#pragma once

#include <infiniband/verbs.h>

#include <catch2/catch.hpp>

namespace urnic::test {

struct DeviceCtx {
  ibv_device** list = nullptr;
  int count = 0;  // devices in `list`
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  DeviceCtx() {
    list = ibv_get_device_list(&count);
    REQUIRE(list != nullptr);
    REQUIRE(count >= 1);
    ctx = ibv_open_device(list[0]);
    REQUIRE(ctx != nullptr);
    pd = ibv_alloc_pd(ctx);
    REQUIRE(pd != nullptr);
  }
  ~DeviceCtx() {
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
    ibv_free_device_list(list);
  }
  DeviceCtx(const DeviceCtx&) = delete;
  DeviceCtx& operator=(const DeviceCtx&) = delete;
};

}  // namespace urnic::test
