#!/usr/bin/python3
"""The include graph against docs/architecture.md's allowed-edges table.

Every `#include "ROOM/..."` of a project file is an edge from the room of the
including file to the room of the included one; a room is a folder of the
source tree (sim/host, sim/core, sim/wire and sim/shampoo are rooms of their
own). Each edge must be listed in the table, `<mpi.h>` may be included only by
the rooms the table's `mpi.h` row names, and a module's `internal/` headers
only by that module and its tests. Exits 1 naming every offending include.

Usage: include_graph_test.py SOURCE_ROOT [--self-test]
--self-test copies the tree's table into a scratch tree, adds one edge the
table does not allow, and checks that the test fails on it (and passes
without it), so the check itself is known to bite.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import layout_check  # noqa: E402

BEGIN, END = "<!-- include-graph:begin -->", "<!-- include-graph:end -->"
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
SKIP_DIRS = {".git", "subprojects"}


def read_table(root):
    text = open(os.path.join(root, "docs", "architecture.md"), encoding="utf-8").read()
    if BEGIN not in text or END not in text:
        sys.exit("docs/architecture.md: no allowed-edges table between %s and %s" % (BEGIN, END))
    allowed = {}
    for line in text.split(BEGIN, 1)[1].split(END, 1)[0].splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or cells[0] in ("room", "") or set(cells[0]) <= set("-: "):
            continue
        targets = {t.strip().strip("`") for t in cells[1].split(",")} - {"", "—", "-", "nothing"}
        allowed[cells[0]] = targets
    return allowed


def room_of(path, rooms):
    """The longest room that is a folder prefix of `path` (tests/... is 'tests')."""
    best = None
    for r in rooms:
        if path == r or path.startswith(r + "/"):
            if best is None or len(r) > len(best):
                best = r
    return best


def source_files(root):
    for top, dirs, files in os.walk(root):
        rel = os.path.relpath(top, root)
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not (rel == "." and d.startswith("build"))]
        for f in files:
            if f.endswith((".h", ".cc")):
                yield os.path.normpath(os.path.join(rel, f))


def check(root):
    allowed = read_table(root)
    rooms = [r for r in allowed if r != "mpi.h"] + ["tests"]
    problems, edges = [], 0
    for path in sorted(source_files(root)):
        src = room_of(path, rooms)
        if src is None:
            problems.append("%s: in no room of the table (add its folder to docs/architecture.md)" % path)
            continue
        for n, line in enumerate(open(os.path.join(root, path), encoding="utf-8", errors="replace"), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            kind, target = m.groups()
            where = "%s:%d: #include %s" % (path, n, target)
            if kind == "<":
                if target == "mpi.h" and src not in allowed.get("mpi.h", set()) \
                        and not any(src == r or path.startswith(r + "/") for r in allowed.get("mpi.h", set())):
                    problems.append("%s: only %s may include mpi.h" % (where, ", ".join(sorted(allowed["mpi.h"]))))
                continue
            if not os.path.exists(os.path.join(root, target)):
                continue  # a generated header or one next to the file
            dst = room_of(target, rooms)
            if "/internal/" in target:
                module = target.split("/internal/")[0]
                if not (path.startswith(module + "/") or path.startswith("tests/")):
                    problems.append("%s: %s/internal/ is for %s/ alone" % (where, module, module))
            if dst is None or dst == src or src == "tests":
                continue
            edges += 1
            if dst not in allowed.get(src, set()):
                problems.append("%s: %s may not include %s (docs/architecture.md)" % (where, src, dst))
    return problems, edges


def self_test(root):
    scratch = tempfile.mkdtemp(prefix="include-graph-")
    try:
        os.makedirs(os.path.join(scratch, "docs"))
        shutil.copy(os.path.join(root, "docs", "architecture.md"), os.path.join(scratch, "docs"))
        for f in ("base/error.h", "sim/core/core_loop.cc", "sim/host/host_loop.h"):
            os.makedirs(os.path.join(scratch, os.path.dirname(f)), exist_ok=True)
            open(os.path.join(scratch, f), "w").write('#include "base/error.h"\n')
        clean, _ = check(scratch)
        bad = os.path.join(scratch, "sim/core/core_loop.cc")
        open(bad, "a").write('#include "sim/host/host_loop.h"\n')  # core/ may not see host/
        dirty, _ = check(scratch)
    finally:
        shutil.rmtree(scratch)
    if clean:
        sys.exit("self-test: a tree within the table failed: %s" % clean)
    if not any("sim/core may not include sim/host" in p for p in dirty):
        sys.exit("self-test: sim/core -> sim/host was not caught: %s" % dirty)
    print("self-test: an edge outside the table is caught:", dirty[0])


def main():
    layout_check.run(check, self_test,
                     "include graph: %d includes outside docs/architecture.md's table:",
                     "include graph: %d edges between rooms, all in docs/architecture.md's table")


if __name__ == "__main__":
    main()
