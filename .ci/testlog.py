#!/usr/bin/env python3
"""Render `go test -json` from stdin as plain `go test` prints it, plus where the time went.

Printed, in the order they happen: build output, each failing test's output (as `go test`
without -v prints it), each package's own lines (ok/FAIL, a panic or timeout outside a test),
then each package's slowest top-level tests. Passing tests' logs are dropped, as `go test`
drops them. The exit status is left to `go test` (run this under `set -o pipefail`).
"""
import json
import sys

SLOWEST = 8  # tests named per package, those of at least MIN_SECONDS
MIN_SECONDS = 2

out = {}  # (package, test) -> output lines not yet printed
passed = {}  # package -> passing tests' lines that are not test2json's framing, kept in case
# the package fails: test2json gives a line printed outside testing's log (fmt, log, a child
# process) to the test it last saw named, which may not be the test that printed it
took = {}  # package -> [(seconds, test)] of top-level tests


def emit(s):
    sys.stdout.write(s)
    sys.stdout.flush()


def flush(pkg=None):
    for key in [k for k in out if pkg is None or k[0] == pkg]:
        emit("".join(out.pop(key)))


for line in sys.stdin:
    try:
        ev = json.loads(line)
    except ValueError:
        ev = None
    if not isinstance(ev, dict):
        emit(line)  # not an event (the go command's own output): as it came
        continue
    action, pkg, test = ev.get("Action"), ev.get("Package", ""), ev.get("Test")
    text = ev.get("Output", "")
    if action in ("build-output", "build-fail"):
        emit(text)
    elif test is None:
        if action == "output" and text.startswith(("ok ", "FAIL\t")):
            flush(pkg)  # tests that never ended: a timeout's or a crash's panic is theirs
            kept = passed.pop(pkg, [])
            if text.startswith("FAIL\t") and kept:
                emit("    output of passing tests in the failed package:\n" + "".join(kept))
        if action == "output" and text.strip() != "PASS":
            emit(text)
        if action in ("pass", "fail", "skip") and took.get(pkg):
            slow = [(s, t) for s, t in sorted(took.pop(pkg), reverse=True)[:SLOWEST] if s >= MIN_SECONDS]
            if slow:
                emit("    slowest: " + ", ".join("%s %.0fs" % (t, s) for s, t in slow) + "\n")
    elif action == "output":
        out.setdefault((pkg, test), []).append(text)
    elif action in ("pass", "fail", "skip"):
        lines = out.pop((pkg, test), [])
        if action == "fail":
            emit("".join(lines))
        elif action == "pass":
            passed.setdefault(pkg, []).extend(
                ln for ln in lines if not ln.startswith(("=== ", "--- PASS", "    ")) and ln.strip())
        if "/" not in test and action != "skip":
            took.setdefault(pkg, []).append((ev.get("Elapsed", 0.0), test))

flush()  # a stream cut short (go test itself killed): whatever was left
