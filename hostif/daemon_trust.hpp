// The client side of "the shim authenticates the daemon" (issue 18): urnicd
// reads and writes the memory of the processes it serves, so the verbs and
// rdma_cm shims (and the urnic CLI) talk only to a daemon that runs as the
// user or as root, through a runtime directory and socket that nobody else
// could have planted. Each check prints one line to stderr saying what is
// wrong and how to fix it, and returns EPERM; 0 when all is well.
#pragma once

#include <string>

namespace urnic::hostif {

// `dir` (if it exists) is a directory owned by us or root, not writable by
// group or others.
int check_runtime_dir(const std::string& dir);
// `sock` (if it exists) is a socket owned by us or root.
int check_socket_file(const std::string& sock);
// The peer of connected socket `fd` (SO_PEERCRED) runs as us or as root.
int check_daemon_peer(int fd, const std::string& sock);
// A SOCK_SEQPACKET connection to the daemon's socket `sock`, with the two
// checks around connect (check_socket_file before, check_daemon_peer
// after): the fd, or -errno (-EPERM when a check refused, having said why;
// -ENAMETOOLONG; connect's own, e.g. -ENOENT or -ECONNREFUSED with no
// daemon). What every client (the shims, the CLI) opens.
int connect_trusted(const std::string& sock);

}  // namespace urnic::hostif
