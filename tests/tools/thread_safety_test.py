"""tools/check_thread_safety.py: the product's lock annotations hold under
clang's thread-safety analysis, and the check reports a planted violation."""

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.environ.get("ADAPTERD_SOURCE_DIR",
                      os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILD = os.environ.get("ADAPTERD_BINARY_DIR", "")
CHECKER = os.path.join(ROOT, "tools", "check_thread_safety.py")
_spec = importlib.util.spec_from_file_location("check_thread_safety", CHECKER)
check_thread_safety = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_thread_safety)

# A guarded member read without its lock.
PLANTED = """#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

class Counter {
 public:
  int Get() const { return n_; }
  void Bump() {
    absl::MutexLock lock(&mu_);
    ++n_;
  }

 private:
  mutable absl::Mutex mu_;
  int n_ ABSL_GUARDED_BY(mu_) = 0;
};

int Use() {
  Counter c;
  c.Bump();
  return c.Get();
}
"""


class ThreadSafetyTest(unittest.TestCase):
    def test_the_product_has_no_findings(self):
        self.assertTrue(BUILD, "run through ctest (ADAPTERD_BINARY_DIR)")
        r = subprocess.run([sys.executable, CHECKER, "--root", ROOT, "--build", BUILD], capture_output=True,
                           text=True, timeout=1200)
        self.assertEqual(r.returncode, 0, r.stdout[-6000:] + r.stderr[-6000:])
        self.assertIn("no findings", r.stdout)

    def test_every_annotated_library_is_among_the_files_checked(self):
        self.assertTrue(BUILD, "run through ctest (ADAPTERD_BINARY_DIR)")
        picked, _ = check_thread_safety.units(ROOT, BUILD)
        paths = {p for p, _ in picked}
        for must in ("server/serving/dynamic_batcher.cc", "server/training/job_manager.cc", "storage/database.cc",
                     "server/http/http_gateway.cc", "common/usage_ledger.cc"):
            self.assertIn(must, paths)

    def test_a_guarded_member_read_without_its_lock_is_reported(self):
        with tempfile.TemporaryDirectory(prefix="adapterd_tsa_") as tmp:
            os.makedirs(os.path.join(tmp, "server"))
            src = os.path.join(tmp, "server", "counter.cc")
            with open(src, "w", encoding="utf-8") as f:
                f.write(PLANTED)
            build = os.path.join(tmp, "build")
            os.makedirs(build)
            with open(os.path.join(build, "compile_commands.json"), "w", encoding="utf-8") as f:
                json.dump([{"directory": build, "file": src,
                            "command": f"/usr/bin/c++ -std=c++20 -Werror -o counter.o -c {src}"}], f)
            r = subprocess.run([sys.executable, CHECKER, "--root", tmp, "--build", build], capture_output=True,
                               text=True, timeout=300)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn("requires holding mutex 'mu_'", r.stdout + r.stderr)
            self.assertIn("server/counter.cc", r.stderr)


if __name__ == "__main__":
    unittest.main()
