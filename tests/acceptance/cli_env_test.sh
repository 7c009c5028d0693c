#!/usr/bin/env bash
# Acceptance (issue 22): `tools/urnic env` prints the environment that makes
# every later command of a shell or CI step use urnic without wrapping.
# Its stdout must be shell assignments only (the build's own output goes to
# stderr), and after `eval "$(tools/urnic env)"` unmodified programs find
# urnic0, start the daemon themselves and move data (ibv_rc_pingpong with a
# private runtime directory). The daemon is stopped by its PID.
#
# usage: cli_env_test.sh SOURCE_ROOT BUILD_DIR
set -uo pipefail
root=$1
build=$2

asan_probe=$build/verbs_shim/libibverbs.so.1
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"
if [[ -n $asan_rt ]]; then
  echo "SKIP: tools/urnic env points at the release build's libraries"
  exit 77
fi
unset LD_LIBRARY_PATH URNIC_DAEMON URNIC_RUNTIME_DIR LD_PRELOAD
rt=$(mktemp -d /tmp/urnic-cli-env.XXXXXX)
cleanup_paths+=("$rt")
cleanup_daemon_dirs+=("$rt/run")
server_pid=

out=$(URNIC_BUILD_DIR=$build "$root/tools/urnic" env 2> "$rt/env.err")
rc=$?
if (( rc == 0 )) && ! grep -qv '^export [A-Z_]*=' <<< "$out" && grep -q '^export LD_LIBRARY_PATH=' <<< "$out"; then
  pass "tools/urnic env: $(wc -l <<< "$out") export lines, nothing else on stdout"
else
  fail "tools/urnic env: exit $rc, stdout: $(head -3 <<< "$out" | tr '\n' ' ') stderr: $(tail -2 "$rt/env.err" | tr '\n' ' ')"
  finish
  exit
fi
eval "$out"
export URNIC_RUNTIME_DIR=$rt/run
mkdir -p "$URNIC_RUNTIME_DIR"

if ibv_devinfo -l 2>&1 | grep -qx $'\turnic0'; then pass "after eval: ibv_devinfo -l lists urnic0"
else fail "after eval: ibv_devinfo -l: $(ibv_devinfo -l 2>&1 | tr '\n' ' ')"; fi

port=$((20000 + $$ % 20000))
timeout "$limit" ibv_rc_pingpong -d urnic0 -g 1 -p "$port" -n 50 > "$rt/server.out" 2>&1 &
server_pid=$!
sleep 0.5
timeout "$limit" ibv_rc_pingpong -d urnic0 -g 1 -p "$port" -n 50 127.0.0.1 > "$rt/client.out" 2>&1
crc=$?
wait "$server_pid"
src=$?
server_pid=
if (( crc == 0 && src == 0 )) && grep -qE '50 iters in' "$rt/client.out"; then
  pass "after eval: ibv_rc_pingpong, 50 iterations ($(grep -oE '[0-9.]+ usec/iter' "$rt/client.out"))"
else
  fail "after eval: ibv_rc_pingpong: client exit $crc, server exit $src; client said: $(said "$rt/client.out")"
fi
finish
