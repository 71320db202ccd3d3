#!/usr/bin/env python3
"""Runs clang-tidy with the project's profile (.clang-tidy) over every product
translation unit and the project's own headers.

The units are every .cc under common/, storage/, server/, client/ and tools/
(not tests/, bench/ or examples/), found on disk, each with its flags from a
build's compile_commands.json; a source the build does not compile fails the
check (it would not be covered) unless NOT_BUILT says why and whose flags
check it instead. Findings in the project's headers under those directories
are reported too (--header-filter, anchored at the source root: clang-tidy
matches it against the header's path as the compiler opened it, absolute
here). The profile makes every warning an error: any finding, in a source or
a header, fails the check, and each is printed once.

GCC's precompiled header is left out of each command (clang cannot read GCC's
.gch; every source includes what it uses). Debian's clang 14 cannot parse
LibTorch's ATen/core/List.h in C++20 mode (ListImpl's constructor and
ptr_to_first_element use std::vector<IValue> while IValue is incomplete, and
libstdc++ 12's constexpr vector makes clang instantiate it there); the check
puts a copy of that header, with those two definitions reduced to
declarations, first on the system include path. It is only read, never
linked, and lives in a temporary directory.

    tools/check_tidy.py --build BUILD_DIR [--root DIR] [--jobs N] [--times] [--skip-libtorch]
                        [--only SOURCE...]

--only checks the units named (the LibTorch units a change touched, before
committing it: the whole check is too slow to run on every change).
--skip-libtorch leaves out the units compiled against LibTorch (their flags
name its headers): 41 of 95 units, but 590 of the 884 CPU-seconds the whole
check takes here (docs/PERFORMANCE.md, "CI time"), because each parses ATen.
ctest's tidy_test runs with it, to keep CI within its budget; the product
headers those units share with the rest are still checked through the rest,
and the whole check is the pre-commit command for a change to a LibTorch
unit.

tests/tools/tidy_test.py runs it (ctest: tidy_test) and checks that it
reports planted findings in a source and in a header.
"""

import argparse
import concurrent.futures
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

# Product code: what ships, not tests, benchmarks or examples.
PRODUCT_DIRS = ("common", "storage", "server", "client", "tools")
# Product sources the main build does not compile, each with the unit whose
# flags check it instead and why.
NOT_BUILT = {
    "server/model/asan_tensor_pool.cc": (
        "server/model/adapter_set.cc",
        "built only with ADAPTERD_SANITIZE=address (server/model/CMakeLists.txt); its library's flags"),
}
LIST_H = "ATen/core/List.h"
# The two definitions in LibTorch's List.h that clang 14 cannot compile in
# C++20 mode, and the declarations that replace them (module doc).
LIST_H_PATCHES = (
    ("  explicit ListImpl(list_type list_, TypePtr elementType_)\n"
     "  : list(std::move(list_))\n"
     "  , elementType(std::move(elementType_)) {}\n",
     "  explicit ListImpl(list_type list_, TypePtr elementType_);\n"),
    ("inline const IValue* ptr_to_first_element(const GenericList& list) {\n"
     "  return &list.impl_->list[0];\n"
     "}\n",
     "const IValue* ptr_to_first_element(const GenericList& list);\n"),
)
FINDING = re.compile(r"^(/[^:\n]+):(\d+):(\d+): (?:warning|error): .*\[([\w.,-]+)\]$", re.M)


def product_sources(root):
    """Every product .cc under root, relative, sorted."""
    found = []
    for top in PRODUCT_DIRS:
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            found += [os.path.relpath(os.path.join(dirpath, n), root) for n in names if n.endswith(".cc")]
    return sorted(found)


def strip_pch(args):
    """A compile command without GCC's precompiled header."""
    out, rest = [], iter(args)
    for a in rest:
        if a == "-include":
            header = next(rest, "")
            if not header.endswith("cmake_pch.hxx"):
                out += [a, header]
        elif a != "-Winvalid-pch":
            out.append(a)
    return out


def units(root, build):
    """(path, compile command entry) for every product source, and the product
    sources that have no entry (not covered)."""
    with open(os.path.join(build, "compile_commands.json"), encoding="utf-8") as f:
        entries = json.load(f)
    real_root = os.path.realpath(root)
    by_path = {}
    for e in entries:
        full = os.path.realpath(os.path.join(e["directory"], e["file"]))
        by_path[os.path.relpath(full, real_root)] = e
    picked, missing = [], []
    for path in product_sources(root):
        if path in by_path:
            picked.append((path, by_path[path]))
        elif path in NOT_BUILT and NOT_BUILT[path][0] in by_path:
            donor = by_path[NOT_BUILT[path][0]]
            args = shlex.split(donor["command"]) if "command" in donor else list(donor["arguments"])
            donor_file = donor["file"]
            full = os.path.join(real_root, path)
            args = [full if a == donor_file else a for a in args]
            picked.append((path, {"directory": donor["directory"], "file": full, "arguments": args}))
        else:
            missing.append(path)
    return picked, missing


def uses_libtorch(entry):
    """Whether a compile command compiles against LibTorch (names its headers)."""
    args = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
    return any("/torch/" in a or a.endswith("/torch") for a in args)


