#!/usr/bin/env python3
"""Trims UCX's test/gtest/Makefile.am to the UCT tests (issue 53).

The first `gtest_SOURCES =` list of UCX 1.13.1's test/gtest/Makefile.am names
every test of the binary (UCS, UCM, UCT, UCP); the UCT verbs set needs only
the common harness (common/*.cc) and the UCT tests (uct/*.cc, uct/v2/*.cc).
The UCP and UCS unit tests, ucm/malloc_hook.cc (which GCC 12 rejects with
-Werror=use-after-free), the shared-memory (uct/test_mm.cc) and TCP
(uct/tcp/) tests are dropped from it: they are most of the binary's compile
time and none of them runs over verbs. The IB-only lists that follow
(`gtest_SOURCES += uct/ib/...`) are kept as they are.

    trim_gtest_sources.py MAKEFILE_AM   (rewrites it in place)
"""
import re
import sys

path = sys.argv[1]
lines = open(path).read().split('\n')
out, i = [], 0
while i < len(lines):
    if lines[i].startswith('gtest_SOURCES = '):
        block = []
        while True:
            block.append(lines[i])
            i += 1
            if not block[-1].rstrip().endswith('\\'):
                break
        entries = [w for l in block for w in l.replace('gtest_SOURCES =', '').split() if w != '\\']
        keep = [e for e in entries
                if e.startswith('common/')
                or (re.match(r'uct/(v2/)?[a-z0-9_]+\.cc$', e) and e != 'uct/test_mm.cc')]
        out.append('gtest_SOURCES = \\')
        out += ['\t%s%s' % (e, ' \\' if n + 1 < len(keep) else '') for n, e in enumerate(keep)]
        out += lines[i:]
        break
    out.append(lines[i])
    i += 1
else:
    sys.exit('trim_gtest_sources: no gtest_SOURCES list in ' + path)
open(path, 'w').write('\n'.join(out))
