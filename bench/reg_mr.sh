#!/usr/bin/env bash
# bench/reg_mr.sh (issue 45): what registering memory costs on urnic, next
# to pinning the same memory (mlock/munlock) in the same run. A benchmark:
# it prints numbers and asserts nothing.
#
# Rows: ibv_reg_mr + ibv_dereg_mr of 4 KiB .. 4 GiB, pages touched before
# (the same buffer each repetition) and untouched (a fresh mmap each time),
# medians; urnic with direct memory on (the default) and off
# (URNIC_DIRECT_MEMORY=0); mlock/munlock of the same memory as measured in
# the direct-on process. Then the registration-cache miss: N distinct 64 KiB
# buffers each registered, written once with RDMA WRITE, deregistered, in
# buffers per second, next to mlock+munlock of each buffer.
# "x mlock" = urnic's time / mlock's (below 1: cheaper than pinning); for
# the loop, urnic's rate / mlock's.
#
# usage: bench/reg_mr.sh [--max-size BYTES] [--buffers N] [--json FILE] [BUILD_DIR]
# (default: up to 4 GiB, which needs 4 GiB of free memory; 2000 buffers)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
json= max_size=$((4 << 30)) buffers=2000
while [[ $# -gt 0 ]]; do
  case $1 in
    --json) json=$2; shift 2 ;;
    --max-size) max_size=$2; shift 2 ;;
    --buffers) buffers=$2; shift 2 ;;
    -*) echo "usage: $0 [--max-size BYTES] [--buffers N] [--json FILE] [BUILD_DIR]" >&2; exit 2 ;;
    *) build=$1; shift ;;
  esac
done
[[ -x $build/engine/urnicd && -x $build/bench/reg_mr_bench ]] ||
  { echo "bench/reg_mr.sh: no urnicd or reg_mr_bench in $build (tools/urnic build)" >&2; exit 1; }
work=$(mktemp -d /tmp/urnic-regmr.XXXXXX)
# shellcheck disable=SC2034  # bench/lib.sh uses it
urnic=$root/tools/urnic
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
export URNIC_DAEMON=$build/engine/urnicd LD_LIBRARY_PATH=$build/verbs_shim
# mlock of up to 4 GiB: raise the limit where we may (root); else the
# mlock rows of large sizes fail and say so.
ulimit -l unlimited 2> /dev/null || true

run() {  # run LABEL [ENV...]: one process of rows, labelled
  local label=$1
  shift
  env "$@" "$build/bench/reg_mr_bench" --max-size "$max_size" --buffers "$buffers" |
    sed "s/^{/{\"urnic\": \"$label\", /" >> "$work/rows.jsonl" ||
    { echo "bench/reg_mr.sh: reg_mr_bench ($label) failed" >&2; exit 1; }
}
: > "$work/rows.jsonl"
run direct
run no-direct URNIC_DIRECT_MEMORY=0

python3 - "$work/rows.jsonl" "$json" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def size(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"
def us(x):
    return f"{x:,.1f} us" if x < 10_000 else f"{x / 1000:,.1f} ms"
mlock = {(r["size"], r["touched"]): r for r in rows if r["what"] == "mlock" and r["urnic"] == "direct"}
print(f"# bench/reg_mr.sh: {sys.argv[3]} cores, load {sys.argv[4]}; medians; x mlock = time / mlock's time")
print(f"{'size':>8} {'pages':>9} | {'mlock':>10} {'munlock':>10} | {'reg (direct)':>13} {'x':>6} {'dereg':>10} {'x':>6} | "
      f"{'reg (off)':>10} {'x':>6} {'dereg':>10} {'x':>6}")
out = []
for (sz, touched), m in sorted(mlock.items(), key=lambda kv: (kv[0][0], not kv[0][1])):
    line = f"{size(sz):>8} {'touched' if touched else 'untouched':>9} | {us(m['first_us']):>10} {us(m['second_us']):>10} |"
    rec = {"size": sz, "touched": touched, "mlock_us": m["first_us"], "munlock_us": m["second_us"]}
    for label in ("direct", "no-direct"):
        r = next((r for r in rows if r["what"] == "reg" and r["urnic"] == label and r["size"] == sz
                  and r["touched"] == touched), None)
        if r is None:
            line += f" {'-':>10} {'':>6} {'-':>10} {'':>6} |"
            continue
        x1 = r["first_us"] / m["first_us"] if m["first_us"] else 0
        x2 = r["second_us"] / m["second_us"] if m["second_us"] else 0
        w = 13 if label == "direct" else 10
        line += f" {us(r['first_us']):>{w}} {x1:>6.2f} {us(r['second_us']):>10} {x2:>6.2f} |"
        rec[label] = {"reg_us": r["first_us"], "dereg_us": r["second_us"], "reg_x_mlock": x1, "dereg_x_munlock": x2}
    print(line.rstrip("|").rstrip())
    out.append(rec)
loop = {r["urnic"]: r for r in rows if r["what"] == "cache_loop"}
ml = next((r for r in rows if r["what"] == "mlock_loop" and r["urnic"] == "direct"), None)
if ml and loop:
    print(f"\nregister, RDMA WRITE once, deregister {ml['buffers']} distinct 64 KiB buffers:")
    print(f"  mlock+munlock   {ml['per_s']:>12,.0f} buffers/s")
    for label, r in loop.items():
        print(f"  urnic {label:<9} {r['per_s']:>12,.0f} buffers/s  ({r['per_s'] / ml['per_s']:.3f} x mlock; "
              f"reg {r['reg_us']:.1f} us, WRITE {r['write_us']:.1f} us, dereg {r['dereg_us']:.1f} us)")
    out.append({"cache_loop": {k: v["per_s"] for k, v in loop.items()}, "mlock_loop": ml["per_s"]})
if sys.argv[2]:
    json.dump(out, open(sys.argv[2], "w"), indent=1)
EOF
