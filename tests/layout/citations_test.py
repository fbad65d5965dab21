#!/usr/bin/python3
"""Every document a tracked file cites is in the repository, with the cited heading.

Scans every git-tracked text file under SOURCE_ROOT (.h .cc .py .md .yaml .build
.txt, and files without an extension such as scripts/*) for
  - citations `PATH.md §N` (also `§N-§M`, `§N/§M`, `§N, §M`, and a `§N` that opens
    the next comment line after a PATH.md that ends a line): PATH must be a file
    of the repository (relative to SOURCE_ROOT) and, for each N, some Markdown
    heading of it (`#` to `######`, outside code fences) must start with N
    (`### 2.3.4b Ring path` is §2.3.4b, `## 2a. The preconditioner service` is §2a);
  - bare paths under docs/ that end in .md: the file must exist;
  - a design, infeed or training document named other than by its repository path
    (docs/design.md, docs/reference/infeed.md, docs/reference/training.md): such a
    citation cannot be followed from a clone;
  - any mention of the shared folder outside the repository (a parent-directory
    path to it, or its docs folder).
Exits 1 naming file:line and the citation of every problem.

Usage: citations_test.py SOURCE_ROOT [--self-test]
--self-test builds a scratch git tree with one cited document, checks that the
test passes on it, then plants one bad citation and checks that the test fails on
it, so the check itself is known to bite.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

EXTENSIONS = (".h", ".cc", ".py", ".md", ".yaml", ".build", ".txt")
SECTION = r"§\s?([0-9]+[a-z]?(?:\.[0-9]+[a-z]?)*)"
CITATION = re.compile(r"(?<![\w./-])([\w./-]+\.md)`?[ \t]*" + SECTION)
MORE = re.compile(r"\s*(?:[-–/,]|and)\s*" + SECTION)
PATH_AT_END = re.compile(r"(?<![\w./-])([\w./-]+\.md)`?\s*$")
LEADING_SECTION = re.compile(r"^\s*(?://+|#+|\*+|--)?\s*" + SECTION)
BARE_DOCS = re.compile(r"(?<![\w./-])(docs/[\w./-]+\.md)")
NAMED_DOC = re.compile(r"(?<![\w.-])([\w./-]*?)((?:design|infeed|training)\.md)(?![\w-])")
# The repository path of each document named by its file name alone.
CANONICAL = {name + ".md": path for name, path in (("design", "docs/design.md"),
                                                    ("infeed", "docs/reference/infeed.md"),
                                                    ("training", "docs/reference/training.md"))}
# Spelled in pieces so that this file does not match itself.
OUTSIDE = re.compile(re.escape(".." + "/shared") + "|" + re.escape("shared" + "/docs"))
HEADING = re.compile(r"^#{1,6}\s+(\S+)")
FENCE = re.compile(r"^\s*(```|~~~)")


def tracked_files(root):
    out = subprocess.run(["git", "-C", root, "ls-files", "-z"], capture_output=True, check=True)
    for path in out.stdout.decode("utf-8").split("\0"):
        base = os.path.basename(path)
        if path and (path.endswith(EXTENSIONS) or "." not in base):
            yield path


def read_text(root, path):
    try:
        data = open(os.path.join(root, path), "rb").read()
    except (IsADirectoryError, FileNotFoundError):
        return None
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def heading_numbers(root, path, cache):
    """The section numbers of `path`'s Markdown headings ('2.3.4b', '2a', '5'), or None."""
    if path not in cache:
        text = read_text(root, path) if os.path.isfile(os.path.join(root, path)) else None
        numbers, fenced = set(), False
        for line in (text or "").splitlines():
            if FENCE.match(line):
                fenced = not fenced
                continue
            m = None if fenced else HEADING.match(line)
            if m:
                numbers.add(m.group(1).rstrip(".:"))
        cache[path] = numbers if text is not None else None
    return cache[path]


def sections_after(line, start):
    """The sections chained after a citation's first one: '§3.3-§3.5', '§5.2/§5.3', '§3, §4'."""
    found = []
    m = MORE.match(line, start)
    while m:
        found.append(m.group(1))
        m = MORE.match(line, m.end())
    return found


