#!/usr/bin/env bash
# demo.sh BUILD_DIR: the main demonstration (tools/urnic demo).
# Until the daemon and the verbs shim exist, it shows the wire layer on the
# kernel's own traffic: it runs the wire tests, which parse, re-encode and
# CRC-check every reference capture.
set -euo pipefail
build=$1
root=$(cd "$(dirname "$0")/.." && pwd)
URNIC_VECTORS=$root/tests/vectors "$build/tests/wire/wire_tests" --reporter compact
