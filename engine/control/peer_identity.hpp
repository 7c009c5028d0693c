// Who is at the other end of a control connection, bound so that it cannot
// be mistaken for another process later (issue 18).
//
// A pid alone names a process only while that process lives: after it exits
// and is reaped, the pid is handed out again, and a daemon that went on
// reading "pid P"'s memory would read a stranger's. So each connection gets a
// pidfd for its peer (SO_PEERPIDFD, taken by the kernel at connect(), where
// the kernel has it, 6.5 and later; else pidfd_open of the SO_PEERCRED pid,
// accepted only if that process started no later than the connection was
// accepted and has the peer's uid). The daemon watches the pidfd: when the
// process exits the session is closed, whoever still holds the socket.
//
// Every message is also checked against the bound pid (SO_PASSCRED: the
// kernel stamps each message with its sender's pid), so a child that
// inherited the socket across fork() cannot act through its parent's session
// (libibverbs' fork semantics: the child must open its own device).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/device/device.hpp"  // AccessPolicy (the config)

namespace urnic::engine {


struct PeerIdentity {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  int pidfd = -1;        // owned by the caller once identify_peer succeeded
  bool peer_pidfd = false;  // from SO_PEERPIDFD (else pidfd_open + checks)
};

// Fills `out` for the peer of connected Unix socket `sock`, accepted at
// CLOCK_BOOTTIME `accepted_ns`, and turns on SO_PASSCRED so that recv_message
// reports each message's sender. Returns 0, or an errno with `why` saying
// what failed (ESRCH: the peer is gone or its pid was already reused).
int identify_peer(int sock, std::uint64_t accepted_ns, PeerIdentity& out, std::string& why);

// Now on CLOCK_BOOTTIME (the clock /proc/PID/stat start times count on).
std::uint64_t boottime_ns();

// Process `pid`'s start time in nanoseconds since boot (from /proc/PID/stat,
// clock-tick resolution), or 0 if it cannot be read.
std::uint64_t process_start_ns(pid_t pid);

// Whether the process behind `pidfd` has exited (the pidfd polls readable).
bool pidfd_exited(int pidfd);

// Whether `peer` may use a daemon running as `daemon_uid` under `policy`;
// if not, `why` says how to allow it.
bool peer_allowed(const PeerIdentity& peer, uid_t daemon_uid, const AccessPolicy& policy, std::string& why);

// The kernel lets a process at another's memory (process_vm_readv/writev)
// by its ptrace access check, which a root daemon passes for every process.
// So a root daemon serving another user must itself make sure that the
// memory it registers for a process is memory that user could reach:
// needs_memory_guard says when (daemon root, peer not), memory_guarded
// whether process `pid` (the peer, bound by its pidfd) is such a process
// now and for as long as its MRs live:
// - every uid (real, effective, saved, fs) is `uid` and every gid `gid`;
// - it is dumpable (it did not exec a setuid, setgid, file-capability or
//   unreadable image: the kernel makes the files in /proc/PID root's);
// - no_new_privs is set, so no later exec can make it more privileged
//   while it keeps its session (it could clear FD_CLOEXEC on the socket and
//   exec a setuid program, whose memory its MRs would then cover). The flag
//   is inherited and can never be cleared; the verbs shim sets it before
//   it registers memory with a root daemon.
// If not, `why` says what is missing.
bool needs_memory_guard(uid_t peer_uid, uid_t daemon_euid);

// Whether process `pid` holds capability `cap` (CAP_NET_RAW: 13) in its
// effective set (CapEff in /proc/PID/status) in the daemon's own user
// namespace: what the kernel's rdma_dev_access_netns(dev, CAP_NET_RAW) asks
// of a process that creates a raw packet QP (a capability held only in a
// child user namespace does not count for the device's network).
bool process_has_capability(pid_t pid, unsigned cap);
bool memory_guarded(pid_t pid, uid_t uid, gid_t gid, std::string& why);

}  // namespace urnic::engine
