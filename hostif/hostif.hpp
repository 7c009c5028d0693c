// Host-interface plumbing shared by urnicd and the verbs shim: where the
// daemon's socket lives, and sending/receiving one control message together
// with file descriptors (SCM_RIGHTS) on a SOCK_SEQPACKET Unix socket.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace urnic::hostif {

// $URNIC_RUNTIME_DIR, else $XDG_RUNTIME_DIR/urnic, else /tmp/urnic-$UID.
std::string runtime_dir();
inline std::string socket_path(const std::string& dir) { return dir + "/urnicd.sock"; }
// Held (flock) by the running daemon for its lifetime; holds its PID as text.
inline std::string pid_path(const std::string& dir) { return dir + "/urnicd.pid"; }
// Taken by a shim while it starts a daemon, so concurrent starters start one.
inline std::string start_lock_path(const std::string& dir) { return dir + "/start.lock"; }
inline std::string log_path(const std::string& dir) { return dir + "/urnicd.log"; }

// mkdir -p with mode 0700 for the last component; returns 0 or an errno.
int make_runtime_dir(const std::string& dir);

// Send one message plus up to ctl::kMaxFds descriptors. Returns 0 or an errno.
int send_message(int sock, std::span<const std::byte> msg, std::span<const int> fds = {});

// Receive one message (resizes `msg` to its length) and the descriptors that
// came with it (appended to `fds`, close-on-exec). Returns 0, an errno, or
// ECONNRESET at end of stream. Truncated messages fail with EMSGSIZE.
// `sender`, if given, receives the sending process's pid as the kernel
// stamped it (SCM_CREDENTIALS; needs SO_PASSCRED on `sock`, else 0).
int recv_message(int sock, std::vector<std::byte>& msg, std::vector<int>& fds, int* sender = nullptr);

}  // namespace urnic::hostif
