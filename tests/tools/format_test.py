"""tests/tools/check_format.sh: the tree is formatted as .clang-format says,
and the check names a file that is not."""

import os
import shutil
import subprocess
import tempfile
import unittest

ROOT = os.environ.get("ADAPTERD_SOURCE_DIR",
                      os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SCRIPT = os.path.join(ROOT, "tests", "tools", "check_format.sh")


def run(root):
    return subprocess.run(["bash", SCRIPT, root], capture_output=True, text=True, timeout=300)


class FormatTest(unittest.TestCase):
    def test_the_tree_is_formatted(self):
        r = run(ROOT)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("formatted as .clang-format says", r.stdout)

    def test_a_misformatted_file_is_named(self):
        with tempfile.TemporaryDirectory(prefix="adapterd_format_") as tmp:
            shutil.copy(os.path.join(ROOT, ".clang-format"), tmp)
            shutil.copytree(os.path.join(ROOT, "common"), os.path.join(tmp, "common"))
            shutil.copytree(os.path.join(ROOT, "storage"), os.path.join(tmp, "storage"))
            for d in ("bench", "client", "proto", "server", "tests", "tools"):
                os.makedirs(os.path.join(tmp, d))
            # 101 well-formatted files so the check runs; then one that is not.
            for i in range(101):
                with open(os.path.join(tmp, "tools", f"ok{i}.h"), "w") as f:
                    f.write(f"int ok{i}();\n")
            self.assertEqual(run(tmp).returncode, 0)
            with open(os.path.join(tmp, "server", "bad.cc"), "w") as f:
                f.write("int  main( ){return 0;}\n")
            r = run(tmp)
            self.assertEqual(r.returncode, 1)
            self.assertIn("server/bad.cc", r.stderr)


if __name__ == "__main__":
    unittest.main()
