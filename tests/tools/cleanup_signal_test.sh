#!/usr/bin/env bash
# tools/lib/cleanup.sh undoes what a script made when the script is ended by
# a signal (meson's timeout sends SIGTERM), not only when it exits: a script
# that sourced it makes a directory and starts a process, is sent each
# signal while it waits, and must exit 128 + the signal with both gone.
# (Not SIGINT: a background job of a non-interactive shell starts with it
# ignored, and bash cannot trap a signal ignored on entry; from a terminal,
# Ctrl-C reaches a foreground script, whose INT trap does the same.)
set -uo pipefail
lib=$1/tools/lib/cleanup.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
# A signal this test was started with ignored (SIGHUP under nohup) stays
# ignored in the script it starts, which then cannot trap it: that round
# says so and is skipped (the script would wait out its sleep).
ignored=$((16#$(awk '/^SigIgn:/ {print $2}' /proc/self/status)))
for sig in TERM HUP; do
  if (( ignored & (1 << ($(kill -l "$sig") - 1)) )); then
    echo "skip SIG$sig: ignored since this test started (nohup?), so no script of it can trap it"
    continue
  fi
  # shellcheck disable=SC2016  # expanded by the child script
  bash -c 'source "$1"; d=$(mktemp -d "$2/made.XXXX"); cleanup_paths+=("$d")
           sleep 300 & cleanup_pids+=($!); echo "$d $!" > "$2/state"; wait' _ "$lib" "$tmp" &
  pid=$!
  for _ in $(seq 50); do [[ -s $tmp/state ]] && break; sleep 0.1; done
  read -r made child < "$tmp/state"
  kill -s "$sig" "$pid"
  wait "$pid"
  rc=$?
  want=$((128 + $(kill -l "$sig")))
  if [[ $rc -ne $want ]]; then echo "FAIL $sig: exit $rc, want $want"; fails=$((fails + 1)); fi
  if [[ -e $made ]]; then echo "FAIL $sig: $made left behind"; fails=$((fails + 1)); fi
  if kill -0 "$child" 2>/dev/null; then echo "FAIL $sig: process $child left running"; kill "$child"; fails=$((fails + 1)); fi
  [[ $fails -eq 0 ]] && echo "ok   SIG$sig: exit $rc, directory removed, process stopped"
  rm -f "$tmp/state"
done
exit $((fails != 0))
