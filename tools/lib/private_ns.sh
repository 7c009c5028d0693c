# shellcheck shell=bash disable=SC2034  # private_ns: the sourcing script's
# tools/lib/private_ns.sh: how to run a command in namespaces of its own,
# for the runners of other projects' suites (rdma-unit-test, fabtests, UCX's
# gtest, SPDK), whose programs listen on fixed ports or kill by name.
#
#   private_ns_cmd UNSHARE-OPTIONS...
#       sets the array private_ns to the unshare(1) command that makes the
#       namespaces UNSHARE-OPTIONS asks for (e.g. -n, or -n -p -f
#       --mount-proc): as root that alone, otherwise inside a user
#       namespace too (-r) where the kernel allows one. Returns 1 (and
#       private_ns empty) when neither works: the caller says what that
#       means for it (a skip, or a run in the host's namespaces).
#       Then: "${private_ns[@]}" COMMAND [ARGS...]. A new network
#       namespace's loopback is down: COMMAND brings it up.
#
# The one-host acceptance tests use tests/own_netns.sh instead: no user
# namespace (a test that believed itself root would try what only root may).
private_ns=()
private_ns_cmd() {
  private_ns=()
  if [[ $(id -u) -eq 0 ]] && unshare "$@" true 2> /dev/null; then
    private_ns=(unshare "$@")
  elif unshare -r "$@" true 2> /dev/null; then
    private_ns=(unshare -r "$@")
  else
    return 1
  fi
}
