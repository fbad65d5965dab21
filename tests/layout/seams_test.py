#!/usr/bin/python3
"""Files and clocks only through base/: one seam each (docs/architecture.md).

Outside base/ (and tests/), no source file opens a file with std::ifstream or
reads std::chrono::steady_clock directly: files are read through
base/file_read.h, time through base/clock.h (MonotonicNow, SecondsSince, Clock).
Exits 1 naming every offending line.

Usage: seams_test.py SOURCE_ROOT [--self-test]
--self-test plants one direct read of the clock in a scratch tree and checks
that the test fails on it and passes without it.
"""
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import layout_check  # noqa: E402
from include_graph_test import source_files  # noqa: E402

FORBIDDEN = [
    (re.compile(r"\bstd::ifstream\b"), "opens a file directly; read it through base/file_read.h"),
    (re.compile(r"\bsteady_clock\b"), "reads the steady clock directly; use base/clock.h"),
]


def check(root):
    problems, files = [], 0
    for path in sorted(source_files(root)):
        if path.startswith(("base/", "tests/")):
            continue
        files += 1
        for n, line in enumerate(open(os.path.join(root, path), encoding="utf-8", errors="replace"), 1):
            code = line.split("//", 1)[0]
            for pattern, why in FORBIDDEN:
                if pattern.search(code):
                    problems.append("%s:%d: %s" % (path, n, why))
    return problems, files


def self_test():
    scratch = tempfile.mkdtemp(prefix="seams-")
    try:
        os.makedirs(os.path.join(scratch, "report"))
        os.makedirs(os.path.join(scratch, "base"))
        open(os.path.join(scratch, "base/clock.h"), "w").write("auto t = std::chrono::steady_clock::now();\n")
        open(os.path.join(scratch, "report/a.cc"), "w").write("// steady_clock in a comment is fine\n")
        clean, _ = check(scratch)
        open(os.path.join(scratch, "report/a.cc"), "a").write("auto t = std::chrono::steady_clock::now();\n")
        dirty, _ = check(scratch)
    finally:
        shutil.rmtree(scratch)
    if clean:
        sys.exit("self-test: a tree that keeps to the seams failed: %s" % clean)
    if not any(p.startswith("report/a.cc:2:") for p in dirty):
        sys.exit("self-test: a direct clock read in report/ was not caught: %s" % dirty)
    print("self-test: a direct clock read outside base/ is caught:", dirty[0])


def main():
    layout_check.run(check, lambda root: self_test(), 'seams: %d reads of files or clocks outside base/:',
                     'seams: %d files outside base/ read files and clocks only through base/')


if __name__ == "__main__":
    main()
