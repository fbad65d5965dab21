#!/usr/bin/python3
"""No function body outside tests/ over 60 lines (the house rule: a function does
one job and reads top to bottom; a long loop with phases becomes a class), and no
source file outside tests/ over 700 lines (a file that long holds more than one
concept: split it by class or by section).

A body is found by brace matching after a ')' that ends a signature (with
const/noexcept/override, a trailing return type or a constructor's initialiser
list); braces inside strings, characters and comments do not count, and nested
bodies (lambdas, local classes) belong to their enclosing function. Exits 1
naming every function over the limit.

Usage: function_length_test.py SOURCE_ROOT [--limit N] [--self-test]
"""
import os
import re
import sys
import tempfile

LIMIT = 60
FILE_LIMIT = 700
ROOMS = ("base", "cluster", "infeed", "embedding", "optim", "model", "run", "sim", "report",
         "sweep", "app")
SIGNATURE_END = re.compile(
    r"\)\s*(const\s*)?(noexcept\s*)?(override\s*)?(final\s*)?(->\s*[\w:<>,\s*&]+)?\s*$")
CONTROL = re.compile(r"\b(if|for|while|switch|catch|do|else|namespace|class|struct|enum|union)\b")


def blank_literals(text):
    """`text` with comments, strings and character literals blanked (lines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
        elif text[i] in "\"'":
            q, j = text[i], i + 1
            while j < n and text[j] != q:
                j += 2 if text[j] == "\\" else 1
            out.append(q + re.sub(r"[^\n]", " ", text[i + 1:j]) + q)
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def statement_head(code, brace):
    """The code between the statement start and the '{' at `brace`, walking back over
    balanced parentheses and over braced member initialisers (`b_{2}` in a
    constructor's initialiser list), stopping at ';', '{' or a block's '}'."""
    i, depth = brace - 1, 0
    while i >= 0:
        c = code[i]
        if c == ")":
            depth += 1
        elif c == "(":
            depth -= 1
        elif depth == 0 and c in ";{":
            break
        elif depth == 0 and c == "}":
            opening = matching_open(code, i)
            if opening <= 0 or not re.match(r"\w", code[opening - 1]):
                break
            i = opening
        i -= 1
    return code[i + 1:brace]


def matching_open(code, close):
    depth = 0
    for j in range(close, -1, -1):
        depth += {"}": 1, "{": -1}.get(code[j], 0)
        if depth == 0:
            return j
    return -1


def opens_function(code, brace):
    """Whether the '{' at `brace` opens a function body."""
    head = statement_head(code, brace)
    if "(" not in head:
        return False
    name = head.split("(")[0]
    if CONTROL.search(name) or "=" in name:
        return False
    # A constructor's initialiser list: keep what comes before the ':' after the ')'.
    m = re.search(r"\)\s*(noexcept\s*)?:(?!:)", head)
    if m:
        head = head[: m.start() + 1]
    return bool(SIGNATURE_END.search(head.rstrip()))


def long_functions(path, text, limit):
    code = blank_literals(text)
    found, stack = [], []
    for i, c in enumerate(code):
        if c == "{":
            stack.append((not any(s[0] for s in stack) and opens_function(code, i), i))
        elif c == "}" and stack:
            is_function, start = stack.pop()
            if is_function:
                first = code.count("\n", 0, start) + 1
                last = code.count("\n", 0, i) + 1
                if last - first + 1 > limit:
                    found.append((path, first, last - first + 1))
    return found


def room_sources(root):
    """(relative path, text) of every .cc and .h outside tests/."""
    for room in ROOMS:
        for top, _, files in os.walk(os.path.join(root, room)):
            for f in sorted(files):
                if f.endswith((".cc", ".h")):
                    path = os.path.join(top, f)
                    yield os.path.relpath(path, root), open(path, encoding="utf-8").read()


def check(root, limit):
    problems = []
    for rel, text in room_sources(root):
        problems += long_functions(rel, text, limit)
    return problems


def long_files(root, limit=FILE_LIMIT):
    """(path, lines) of every source file outside tests/ over `limit` lines."""
    return [(rel, text.count("\n")) for rel, text in room_sources(root) if text.count("\n") > limit]


def self_test():
    body = "\n".join("  x += %d;" % i for i in range(70))
    short = "int Short(int x) const {\n  return x;\n}\n"
    long = "Foo::Foo(int a) : a_(a), b_{2} {\n" + body + "\n}\n"
    with tempfile.TemporaryDirectory() as scratch:
        os.makedirs(os.path.join(scratch, "sim"))
        open(os.path.join(scratch, "sim", "a.cc"), "w").write(short + 'const char* s = "{{{";\n')
        if check(scratch, LIMIT):
            sys.exit("self-test: a short function was reported")
        open(os.path.join(scratch, "sim", "a.cc"), "a").write(long)
        found = check(scratch, LIMIT)
        if long_files(scratch):
            sys.exit("self-test: a short file was reported")
        open(os.path.join(scratch, "sim", "b.h"), "w").write("int x;\n" * (FILE_LIMIT + 1))
        too_long = long_files(scratch)
    if len(found) != 1 or found[0][2] != 72:
        sys.exit("self-test: the 72-line constructor was not reported alone: %s" % found)
    if too_long != [("sim/b.h", FILE_LIMIT + 1)]:
        sys.exit("self-test: the %d-line file was not reported alone: %s" % (FILE_LIMIT + 1, too_long))
    print("self-test: a 72-line function is caught: sim/a.cc:%d" % found[0][1])
    print("self-test: a %d-line file is caught: sim/b.h" % too_long[0][1])


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    limit = int(sys.argv[sys.argv.index("--limit") + 1]) if "--limit" in sys.argv else LIMIT
    if "--self-test" in sys.argv:
        self_test()
        return
    problems = check(root, limit)
    if problems:
        print("functions over %d lines (split them: one job each):" % limit)
        for path, line, length in problems:
            print("  %s:%d: %d lines" % (path, line, length))
    files = long_files(root)
    if files:
        print("files over %d lines (split them: one concept each):" % FILE_LIMIT)
        for path, lines in files:
            print("  %s: %d lines" % (path, lines))
    if problems or files:
        sys.exit(1)
    print("no function outside tests/ is over %d lines, no file over %d lines" % (limit, FILE_LIMIT))


if __name__ == "__main__":
    main()
