#!/usr/bin/env python3
"""Runs clang's thread-safety analysis over adapterd's product code.

The product's locks carry Abseil's annotations (ABSL_GUARDED_BY,
ABSL_EXCLUSIVE_LOCKS_REQUIRED, ABSL_LOCKS_EXCLUDED, ...); GCC, which builds
the product, ignores them. This compiles every product translation unit that
can meet an annotation (it uses absl::Mutex or an annotated header, through
any chain of the project's own includes) with clang++ -fsyntax-only
-Wthread-safety -Werror=thread-safety, taking each one's flags from a build's
compile_commands.json (less GCC's precompiled header). Prints each finding and
exits 1 when there is any; prints a summary and exits 0 otherwise.

    tools/check_thread_safety.py --build BUILD_DIR [--root DIR] [--jobs N]

tests/tools/thread_safety_test.py runs it over the tree (ctest:
thread_safety_test) and checks that it reports a planted violation.
"""

import argparse
import concurrent.futures
import json
import os
import re
import shlex
import subprocess
import sys

# Product code: what ships or is built from the tree, not tests.
PRODUCT_DIRS = ("common/", "storage/", "server/", "client/", "tools/", "bench/")
# A file that mentions one of these can hold a thread-safety finding.
LOCKS = re.compile(r"ABSL_(PT_)?GUARDED_BY|ABSL_[A-Z_]*LOCKS?_[A-Z_]*|absl/synchronization/mutex\.h")
LOCAL_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
ANALYSIS = ["-fsyntax-only", "-Wthread-safety", "-Werror=thread-safety", "-Wno-unknown-warning-option"]
# Units clang cannot compile at all, each with why. Listed, so that a new one
# fails the check until someone decides, and a listed one that starts to
# compile fails it too (the list only shrinks).
UNPARSEABLE = {
    "server/serving/inference_engine.cc":
        "includes ATen/ATen.h, which Debian's clang 14 (and 16) cannot parse in C++20 mode against libstdc++ 12: "
        "ATen/core/List.h moves a std::vector of c10::IValue while IValue is incomplete, and libstdc++'s C++20 "
        "constexpr vector instantiates its destructor there",
}
THREAD_SAFETY = re.compile(r"\[-Werror,-Wthread-safety")


def uses_locks(root, path, seen):
    """Whether `path` or a project header it includes (transitively) mentions locks."""
    if path in seen:
        return False
    seen.add(path)
    full = os.path.join(root, path)
    if not os.path.isfile(full):
        return False  # generated (proto) or third-party
    with open(full, encoding="utf-8", errors="replace") as f:
        text = f.read()
    if LOCKS.search(text):
        return True
    return any(uses_locks(root, inc, seen) for inc in LOCAL_INCLUDE.findall(text))


def clang_command(entry, clang):
    """The compile command of `entry`, as clang++ running only the analysis.

    GCC's precompiled header is left out (clang cannot read GCC's .gch, and
    its text, LibTorch's ATen.h, does not parse under clang in C++20 mode):
    every source includes what it uses.
    """
    args = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
    out = [clang]
    rest = iter(args[1:])
    for a in rest:
        if a in ("-o", "-include"):
            next(rest, None)
        elif a not in ("-c", "-Werror", "-Winvalid-pch"):
            out.append(a)
    return out + ANALYSIS


def analyse(command, directory):
    r = subprocess.run(command, cwd=directory, capture_output=True, text=True)
    return r.returncode, r.stderr


def units(root, build):
    """The product translation units to analyse, with their compile commands."""
    with open(os.path.join(build, "compile_commands.json"), encoding="utf-8") as f:
        entries = json.load(f)
    picked, skipped = [], 0
    for e in entries:
        path = os.path.relpath(os.path.realpath(e["file"]), os.path.realpath(root))
        if not path.startswith(PRODUCT_DIRS) or path.endswith(".pb.cc"):
            continue
        if uses_locks(root, path, set()):
            picked.append((path, e))
        else:
            skipped += 1
    return sorted(picked, key=lambda p: p[0]), skipped


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    parser.add_argument("--build", required=True, help="a build directory with compile_commands.json")
    parser.add_argument("--clang", default="clang++")
    parser.add_argument("--jobs", type=int, default=max(1, min(2, os.cpu_count() or 1)))
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    try:
        picked, skipped = units(root, os.path.abspath(args.build))
    except (OSError, ValueError) as e:
        print(f"check_thread_safety: {e}", file=sys.stderr)
        return 2
    failed, unparsed = [], []
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(analyse, clang_command(e, args.clang), e["directory"]): path for path, e in picked}
        for future in concurrent.futures.as_completed(futures):
            path = futures[future]
            code, err = future.result()
            if code != 0 and path in UNPARSEABLE and not THREAD_SAFETY.search(err):
                unparsed.append(path)
            elif code != 0:
                failed.append(path)
                print(err, end="")
                if not THREAD_SAFETY.search(err):
                    print(f"check_thread_safety: {path} does not compile under clang (above): fix it, or list it "
                          "in UNPARSEABLE with the reason", file=sys.stderr)
            elif path in UNPARSEABLE:
                failed.append(path)
                print(f"check_thread_safety: {path} compiles under clang now: remove it from UNPARSEABLE",
                      file=sys.stderr)
    if failed:
        print(f"check_thread_safety: findings in {len(failed)} of {len(picked)} files: {' '.join(sorted(failed))}",
              file=sys.stderr)
        return 1
    print(f"check_thread_safety: {len(picked) - len(unparsed)} files that use locks, no findings "
          f"({skipped} product files without locks not compiled; not parseable by clang: "
          f"{', '.join(sorted(unparsed)) or 'none'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