def citations(lines):
    """(line number, path, [sections]) for every `PATH.md §N` in `lines`."""
    for n, line in enumerate(lines, 1):
        for m in CITATION.finditer(line):
            yield n, m.group(1), [m.group(2)] + sections_after(line, m.end())
        end = PATH_AT_END.search(line)
        if end and n < len(lines):
            nxt = LEADING_SECTION.match(lines[n])
            if nxt:
                yield n, end.group(1), [nxt.group(1)] + sections_after(lines[n], nxt.end())


def check_file(root, path, text, cache):
    problems = []
    lines = text.splitlines()
    for n, cited, sections in citations(lines):
        numbers = heading_numbers(root, cited, cache)
        where = "%s:%d: %s §%s" % (path, n, cited, "/§".join(sections))
        if numbers is None:
            problems.append("%s: %s is not a file of the repository" % (where, cited))
            continue
        for s in sections:
            if s not in numbers:
                problems.append("%s: %s has no heading numbered %s" % (where, cited, s))
    for n, line in enumerate(lines, 1):
        for m in BARE_DOCS.finditer(line):
            if not os.path.isfile(os.path.join(root, m.group(1))):
                problems.append("%s:%d: %s is not a file of the repository" % (path, n, m.group(1)))
        for m in NAMED_DOC.finditer(line):
            full = m.group(1) + m.group(2)
            if full != CANONICAL[m.group(2)]:
                problems.append("%s:%d: %s cannot be followed from a clone; cite it as %s"
                                % (path, n, full, CANONICAL[m.group(2)]))
        m = OUTSIDE.search(line)
        if m:
            problems.append("%s:%d: %s points outside the repository" % (path, n, m.group(0)))
    return problems


def check(root):
    problems, count, cache = [], 0, {}
    for path in sorted(tracked_files(root)):
        text = read_text(root, path)
        if text is None:
            continue
        count += 1
        problems += sorted(check_file(root, path, text, cache), key=line_of)
    return problems, count


def line_of(problem):
    """A problem's line number, so a file's problems print in line order."""
    m = re.match(r"[^:]+:(\d+):", problem)
    return int(m.group(1)) if m else 0


def self_test(root):
    scratch = tempfile.mkdtemp(prefix="citations-")
    try:
        os.makedirs(os.path.join(scratch, "docs", "reference"))
        os.makedirs(os.path.join(scratch, "optim"))
        open(os.path.join(scratch, "docs", "reference", "training" + ".md"), "w").write(
            "# Training\n\n## 1. Accumulation\n\n### 1a. Wrapper\n\n### 3.6 Host pipeline\n")
        open(os.path.join(scratch, "docs", "design-notes.md"), "w").write("Notes.\n")
        good = os.path.join(scratch, "optim", "shampoo.h")
        open(good, "w").write("// Shampoo (docs/reference/training.md §3.6, §1a; docs/design-notes.md)\n"
                              "// and the wrapper (docs/reference/training.md\n// §1a).\n")
        subprocess.run(["git", "init", "-q", scratch], check=True)
        subprocess.run(["git", "-C", scratch, "add", "-A"], check=True)
        clean, _ = check(scratch)
        bad = "// Host pipeline (" + "training" + ".md §3.6) and docs/reference/training.md §3.7.\n"
        open(good, "a").write(bad)
        dirty, _ = check(scratch)
    finally:
        shutil.rmtree(scratch)
    if clean:
        sys.exit("self-test: a tree whose citations resolve failed: %s" % clean)
    if not any("cannot be followed from a clone" in p for p in dirty):
        sys.exit("self-test: a bare document name was not caught: %s" % dirty)
    if not any("has no heading numbered 3.7" in p for p in dirty):
        sys.exit("self-test: a missing section was not caught: %s" % dirty)
    print("self-test: bad citations are caught:")
    for p in dirty:
        print("  " + p)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("--") else "."
    if "--self-test" in sys.argv:
        self_test(root)
        return
    problems, count = check(root)
    if problems:
        print("citations: %d that a clone cannot follow:" % len(problems))
        for p in problems:
            print("  " + p)
        sys.exit(1)
    print("citations: %d tracked text files, every cited document and heading is in the repository"
          % count)


if __name__ == "__main__":
    main()
