#!/usr/bin/env python3
"""Checks adapterd's include graph against its layering rules.

The rules are the fenced ```layering block of docs/ARCHITECTURE.md
("Modules and dependencies"): one line per module,

    <module>  <path prefix>[,<path prefix>...]  [<module it may include> ...]

A file belongs to the module with the longest prefix that matches its path
("common/api_util" beats "common/"). A module may include its own files and
those of the modules it lists, and of the modules those list, and so on: the
graph must be acyclic, so "depends on" always points one way. `#include "x"`
and `#include <x>` lines in C++ sources and headers, and `import "x"` lines in
.proto files, are checked; system and third-party headers (no module's prefix
matches them) are not.

    tools/check_layering.py [--root DIR]

Prints one line per broken rule (file:line: what) and exits 1 when there is
any; exits 0 and prints a summary otherwise. tests/tools/layering_test.py runs
it over the tree (ctest: layering_test).
"""

import argparse
import os
import re
import sys

SOURCE_SUFFIXES = (".h", ".cc", ".proto")
SKIP_DIRS = {"models", "node_modules", "docs", "deploy", "docker", "examples", "scripts"}
INCLUDE = re.compile(r'^\s*#\s*include\s+(?:"([^"]+)"|<([^>]+)>)|^\s*import\s+"([^"]+)"\s*;')


class Rules:
    """The parsed ```layering block."""

    def __init__(self, text):
        self.prefixes = {}  # prefix -> module
        self.deps = {}  # module -> set of modules listed
        block = re.search(r"^```layering\n(.*?)^```", text, re.M | re.S)
        if not block:
            raise ValueError("no ```layering block")
        for number, line in enumerate(block.group(1).splitlines(), 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            fields = line.split()
            if len(fields) < 2:
                raise ValueError(f"layering line {number}: want '<module> <prefixes> [<deps>...]'")
            module, prefixes, deps = fields[0], fields[1].split(","), fields[2:]
            if module in self.deps:
                raise ValueError(f"layering line {number}: module {module} defined twice")
            self.deps[module] = set(deps)
            for prefix in prefixes:
                if prefix in self.prefixes:
                    raise ValueError(f"layering line {number}: prefix {prefix} already belongs to "
                                     f"{self.prefixes[prefix]}")
                self.prefixes[prefix] = module
        for module, deps in self.deps.items():
            for dep in deps:
                if dep not in self.deps:
                    raise ValueError(f"module {module} lists unknown module {dep}")

    def module_of(self, path):
        best = None
        for prefix, module in self.prefixes.items():
            if path.startswith(prefix) and (best is None or len(prefix) > len(best[0])):
                best = (prefix, module)
        return best[1] if best else None

    def cycle(self):
        """A dependency cycle as a list of modules, or None."""
        state = {}

        def visit(module, stack):
            state[module] = "open"
            stack.append(module)
            for dep in sorted(self.deps[module]):
                if state.get(dep) == "open":
                    return stack[stack.index(dep):] + [dep]
                if dep not in state:
                    found = visit(dep, stack)
                    if found:
                        return found
            stack.pop()
            state[module] = "done"
            return None

        for module in sorted(self.deps):
            if module not in state:
                found = visit(module, [])
                if found:
                    return found
        return None

    def allowed(self, module):
        """Every module `module` may include (itself, what it lists, transitively)."""
        seen, todo = {module}, [module]
        while todo:
            for dep in self.deps[todo.pop()]:
                if dep not in seen:
                    seen.add(dep)
                    todo.append(dep)
        return seen


def source_files(root):
    for directory, dirs, files in os.walk(root):
        rel_dir = os.path.relpath(directory, root)
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "build"))
                         and not (rel_dir == "." and d in SKIP_DIRS))
        for name in sorted(files):
            if name.endswith(SOURCE_SUFFIXES):
                yield os.path.normpath(os.path.join(rel_dir, name))


def check(root):
    """(problems, summary): problems as 'path:line: message' strings."""
    with open(os.path.join(root, "docs", "ARCHITECTURE.md"), encoding="utf-8") as f:
        rules = Rules(f.read())
    problems = []
    cycle = rules.cycle()
    if cycle:
        problems.append("docs/ARCHITECTURE.md: the layering rules have a cycle: " + " -> ".join(cycle))
        return problems, ""
    files = edges = 0
    for path in source_files(root):
        module = rules.module_of(path)
        if module is None:
            problems.append(f"{path}:1: belongs to no module of the layering rules (add it to "
                            "docs/ARCHITECTURE.md's layering block)")
            continue
        files += 1
        allowed = rules.allowed(module)
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                match = INCLUDE.match(line)
                if not match:
                    continue
                target = match.group(1) or match.group(2) or match.group(3)
                other = rules.module_of(target)
                if other is None or other == module:
                    continue
                edges += 1
                if other not in allowed:
                    problems.append(f"{path}:{number}: {module} includes {target} of {other}, which "
                                    f"{module} may not depend on")
    summary = (f"layering: {files} files in {len(rules.deps)} modules, {edges} includes across "
               "modules, all allowed")
    return problems, summary


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    args = parser.parse_args()
    try:
        problems, summary = check(os.path.abspath(args.root))
    except (OSError, ValueError) as e:
        print(f"check_layering: {e}", file=sys.stderr)
        return 2
    for p in problems:
        print(p)
    if problems:
        print(f"check_layering: {len(problems)} broken rule(s)", file=sys.stderr)
        return 1
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
