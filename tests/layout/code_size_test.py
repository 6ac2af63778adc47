#!/usr/bin/env python3
"""Fails when a C++ file under services/ or common/ is over 600 lines, or a function
defined in one is over 80: past those sizes a file usually does two jobs and a function
hides several steps, which is what made the hot path hard to follow.

A function is what clang-format (Google style) leaves at column 0 as `...{` through the
next `}` at column 0: free functions and out-of-line methods. `--selftest` checks the
checker on a file it writes, so that a checker that sees nothing cannot pass.
"""
import os
import sys
import tempfile

MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80
NOT_FUNCTIONS = ("namespace", "class ", "struct ", "enum ", "union ", "extern ", "#", "//", "}", " ", "\t")


def functions(lines):
    """(first line number, length, text) of each column-0 definition."""
    i = 0
    while i < len(lines):
        line = lines[i]
        head = line.split("(")[0]
        if line.endswith("{") and not line.startswith(NOT_FUNCTIONS) and "=" not in head:
            end = i + 1
            while end < len(lines) and lines[end] != "}":
                end += 1
            yield i + 1, end - i + 1, line
            i = end
        i += 1


def check(root):
    problems = []
    for top in ("services", "common"):
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if not name.endswith((".cc", ".h")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                with open(path, encoding="utf-8", errors="replace") as f:
                    lines = f.read().split("\n")
                if len(lines) - 1 > MAX_FILE_LINES:
                    problems.append(f"{rel}: {len(lines) - 1} lines (at most {MAX_FILE_LINES}): split it by job")
                for first, length, text in functions(lines):
                    if length > MAX_FUNCTION_LINES:
                        problems.append(f"{rel}:{first}: a function of {length} lines (at most "
                                        f"{MAX_FUNCTION_LINES}): {text.strip()[:70]}")
    return problems


def selftest():
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "common"))
        body = "".join(f"  x += {i};\n" for i in range(79))
        with open(os.path.join(root, "common", "long.cc"), "w") as f:
            f.write("namespace a {\nint Short() {\n  return 1;\n}\n\nint Long(int x) {\n" + body + "  return x;\n}\n}\n")
        found = check(root)
        if len(found) != 1 or "common/long.cc:6: a function of 82 lines" not in found[0]:
            print("code size selftest: expected one finding for Long, got:", found)
            return 1
        with open(os.path.join(root, "common", "big.h"), "w") as f:
            f.write("// x\n" * (MAX_FILE_LINES + 1))
        if not any("common/big.h: 601 lines" in p for p in check(root)):
            print("code size selftest: a 601-line header was not found")
            return 1
    print("code size selftest: both oversize cases found")
    return 0


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--selftest":
        return selftest()
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    problems = check(root)
    for p in problems:
        print(p)
    if problems:
        print(f"code size: {len(problems)} problem(s) above")
        return 1
    print(f"code size: every file under services/ and common/ within {MAX_FILE_LINES} lines, "
          f"every function within {MAX_FUNCTION_LINES}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
