"""The command line every layout check shares: SOURCE_ROOT [--self-test].

run(check, self_test, failed, passed) runs `self_test(root)` with --self-test;
otherwise `check(root)` -> (problems, files): prints `failed % len(problems)`
and each problem and exits 1, or prints `passed % files`.
"""
import sys


def run(check, self_test, failed, passed):
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    if "--self-test" in sys.argv:
        self_test(root)
        return
    problems, files = check(root)
    if problems:
        print(failed % len(problems))
        for p in problems:
            print("  " + p)
        sys.exit(1)
    print(passed % files)