def list_h_overlay(tmp):
    """A directory holding the patched copy of LibTorch's List.h, or None
    when LibTorch's headers are not installed."""
    for d in ("/usr/include", "/usr/local/include"):
        original = os.path.join(d, LIST_H)
        if os.path.isfile(original):
            break
    else:
        return None
    with open(original, encoding="utf-8") as f:
        text = f.read()
    for old, new in LIST_H_PATCHES:
        if old not in text:
            raise RuntimeError(f"{original} changed: LIST_H_PATCHES in tools/check_tidy.py no longer apply "
                               "(does clang parse it as it is now? then drop them)")
        text = text.replace(old, new)
    overlay = os.path.join(tmp, "overlay")
    os.makedirs(os.path.join(overlay, os.path.dirname(LIST_H)))
    with open(os.path.join(overlay, LIST_H), "w", encoding="utf-8") as f:
        f.write(text)
    return overlay


def tidy(clang_tidy, db_dir, header_filter, full):
    """Runs clang-tidy on one unit: (exit status, its findings' text, CPU seconds, wall seconds)."""
    start = time.monotonic()
    with tempfile.TemporaryFile(mode="w+") as out:
        p = subprocess.Popen([clang_tidy, "-p", db_dir, "--quiet", f"--header-filter={header_filter}", full],
                             stdout=out, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read()
    return p.returncode, text, usage.ru_utime + usage.ru_stime, time.monotonic() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    parser.add_argument("--build", required=True, help="a build directory with compile_commands.json")
    parser.add_argument("--clang-tidy", default="clang-tidy")
    parser.add_argument("--jobs", type=int, default=max(1, min(2, os.cpu_count() or 1)))
    parser.add_argument("--times", action="store_true", help="print each unit's CPU time, slowest first")
    parser.add_argument("--skip-libtorch", action="store_true",
                        help="leave out the units compiled against LibTorch (see above)")
    parser.add_argument("--only", nargs="+", metavar="SOURCE",
                        help="check only these units (paths from the source root; their headers too): the "
                             "by-hand check of the LibTorch units a change touched")
    args = parser.parse_args()
    root = os.path.realpath(args.root)
    try:
        picked, missing = units(root, os.path.abspath(args.build))
    except (OSError, ValueError) as e:
        print(f"check_tidy: {e}", file=sys.stderr)
        return 2
    if missing:
        print(f"check_tidy: product sources not in {args.build}/compile_commands.json, so not covered: "
              f"{' '.join(missing)} (build them, or list them in NOT_BUILT with the unit whose flags check "
              "them)", file=sys.stderr)
        return 1
    if args.only:
        unknown = sorted(set(args.only) - {path for path, _ in picked})
        if unknown:
            print(f"check_tidy: not product units: {' '.join(unknown)}", file=sys.stderr)
            return 2
        picked = [(path, e) for path, e in picked if path in set(args.only)]
    skipped = []
    if args.skip_libtorch:
        skipped = [path for path, e in picked if uses_libtorch(e)]
        picked = [(path, e) for path, e in picked if path not in skipped]
    header_filter = "^" + re.escape(root) + "/(" + "|".join(PRODUCT_DIRS) + ")/"
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="adapterd_tidy_") as tmp:
        try:
            overlay = list_h_overlay(tmp)
        except RuntimeError as e:
            print(f"check_tidy: {e}", file=sys.stderr)
            return 2
        db = []
        for path, e in picked:
            cmd = shlex.split(e["command"]) if "command" in e else list(e["arguments"])
            cmd = strip_pch(cmd)
            if overlay:
                cmd[1:1] = ["-isystem", overlay]
            db.append({"directory": e["directory"], "file": os.path.join(root, path), "arguments": cmd})
        with open(os.path.join(tmp, "compile_commands.json"), "w", encoding="utf-8") as f:
            json.dump(db, f)
        failed, findings, times = [], {}, []
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = {pool.submit(tidy, args.clang_tidy, tmp, header_filter, os.path.join(root, path)): path
                       for path, _ in picked}
            for future in concurrent.futures.as_completed(futures):
                path = futures[future]
                code, text, cpu, wall = future.result()
                times.append((cpu, wall, path))
                if code == 0:
                    continue
                failed.append(path)
                # A header's finding shows in every unit that includes it: print it once.
                blocks = re.split(r"(?m)^(?=/[^:\n]+:\d+:\d+: (?:warning|error): )", text)
                new = [b for b in blocks if FINDING.match(b) and FINDING.match(b).group(0) not in findings]
                for b in new:
                    findings[FINDING.match(b).group(0)] = path
                print("".join(new) if new or FINDING.search(text) else text, end="")
    wall = time.monotonic() - start
    if args.times:
        for cpu, w, path in sorted(times, reverse=True):
            print(f"check_tidy: {cpu:7.1f} s CPU {w:7.1f} s wall  {path}")
        print(f"check_tidy: {len(times)} units, {sum(t[0] for t in times):.0f} s CPU, {wall:.0f} s wall "
              f"at --jobs {args.jobs}")
    if failed:
        checks = sorted({c for m in findings for c in FINDING.match(m).group(4).split(",")
                         if c != "-warnings-as-errors"})
        print(f"check_tidy: {len(findings)} findings ({', '.join(checks)}) in {len(failed)} of {len(picked)} "
              f"units: {' '.join(sorted(failed))}", file=sys.stderr)
        return 1
    left_out = f"; {len(skipped)} LibTorch units left out (--skip-libtorch)" if skipped else ""
    print(f"check_tidy: {len(picked)} product units and their headers, no findings ({wall:.0f} s){left_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
