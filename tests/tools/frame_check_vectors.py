#!/usr/bin/python3
"""`urnic frame check` on every capture against the committed findings.

usage: frame_check_vectors.py URNIC_CLI VECTORS_DIR EXPECTED [--update]

Runs the checker once over all captures of VECTORS_DIR (--json) and
compares every finding (capture, severity, rule, frames, flow, message)
with EXPECTED, one line each; docs/CONFORMANCE.md explains each of them.
A change in the checker or in a capture shows as a diff. The exit status
must be 1 exactly when some capture has a violation (2 for a usage error
or an unreadable file), and --junit must write one testsuite per capture.
--update rewrites EXPECTED from this run.
"""
import difflib
import glob
import json
import os
import subprocess
import sys
import tempfile
from xml.etree import ElementTree

cli, vectors, expected_path = sys.argv[1:4]
update = "--update" in sys.argv[4:]

captures = sorted(glob.glob(os.path.join(vectors, "*.pcap")))
with tempfile.TemporaryDirectory() as tmp:
    junit = os.path.join(tmp, "check.xml")
    run = subprocess.run([cli, "frame", "check", "--json", "--junit", junit] + captures,
                         capture_output=True, text=True)
    if run.returncode not in (0, 1):
        sys.exit(f"urnic frame check exited {run.returncode}: {run.stderr}")
    suites = ElementTree.parse(junit).getroot().findall("testsuite")
    if len(suites) != len(captures) or any(len(s.findall("testcase")) == 0 for s in suites):
        sys.exit(f"JUnit: {len(suites)} testsuites for {len(captures)} captures")
report = json.loads(run.stdout)

# Usage errors and unreadable files: status 2.
for args in (["frame", "check"], ["frame", "check", os.path.join(vectors, "no-such.pcap")],
             ["frame", "check", "--pmtu", "1000", captures[0]]):
    status = subprocess.run([cli] + args, capture_output=True).returncode
    if status != 2:
        sys.exit(f"{' '.join(args)}: exit status {status}, expected 2")

lines = []
for cap in report["captures"]:
    name = os.path.basename(cap["capture"])
    for f in cap["findings"]:
        frames = ",".join(str(n) for n in f["frames"]) or "-"
        lines.append(f"{name}: {f['severity']} {f['rule']} frames {frames}: {f['flow']}: {f['message']}")
got = "\n".join(lines) + "\n"

any_violation = any(cap["violations"] for cap in report["captures"])
if run.returncode != (1 if any_violation else 0):
    sys.exit(f"exit status {run.returncode}, but violations: {any_violation}")

if update:
    with open(expected_path, "w") as out:
        out.write(got)
    print(f"wrote {expected_path}: {len(lines)} findings")
    sys.exit(0)

with open(expected_path) as f:
    want = f.read()
if got != want:
    sys.stdout.writelines(difflib.unified_diff(want.splitlines(True), got.splitlines(True), "expected", "checker"))
    sys.exit("findings differ from " + expected_path + " (rerun with --update after checking each one)")
print(f"{len(captures)} captures, {len(lines)} findings as expected")
