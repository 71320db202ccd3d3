"""tests/python_client/lint.sh: mypy and flake8 find nothing in the Python
client and its tests, and do report a planted unused import and type error;
no module of the package is named like a standard-library module."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.environ.get("ADAPTERD_SOURCE_DIR",
                      os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SCRIPT = os.path.join(ROOT, "tests", "python_client", "lint.sh")
PACKAGE = os.path.join(ROOT, "client", "python", "adapterd")


def run(root):
    return subprocess.run(["bash", SCRIPT, root], capture_output=True, text=True, timeout=120)


class PythonLintTest(unittest.TestCase):
    def test_the_client_and_its_tests_are_clean(self):
        r = run(ROOT)
        self.assertEqual(r.returncode, 0, r.stdout[-6000:] + r.stderr[-2000:])
        self.assertIn("mypy and flake8 report nothing", r.stdout)

    def test_an_unused_import_and_a_type_error_are_reported(self):
        with tempfile.TemporaryDirectory(prefix="adapterd_lint_") as tmp:
            shutil.copytree(os.path.join(ROOT, "client", "python"), os.path.join(tmp, "client", "python"),
                            ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", "v1", "proto"))
            for d in ("python_client", "testing"):
                shutil.copytree(os.path.join(ROOT, "tests", d), os.path.join(tmp, "tests", d),
                                ignore=shutil.ignore_patterns("__pycache__"))
            with open(os.path.join(tmp, "client", "python", "adapterd", "_routing.py"), "a") as f:
                f.write("\n\nimport json\n\n\ndef _planted() -> int:\n    return \"not an int\"\n")
            r = run(tmp)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertRegex(r.stdout, r"adapterd/_routing\.py:\d+:1: F401 'json' imported but unused")
            self.assertRegex(r.stdout, r"adapterd/_routing\.py:\d+: error: Incompatible return value type .*"
                                       r"\[return-value\]")

    def test_no_module_of_the_package_is_named_like_a_standard_library_module(self):
        # Run as a script (`python3 adapterd/_codegen.py`), Python puts adapterd/ first on sys.path,
        # where such a module would shadow the standard library's.
        if sys.version_info < (3, 10):
            self.skipTest("sys.stdlib_module_names is Python 3.10's")
        names = sorted(n[:-3] for n in os.listdir(PACKAGE) if n.endswith(".py"))
        self.assertIn("client", names)
        self.assertEqual([n for n in names if n in sys.stdlib_module_names], [])


if __name__ == "__main__":
    unittest.main()
