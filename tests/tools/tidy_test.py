"""tests/tools/check_tidy.sh: the libraries it covers have no clang-tidy
findings under .clang-tidy, and the profile still reports a known bug."""

import os
import shutil
import subprocess
import tempfile
import unittest

ROOT = os.environ.get("ADAPTERD_SOURCE_DIR",
                      os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILD = os.environ.get("ADAPTERD_BINARY_DIR", "")


class TidyTest(unittest.TestCase):
    def test_the_checked_libraries_have_no_findings(self):
        self.assertTrue(BUILD, "run through ctest (ADAPTERD_BINARY_DIR)")
        r = subprocess.run(["bash", os.path.join(ROOT, "tests", "tools", "check_tidy.sh"), ROOT, BUILD],
                           capture_output=True, text=True, timeout=900)
        self.assertEqual(r.returncode, 0, r.stdout[-4000:] + r.stderr[-2000:])
        self.assertIn("no findings", r.stdout)

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


if __name__ == "__main__":
    unittest.main()
