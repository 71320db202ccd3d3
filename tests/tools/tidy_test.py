"""tools/check_tidy.py: the product translation units (all but those compiled
against LibTorch, within CI's budget) and the project's headers have no
clang-tidy findings under .clang-tidy, every product source is covered, and
the profile and the check still report planted bugs, in a source and in a
header."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.environ.get("ADAPTERD_SOURCE_DIR",
                      os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILD = os.environ.get("ADAPTERD_BINARY_DIR", "")
CHECKER = os.path.join(ROOT, "tools", "check_tidy.py")
_spec = importlib.util.spec_from_file_location("check_tidy", CHECKER)
check_tidy = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_tidy)


class TidyTest(unittest.TestCase):
    def test_the_product_and_its_headers_have_no_findings(self):
        self.assertTrue(BUILD, "run through ctest (ADAPTERD_BINARY_DIR)")
        # CI's scope: every unit but those compiled against LibTorch (tools/check_tidy.py says why).
        r = subprocess.run([sys.executable, CHECKER, "--root", ROOT, "--build", BUILD, "--skip-libtorch"],
                           capture_output=True, text=True, timeout=1200)
        self.assertEqual(r.returncode, 0, r.stdout[-6000:] + r.stderr[-4000:])
        self.assertIn("no findings", r.stdout)

    def test_every_product_source_is_covered(self):
        self.assertTrue(BUILD, "run through ctest (ADAPTERD_BINARY_DIR)")
        picked, missing = check_tidy.units(ROOT, BUILD)
        self.assertEqual(missing, [])
        paths = {p for p, _ in picked}
        self.assertEqual(paths, set(check_tidy.product_sources(ROOT)))
        for must in ("common/utf8.cc", "server/model/bert_encoder.cc", "server/serving/inference_engine.cc",
                     "client/adapterctl.cc", "tools/pretrain/pretrainer.cc", "storage/database.cc"):
            self.assertIn(must, paths)
        self.assertFalse(any(p.startswith(("tests/", "bench/", "examples/")) for p in paths))
        # --skip-libtorch leaves out exactly the units whose flags name LibTorch's headers.
        torch = {p for p, e in picked if check_tidy.uses_libtorch(e)}
        self.assertIn("server/serving/inference_engine.cc", torch)
        self.assertNotIn("common/utf8.cc", torch)
        self.assertNotIn("server/api/tenants.cc", torch)

    def test_the_profile_reports_a_copy_in_a_loop_and_a_stray_semicolon(self):
        with tempfile.TemporaryDirectory(prefix="adapterd_tidy_") as tmp:
            shutil.copy(os.path.join(ROOT, ".clang-tidy"), tmp)
            src = os.path.join(tmp, "bad.cc")
            with open(src, "w") as f:
                f.write("#include <string>\n#include <vector>\n"
                        "int Count(const std::vector<std::string>& v, bool b) {\n"
                        "  int n = 0;\n"
                        "  for (const std::string s : v) n += static_cast<int>(s.size());\n"
                        "  if (b);\n"
                        "  return n;\n}\n")
            r = subprocess.run(["clang-tidy", "--quiet", src, "--", "-std=c++20"], capture_output=True, text=True,
                               timeout=120)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("performance-for-range-copy", r.stdout)
            self.assertIn("bugprone-suspicious-semicolon", r.stdout)

    def test_a_finding_in_a_product_header_is_reported_and_a_source_left_unbuilt_fails(self):
        # A tree laid out like the project's: a clean source that includes a
        # header with a copy in a loop, and a test's header with the same bug
        # (outside the product: not reported).
        with tempfile.TemporaryDirectory(prefix="adapterd_tidy_") as tmp:
            shutil.copy(os.path.join(ROOT, ".clang-tidy"), tmp)
            copy_in_a_loop = ("#include <string>\n#include <vector>\n"
                              "inline int {name}(const std::vector<std::string>& v) {{\n"
                              "  int n = 0;\n"
                              "  for (const std::string s : v) n += static_cast<int>(s.size());\n"
                              "  return n;\n}}\n")
            files = {
                "server/util/count.h": copy_in_a_loop.format(name="Count"),
                "tests/server/helper.h": copy_in_a_loop.format(name="Helper"),
                "server/util/count.cc": ('#include "server/util/count.h"\n#include "tests/server/helper.h"\n'
                                         "int Twice(const std::vector<std::string>& v) { return Count(v) + Helper(v); }\n"),
            }
            for path, text in files.items():
                os.makedirs(os.path.join(tmp, os.path.dirname(path)), exist_ok=True)
                with open(os.path.join(tmp, path), "w", encoding="utf-8") as f:
                    f.write(text)
            build = os.path.join(tmp, "build")
            os.makedirs(build)
            src = os.path.join(tmp, "server", "util", "count.cc")
            with open(os.path.join(build, "compile_commands.json"), "w", encoding="utf-8") as f:
                json.dump([{"directory": build, "file": src,
                            "command": f"/usr/bin/c++ -I{tmp} -std=c++20 -o count.o -c {src}"}], f)
            r = subprocess.run([sys.executable, CHECKER, "--root", tmp, "--build", build], capture_output=True,
                               text=True, timeout=300)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn("server/util/count.h:5:", r.stdout)
            self.assertIn("performance-for-range-copy", r.stdout)
            self.assertNotIn("helper.h", r.stdout)
            self.assertIn("server/util/count.cc", r.stderr)
            # --only checks the units named, and refuses a name that is not a product unit.
            r = subprocess.run([sys.executable, CHECKER, "--root", tmp, "--build", build, "--only",
                                "server/util/count.cc"], capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn("server/util/count.h:5:", r.stdout)
            r = subprocess.run([sys.executable, CHECKER, "--root", tmp, "--build", build, "--only",
                                "server/util/absent.cc"], capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertIn("not product units: server/util/absent.cc", r.stderr)

            # A product source the build does not compile is not covered: the check fails, naming it.
            with open(os.path.join(tmp, "server", "util", "orphan.cc"), "w", encoding="utf-8") as f:
                f.write("int Orphan() { return 0; }\n")
            r = subprocess.run([sys.executable, CHECKER, "--root", tmp, "--build", build], capture_output=True,
                               text=True, timeout=300)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn("not covered: server/util/orphan.cc", r.stderr)


if __name__ == "__main__":
    unittest.main()
