#!/usr/bin/env python3
"""Line coverage per layer from gcovr's JSON (tools/coverage.sh).

  coverage_report.py layers ROOT ALL.json
      one row per layer: lines, lines run, per cent
  coverage_report.py select ROOT UNIT.json NAME=TEST.json...
      for each test, the lines of the daemon and the shims it reaches that the
      unit suite does not; then a greedy choice of tests, each adding the most
      lines not yet reached, until a test adds under 1 % of them.
"""
import json
import sys

# A layer is a top-level folder; engine/ is reported per part (engine/link/,
# engine/datapath/, ...) when its files sit in sub-folders.
SPLIT = {'engine', 'tools'}
# What runs inside the daemon or the applications (the shims): the code an
# acceptance test reaches that the unit suites may not.
THROUGH_DAEMON = ('engine', 'hostif', 'verbs_shim', 'rdmacm_shim', 'transport', 'wire')


def layer_of(path):
    parts = path.split('/')
    if parts[0] in SPLIT and len(parts) > 2:
        return parts[0] + '/' + parts[1]
    return parts[0]


def load(path):
    """{file: (set of code lines, set of lines run)}"""
    with open(path) as f:
        data = json.load(f)
    out = {}
    for entry in data.get('files', []):
        name = entry['file']
        code, run = out.setdefault(name, (set(), set()))
        for line in entry.get('lines', []):
            if line.get('gcovr/noncode'):
                continue
            n = line['line_number']
            code.add(n)
            if line.get('count', 0) > 0:
                run.add(n)
    return out


def layers(files):
    rows = {}
    for name, (code, run) in files.items():
        total, hit = rows.get(layer_of(name), (0, 0))
        rows[layer_of(name)] = (total + len(code), hit + len(run))
    print(f"{'layer':<22} {'lines':>7} {'run':>7} {'%':>6}")
    all_total = all_hit = 0
    for layer in sorted(rows):
        total, hit = rows[layer]
        all_total += total
        all_hit += hit
        print(f'{layer:<22} {total:>7} {hit:>7} {100.0 * hit / max(total, 1):>6.1f}')
    print(f"{'all':<22} {all_total:>7} {all_hit:>7} {100.0 * all_hit / max(all_total, 1):>6.1f}")


def run_lines(files):
    return {(f, n) for f, (_, run) in files.items() for n in run
            if f.split('/')[0] in THROUGH_DAEMON}


def select(unit_path, runs):
    base = run_lines(load(unit_path))
    extra = {}
    for arg in runs:
        name, path = arg.split('=', 1)
        extra[name] = run_lines(load(path)) - base
    union = set().union(*extra.values()) if extra else set()
    print(f'lines the unit suites reach (daemon, shims, layers below): {len(base)}')
    print(f'lines only acceptance tests reach: {len(union)}')
    print(f"{'test':<34} {'own':>6}")
    for name in sorted(extra, key=lambda n: -len(extra[n])):
        print(f'{name:<34} {len(extra[name]):>6}')
    print('greedy choice (test: lines it adds, running share of the acceptance-only lines):')
    covered = set()
    left = dict(extra)
    while left:
        name = max(left, key=lambda n: len(left[n] - covered))
        gain = len(left[name] - covered)
        if gain < 0.01 * max(len(union), 1):
            break
        covered |= left.pop(name)
        print(f'  {name}: +{gain} ({100.0 * len(covered) / max(len(union), 1):.1f} %)')


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == 'layers':
        layers(load(sys.argv[3]))
    elif len(sys.argv) >= 4 and sys.argv[1] == 'select':
        select(sys.argv[3], sys.argv[4:])
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == '__main__':
    main()
