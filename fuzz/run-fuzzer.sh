#!/usr/bin/env bash
# run-fuzzer.sh FUZZER PCAP_TO_CORPUS VECTORS_DIR WORK_DIR
# Seeds WORK_DIR/seeds with every frame of the captures (once), then runs the
# fuzzer for URNIC_FUZZ_SECONDS (default 30). Crashes land in WORK_DIR.
set -euo pipefail
fuzzer=$(realpath "$1") to_corpus=$(realpath "$2") vectors=$3 work=$4
seconds=${URNIC_FUZZ_SECONDS:-30}
mkdir -p "$work/seeds" "$work/corpus"
if [[ -z $(ls -A "$work/seeds") ]]; then
  for f in "$vectors"/*.pcap; do "$to_corpus" "$f" "$work/seeds"; done
fi
cd "$work"
exec "$fuzzer" -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$work/" corpus seeds
