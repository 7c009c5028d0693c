// Lazy conversion of registered memory (issue 45), the shim's half.
//
// ibv_reg_mr no longer moves an MR's pages (direct_memory.hpp): it
// registers them as they are, marked lazy (ctl::kRegMrLazy), and returns
// after one control round trip. The daemon reaches a lazy MR through
// process_vm_* and watches what that costs (engine/datapath/
// conversion_watch.hpp); once moving its pages would have been cheaper, it
// asks for them on the context's conversion channel. One thread per
// context, started with its first lazy MR, waits on that channel and
// answers each request: it moves the MR's whole pages into a memfd
// (direct_acquire) while the application goes on (writers to a chunk being
// moved wait for that chunk), and hands the memfd over with ConvertMr, or
// declines (memory that cannot be moved: a file mapping, the main stack,
// huge pages). ibv_dereg_mr of an MR being converted waits for the move.
//
// The thread blocks every signal (the application's handlers never run on
// it) and ends when the context is closed; a fork child has none (nor the
// parent's regions: direct_memory.hpp).
#pragma once

#include <pthread.h>
#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace urnic::shim {

class CtlClient;
struct ShimMr;

class MrConverter {
 public:
  // The context's converter: opens the conversion channel on `client` and
  // starts the thread. nullptr when the daemon, the thread or the channel
  // cannot be had; MRs are then registered as before, not lazily.
  static std::unique_ptr<MrConverter> open(CtlClient& client);
  ~MrConverter();
  MrConverter(const MrConverter&) = delete;
  MrConverter& operator=(const MrConverter&) = delete;

  // MR `handle` was registered lazily: requests for it may come.
  void add(std::uint32_t handle, ShimMr* mr);
  // Before its deregistration or reregistration: no request for it is
  // answered from now on; waits while one is being answered.
  void remove(std::uint32_t handle);

 private:
  MrConverter(CtlClient& client, int channel, int stop);
  static void* thread_main(void* self);
  void run();
  void convert(std::uint32_t handle);

  CtlClient& client_;
  int channel_;  // the process's end of the conversion channel
  int stop_;     // an eventfd: the context is closing
  pthread_t thread_{};
  pid_t owner_ = 0;  // the process that started the thread (a fork child has no thread)
  std::mutex mu_;
  std::condition_variable answered_;
  std::unordered_map<std::uint32_t, ShimMr*> lazy_;
  std::uint32_t converting_ = 0;  // the handle being answered (0: none)
};

}  // namespace urnic::shim
