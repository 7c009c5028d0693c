#!/usr/bin/env python3
"""The build enforces the layering (issue 17, include/README.md).

For each library, a one-line probe is preprocessed with the exact flags meson
compiles one of that library's sources with (from compile_commands.json):
including a header of the library itself or of one below it must compile,
including one of a library above or beside it must fail because the header
is not found. If someone hands every target the source root again (or a
library gains a dependency it must not have), a forbidden include compiles
and this test fails, naming it.

usage: layering_test.py BUILD_DIR
"""
import json
import os
import shlex
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

# (a source of the library, headers it must see, headers it must not see)
CASES = [
    ("wire/crc.cpp", ["wire/bytes.hpp"],
     ["transport/types.hpp", "hostif/ctl_proto.hpp", "engine/link/link.hpp"]),
    ("transport/qp.cpp", ["transport/types.hpp", "wire/bytes.hpp"],
     ["hostif/ctl_proto.hpp", "engine/link/link.hpp"]),
    ("hostif/hostif.cpp", ["hostif/ctl_proto.hpp"],
     ["engine/observe/stats.hpp", "engine/datapath/datapath.hpp", "engine/control/session.hpp"]),
    ("engine/link/udp_link.cpp", ["engine/link/link.hpp", "transport/transport.hpp"],
     ["engine/observe/stats.hpp", "engine/datapath/datapath.hpp"]),
    ("engine/observe/stats.cpp", ["engine/observe/stats.hpp", "engine/link/udp_link.hpp"],
     ["engine/device/device.hpp"]),
    ("engine/device/device.cpp", ["engine/device/device.hpp"],
     ["engine/datapath/datapath.hpp"]),
    ("engine/datapath/datapath.cpp", ["engine/datapath/datapath.hpp", "engine/device/device.hpp"],
     ["engine/control/session.hpp", "engine/cm/cm_service.hpp"]),
    ("engine/cm/cm_service.cpp", ["engine/cm/cm_service.hpp"],
     ["engine/control/session.hpp", "engine/daemon/engine_loop.hpp"]),
    ("engine/control/session.cpp", ["engine/control/session.hpp", "engine/cm/cm_service.hpp"],
     ["engine/daemon/engine_loop.hpp"]),
    ("verbs_shim/objects.cpp", ["verbs_shim/shim.hpp", "hostif/shm_ring.hpp"],
     ["engine/datapath/datapath.hpp", "engine/control/session.hpp", "rdmacm_shim/cm_internal.hpp"]),
    ("rdmacm_shim/cma.cpp", ["hostif/cm_proto.hpp"],
     ["engine/cm/cm_service.hpp"]),
    ("umad_shim/umad.cpp", ["umad_shim/daemon_conn.hpp", "hostif/umad_proto.hpp"],
     ["engine/device/ib_sma.hpp", "engine/control/umad_service.hpp", "verbs_shim/shim.hpp"]),
    ("tools/cli/observe.cpp", ["hostif/ctl_proto.hpp"],
     ["engine/observe/stats.hpp"]),
]


def probe_command(entry, probe):
    """The library's compile command with its source replaced by `probe`."""
    args = shlex.split(entry["command"])
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MQ", "-MF", "-c"):
            skip = True
            continue
        if a in ("-MD", "-MMD", "-fdiagnostics-color=always") or a == entry["file"]:
            continue
        out.append(a)
    # Preprocessing is what finds (or does not find) a header: no need to
    # parse what it includes.
    return out + ["-fdiagnostics-color=never", "-E", "-o", os.devnull, probe]


def main():
    build = sys.argv[1]
    with open(os.path.join(build, "compile_commands.json")) as f:
        db = json.load(f)
    by_file = {}
    for e in db:
        path = os.path.normpath(os.path.join(e["directory"], e["file"]))
        by_file.setdefault(path, e)
    src_root = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
    probes = []  # (source, header, must_compile, entry)
    failures = 0
    for source, allowed, forbidden in CASES:
        entry = by_file.get(os.path.join(src_root, source))
        if entry is None:
            print(f"FAIL {source}: not in compile_commands.json (moved? update CASES)")
            failures += 1
            continue
        probes += [(source, h, True, entry) for h in allowed] + [(source, h, False, entry) for h in forbidden]
    with tempfile.TemporaryDirectory() as tmp:
        def run(i):
            source, header, _, entry = probes[i]
            probe = os.path.join(tmp, f"probe{i}.cpp")
            with open(probe, "w") as f:
                f.write(f'#include "{header}"\n')
            return subprocess.run(probe_command(entry, probe), cwd=entry["directory"],
                                  capture_output=True, text=True)
        with ThreadPoolExecutor(max_workers=4) as pool:
            results = list(pool.map(run, range(len(probes))))
    for (source, header, must_compile, _), r in zip(probes, results):
        if must_compile and r.returncode != 0:
            print(f"FAIL {source}: its library cannot include {header} (probe broken?)\n{r.stderr}")
            failures += 1
        elif not must_compile and r.returncode == 0:
            print(f"FAIL {source}: its library can include {header}: the layering is broken")
            failures += 1
        elif not must_compile and header not in r.stderr:
            print(f"FAIL {source}: including {header} failed for another reason:\n{r.stderr}")
            failures += 1
        else:
            first = r.stderr.strip().splitlines()[0] if r.stderr.strip() else "found"
            print(f"ok   {source} {'+' if must_compile else '-'} {header}: {first}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
