#!/usr/bin/python3
"""Config choices are types: parsed once by the config reader, compared as enums.

A run config's enumerated values (cluster.layout, input.source, a feature's kind,
train.crs, ...) are enum classes with one spelling table (run/config_choices.h,
base/spellings.h). So no source file checks a string against a list of allowed
spellings with RequireOneOf, and outside run/ (the config reader and the helpers
beside it) and tests/ no code compares a field reached through a run-config
section (`config.input.source`, `cfg.cluster.layout`, `input.tfrecord.compression`)
with a string literal: it compares enum values or switches on them. String
compares of other things (command-line flags, file suffixes, names) are not
config choices and pass. Exits 1 naming every offending line.

Usage: config_choices_test.py SOURCE_ROOT [--self-test]
--self-test plants a RequireOneOf and a string compare of a config choice in a
scratch tree and checks that the test fails on each and passes without them.
"""
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import layout_check  # noqa: E402
from include_graph_test import source_files  # noqa: E402

# The sections of a run config (run/run_config.h RunConfig) and the sub-structs
# reached through them; a member chain through one of them ending in == "..." or
# != "..." compares a config choice as a string.
SECTIONS = r"(?:input|infeed|cluster|train|model|device|checkpoint|embedding|faults|target_host|tfrecord)"
CHOICE_COMPARE = re.compile(r"\b" + SECTIONS + r"\.(?:\w+\.)*\w+(?:\(\))?\s*[!=]=\s*\"")
REQUIRE_ONE_OF = re.compile(r"\bRequireOneOf\s*\(")


def strip_comment(line):
    return line.split("//", 1)[0]


def check(root):
    problems, files = [], 0
    for path in sorted(source_files(root)):
        files += 1
        reader = path.startswith(("run/", "tests/"))
        for n, line in enumerate(open(os.path.join(root, path), encoding="utf-8", errors="replace"), 1):
            code = strip_comment(line)
            if REQUIRE_ONE_OF.search(code):
                problems.append("%s:%d: RequireOneOf on strings; parse the choice with its "
                                "spelling table (base/spellings.h, run/config_choices.h)" % (path, n))
            if not reader and CHOICE_COMPARE.search(code):
                problems.append("%s:%d: compares a config choice with a string; compare its enum "
                                "(run/config_choices.h)" % (path, n))
    return problems, files


def self_test():
    scratch = tempfile.mkdtemp(prefix="config-choices-")
    try:
        for room in ("report", "run", "app"):
            os.makedirs(os.path.join(scratch, room))
        write = lambda rel, text, mode="w": open(os.path.join(scratch, rel), mode).write(text)
        write("run/run_config.cc", 'if (in.source == "files") return;  // the reader may\n')
        write("report/a.cc", "if (config.input.source == run::InputSource::kFiles) return;\n"
                             '// config.input.source == "files" in a comment is fine\n')
        write("app/flags.cc", 'if (options.ring_rule != "current") Fail("flag");\n'
                              'if (std::string_view(argv[i]) != "--") continue;\n')
        clean, _ = check(scratch)
        write("report/a.cc", 'if (c.config.input.source != "files") return;\n', "a")
        write("app/flags.cc", 'if (cfg.cluster.layout == "packed") return;\n', "a")
        write("run/b.cc", 'RequireOneOf(node, "crs", t.crs, {"ring", "mpi"});\n')
        dirty, _ = check(scratch)
    finally:
        shutil.rmtree(scratch)
    if clean:
        sys.exit("self-test: a tree of typed choices failed: %s" % clean)
    expected = ("report/a.cc:3:", "app/flags.cc:3:", "run/b.cc:1:")
    missed = [e for e in expected if not any(p.startswith(e) for p in dirty)]
    if missed or len(dirty) != len(expected):
        sys.exit("self-test: expected exactly %s, got %s" % (expected, dirty))
    print("self-test: string compares of config choices and RequireOneOf are caught:")
    for p in dirty:
        print("  " + p)


def main():
    layout_check.run(check, lambda root: self_test(), 'config choices: %d string checks of config choices:',
                     'config choices: %d files; no RequireOneOf, no string compare of a config choice outside run/')


if __name__ == "__main__":
    main()
