#!/usr/bin/env python3
"""The UCT test sources of UCX 1.13.1's gtest binary (issue 53).

Reads the tarball's test/gtest/Makefile.am and prints, one a line (relative
to test/gtest), what gtest.mk compiles for the UCT verbs sets:

- from the first `gtest_SOURCES =` list (every test of the binary: UCS,
  UCM, UCT, UCP): the common harness (common/*.cc) and the UCT tests
  (uct/*.cc, uct/v2/*.cc). The UCP and UCS unit tests, ucm/malloc_hook.cc,
  the shared-memory (uct/test_mm.cc) and TCP (uct/tcp/) tests are left out:
  they are most of the binary's compile time and none of them runs over
  verbs;
- the IB lists that follow, `gtest_SOURCES +=` inside `if HAVE_IB`, for
  the conditions HAVE_TL_UD, HAVE_TL_RC and HAVE_RDMACM (the UD and RC
  tests, rdmacm's sockaddr tests). Left out: HAVE_DEVX (uct/ib/test_devx.cc)
  and HAVE_TL_DC (uct/ib/test_dc.cc), whose tests are instantiated only
  for the mlx5 transports, which a device other than a ConnectX has not:
  0 tests on urnic; and CUDA, ROCm.

    trim_gtest_sources.py MAKEFILE_AM
"""
import re
import sys

IB_CONDITIONS = {'HAVE_IB', 'HAVE_TL_UD', 'HAVE_TL_RC', 'HAVE_RDMACM'}

path = sys.argv[1]
lines = open(path).read().split('\n')


def entries(block, head):
    return [w for l in block for w in l.replace(head, '').split() if w != '\\']


out, conds, i, first = [], [], 0, True
while i < len(lines):
    line = lines[i].strip()
    m = re.match(r'(if|endif|else)\b\s*(\w*)', line)
    if m:
        if m.group(1) == 'if':
            conds.append(m.group(2))
        elif m.group(1) == 'endif':
            conds.pop()
        else:
            conds[-1] = '!' + conds[-1]
        i += 1
        continue
    head = next((h for h in ('gtest_SOURCES =', 'gtest_SOURCES +=') if line.startswith(h)), None)
    if head is None:
        i += 1
        continue
    block = []
    while True:
        block.append(lines[i])
        i += 1
        if not block[-1].rstrip().endswith('\\'):
            break
    if head == 'gtest_SOURCES =' and first:
        first = False
        out += [e for e in entries(block, head)
                if e.startswith('common/')
                or (re.match(r'uct/(v2/)?[a-z0-9_]+\.cc$', e) and e != 'uct/test_mm.cc')]
    elif head == 'gtest_SOURCES +=' and 'HAVE_IB' in conds and set(conds) - {'HAVE_GTEST'} <= IB_CONDITIONS:
        out += [e for e in entries(block, head) if e.endswith('.cc')]
if first:
    sys.exit('trim_gtest_sources: no gtest_SOURCES list in ' + path)
print('\n'.join(out))
