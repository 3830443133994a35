#!/usr/bin/env python3
"""Print the lines of a failed job's log that say why it failed, at most LIMIT of them.

A failed CI run is often read only by its head and its tail; a job's whole output is printed
when the job ends, in the middle of the run, so its cause is easily cut from view. The pool
prints this summary of each failed job again at the very end: failing tests with their
messages, FAIL lines, panics (a test binary's timeout names the tests it was running), data
races and compile errors. Usage: failsummary.py LOG
"""
import re
import sys

LIMIT = 120
FOLLOW = {  # a line starting a block -> at most how many of the lines after it to keep; a
    # block also ends at a blank line, except a panic's, which keeps its first goroutine
    re.compile(r"^panic: "): 24,
    re.compile(r"^WARNING: DATA RACE"): 24,
}
SINGLE = re.compile(
    r"^(--- FAIL|FAIL\s|\s+\S+_test\.go:\d+: |.*\.go:\d+:\d+: |-- .*: counted as passed|ci: )")


def main(path):
    with open(path, errors="replace") as f:
        lines = f.read().splitlines()
    kept, follow, blanks = [], 0, 0
    for line in lines:
        if follow > 0:
            if not line.strip():
                blanks -= 1
                if blanks < 0:
                    follow = 0
                    continue
            kept.append(line)
            follow -= 1
            continue
        for start, n in FOLLOW.items():
            if start.match(line):
                kept.append(line)
                follow, blanks = n, (1 if line.startswith("panic: ") else 0)
                break
        else:
            if SINGLE.match(line):
                kept.append(line)
    if not kept:
        kept = lines[-20:]  # nothing recognised: the job's last lines
    for line in kept[:LIMIT]:
        print("  " + line)
    if len(kept) > LIMIT:
        print("  [%d more lines; the job's whole output is above]" % (len(kept) - LIMIT))


if __name__ == "__main__":
    main(sys.argv[1])
