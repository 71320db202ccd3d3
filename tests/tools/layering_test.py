"""tools/check_layering.py: the tree keeps its layers, and the checker catches
what breaks them (docs/ARCHITECTURE.md, "The layering rules (checked)")."""

import importlib.util
import os
import shutil
import tempfile
import unittest

ROOT = os.environ.get("ADAPTERD_SOURCE_DIR",
                      os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
_spec = importlib.util.spec_from_file_location("check_layering", os.path.join(ROOT, "tools", "check_layering.py"))
check_layering = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_layering)

with open(os.path.join(ROOT, "docs", "ARCHITECTURE.md"), encoding="utf-8") as _f:
    ARCHITECTURE = _f.read()


class TreeTest(unittest.TestCase):
    def test_the_tree_keeps_its_layers(self):
        problems, summary = check_layering.check(ROOT)
        self.assertEqual(problems, [])
        self.assertIn("all allowed", summary)

    def test_the_rules_name_every_module_of_the_architecture_table(self):
        rules = check_layering.Rules(ARCHITECTURE)
        for module in ("common", "proto", "model", "storage", "training", "serving", "api", "server",
                       "client", "bench", "tests"):
            self.assertIn(module, rules.deps)
        self.assertIsNone(rules.cycle())


class SyntheticTreeTest(unittest.TestCase):
    """A small tree under the project's real rules, one file per case."""

    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="adapterd_layering_")
        self.addCleanup(shutil.rmtree, self.root)
        self.write("docs/ARCHITECTURE.md", ARCHITECTURE)

    def write(self, path, text):
        full = os.path.join(self.root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as f:
            f.write(text)

    def problems(self):
        return check_layering.check(self.root)[0]

    def test_allowed_includes_pass_directly_and_through_a_layer(self):
        self.write("server/model/tokenizer.h", '#include "common/utf8.h"\n#include <vector>\n')
        # api -> serving -> model: allowed through serving.
        self.write("server/api/backend.cc", '#include "server/model/tokenizer.h"\n#include "absl/status/status.h"\n')
        self.write("proto/adapterd/v1/records.proto", 'syntax = "proto3";\nimport "google/protobuf/empty.proto";\n')
        self.assertEqual(self.problems(), [])

    def test_a_lower_layer_including_a_higher_one_is_reported_with_file_and_line(self):
        self.write("storage/database.cc", '// storage\n#include "storage/keys.h"\n#include "server/model/bert_encoder.h"\n')
        problems = self.problems()
        self.assertEqual(len(problems), 1, problems)
        self.assertTrue(problems[0].startswith("storage/database.cc:3: storage includes server/model/bert_encoder.h"),
                        problems[0])

    def test_an_angle_bracket_include_is_checked_like_a_quoted_one(self):
        self.write("storage/database.cc", '#include <server/api/backend.h>\n#include <vector>\n')
        problems = self.problems()
        self.assertEqual(len(problems), 1, problems)
        self.assertTrue(problems[0].startswith("storage/database.cc:1: storage includes server/api/backend.h"),
                        problems[0])

    def test_bench_including_test_code_is_reported(self):
        self.write("bench/soak.cc", '#include "tests/e2e/e2e_util.h"\n')
        self.assertEqual(len(self.problems()), 1)

    def test_pretrain_including_the_job_trainer_is_reported(self):
        self.write("tools/pretrain/pretrainer.cc", '#include "server/training/trainer.h"\n')
        self.assertEqual(len(self.problems()), 1)

    def test_shipped_code_including_test_helpers_is_reported(self):
        self.write("server/server.cc", '#include "common/testing/temp_dir.h"\n')
        self.write("common/file_util.cc", '#include "common/api_util.h"\n')  # common below api_util
        self.assertEqual(len(self.problems()), 2)

    def test_a_proto_importing_another_module_is_checked_too(self):
        self.write("proto/adapterd/v1/api.proto", 'import "storage/records.proto";\n')
        self.assertEqual(len(self.problems()), 1)

    def test_a_file_of_no_module_is_reported(self):
        self.write("newdir/thing.cc", "int x;\n")
        problems = self.problems()
        self.assertEqual(len(problems), 1)
        self.assertIn("belongs to no module", problems[0])

    def test_a_cycle_in_the_rules_is_reported(self):
        self.write("docs/ARCHITECTURE.md", "```layering\na a/ b\nb b/ a\n```\n")
        problems = self.problems()
        self.assertEqual(len(problems), 1)
        self.assertIn("cycle", problems[0])

    def test_malformed_rules_are_refused(self):
        for text in ("no block here", "```layering\na a/ missing\n```\n", "```layering\na a/\na b/\n```\n",
                     "```layering\nlonely\n```\n"):
            with self.assertRaises(ValueError, msg=text):
                check_layering.Rules(text)


if __name__ == "__main__":
    unittest.main()
