#!/usr/bin/env bash
# bench/loss_pingpong.sh [LOSS...]: what loss costs a real ping-pong, next to
# the model (bench/loss_model.py; transport/README.md, "Loss recovery").
# For each loss rate (default 0.01 0.05 0.1), on a fresh daemon that drops
# that share of urnic0's frames (`urnic fault --loss`, both directions:
# the pair is hairpinned), `ibv_rc_pingpong -s 8192` (MTU 1024: 8 packets a
# message; ACK timeout code 14, 67 ms) runs and its time per iteration is
# printed with the daemon's ACK timeouts per message. A benchmark: it
# asserts nothing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
urnic=$root/tools/urnic
losses=("$@")
[[ ${#losses[@]} -gt 0 ]] || losses=(0.01 0.05 0.1)
"$urnic" build > /dev/null
work=$(mktemp -d)
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
port=18700
echo "| loss | iterations | ms per iteration | ACK timeouts per message | model: timeouts per message, ms per iteration |"
echo "|---|---|---|---|---|"
for p in "${losses[@]}"; do
  stop_daemon
  "$urnic" run -- ibv_devinfo -d urnic0 > /dev/null
  "$urnic" fault -d urnic0 --loss "$p" --seed 24 > /dev/null
  n=$(python3 -c "import sys; p=float(sys.argv[1]); print(200 if p >= 0.1 else 1000)" "$p")
  port=$((port + 1))
  "$urnic" run -- ibv_rc_pingpong -g 1 -s 8192 -n "$n" -p "$port" > "$work/server.out" 2>&1 &
  server=$!
  sleep 0.5
  ms=$("$urnic" run -- ibv_rc_pingpong -g 1 -s 8192 -n "$n" -p "$port" 127.0.0.1 2>&1 |
    awk '/iters in/ {printf "%.1f", $(NF-1) / 1000}')
  wait "$server" || true
  t=$("$urnic" stats -d urnic0 --json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["counters"]["local_ack_timeout_err"])')
  model=$(/usr/bin/python3 "$root/bench/loss_model.py" "$p" | awk -F'|' '$3 ~ / 8 / {gsub(/ /, ""); print $4 ", " $5}')
  echo "| $p | $n | ${ms:-failed} | $(python3 -c "print(f'{$t / (2 * $n):.3f}')") | $model |"
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
