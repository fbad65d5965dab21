#!/usr/bin/python3
"""A file's namespace is its folder's: names say where they live.

The rooms are those of docs/architecture.md's allowed-edges table. The code of
room R lives in namespace tpusim::R with '/' read as '::' (sim/host is
tpusim::sim::host), its internal/ headers in tpusim::R::internal; base/ is the
project's vocabulary and lives in tpusim itself (and tpusim::internal). A file
may open another room's namespace only for what C++ requires there: forward
declarations of that room's types, and the JSON serializers
(NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE) that argument-dependent lookup finds only
beside the type. Exits 1 naming every block outside its file's namespace.

Usage: namespace_test.py SOURCE_ROOT [--self-test]
--self-test builds a scratch tree with one file in the wrong namespace and
checks that the test fails on it and passes without it.
"""
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import layout_check  # noqa: E402
from include_graph_test import read_table, room_of, source_files  # noqa: E402

OPEN = re.compile(r"^namespace (tpusim[\w:]*) \{")
CLOSE = re.compile(r"^\}")
# What another room's namespace may hold: forward declarations, serializers, comments.
FOREIGN_OK = re.compile(
    r"^\s*$|^\s*//|^\s*(struct|class|enum class) \w+( : \w+)?;|^\s*NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE\(|^\s+[\w, ]+\)?$")


def namespace_of(room):
    return "tpusim" if room == "base" else "tpusim::" + room.replace("/", "::")


def blocks(path):
    """(first line number, namespace, body lines) of each top-level tpusim block."""
    lines = open(path, encoding="utf-8", errors="replace").read().split("\n")
    i = 0
    while i < len(lines):
        m = OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        depth = 1
        while j < len(lines) and depth:
            if OPEN.match(lines[j]):
                depth += 1
            elif CLOSE.match(lines[j]):
                depth -= 1
            j += 1
        yield i + 1, m.group(1), lines[i + 1:j - 1]
        i = j


def check(root):
    rooms = [r for r in read_table(root) if r != "mpi.h"]
    problems, files = [], 0
    for path in sorted(source_files(root)):
        if path.startswith("tests/"):
            continue
        room = room_of(path, rooms)
        if room is None:
            continue  # the include-graph test names files in no room
        files += 1
        own = namespace_of(room)
        for line, ns, body in blocks(os.path.join(root, path)):
            if ns in (own, own + "::internal"):
                continue
            if all(FOREIGN_OK.match(b) for b in body):
                continue
            problems.append("%s:%d: namespace %s in %s/, whose namespace is %s" % (path, line, ns, room, own))
    return problems, files


def self_test(root):
    scratch = tempfile.mkdtemp(prefix="namespace-")
    try:
        os.makedirs(os.path.join(scratch, "docs"))
        shutil.copy(os.path.join(root, "docs", "architecture.md"), os.path.join(scratch, "docs"))
        good = {
            "base/error.h": "namespace tpusim {\nint a;\n}  // namespace tpusim\n",
            "sim/host/host_loop.h": "namespace tpusim::sim {\nstruct Fwd;\n}  // namespace tpusim::sim\n"
                                    "namespace tpusim::sim::host {\nint b;\n}  // namespace tpusim::sim::host\n",
            "report/report.h": "namespace tpusim::report {\nint c;\n}  // namespace tpusim::report\n",
        }
        for f, text in good.items():
            os.makedirs(os.path.join(scratch, os.path.dirname(f)), exist_ok=True)
            open(os.path.join(scratch, f), "w").write(text)
        clean, _ = check(scratch)
        open(os.path.join(scratch, "report/report.h"), "a").write(
            "namespace tpusim::sim {\nint d;\n}  // namespace tpusim::sim\n")
        dirty, _ = check(scratch)
    finally:
        shutil.rmtree(scratch)
    if clean:
        sys.exit("self-test: a tree whose files are in their folders' namespaces failed: %s" % clean)
    if not any("report/report.h" in p and "tpusim::sim" in p for p in dirty):
        sys.exit("self-test: tpusim::sim in report/ was not caught: %s" % dirty)
    print("self-test: a file outside its folder's namespace is caught:", dirty[0])


def main():
    layout_check.run(check, self_test, "namespaces: %d blocks outside their folder's namespace:",
                     "namespaces: %d files, each in its folder's namespace")


if __name__ == "__main__":
    main()
