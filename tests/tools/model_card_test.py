"""Tests scripts/corpus/model_card.py: the card of the default model, and the
lineage of a model continued with `adapterd-pretrain train --init_from`.

Run by ctest (model_card_test) as `python3 -m unittest`, with
ADAPTERD_SOURCE_DIR set to the repository's root.
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

SOURCE_DIR = os.environ.get("ADAPTERD_SOURCE_DIR",
                            os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CARD = os.path.join(SOURCE_DIR, "scripts", "corpus", "model_card.py")


def sha256_file(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def read_json(path):
    with open(path) as f:
        return json.load(f)


def make_model(path, steps, seconds, lr, accuracy, init_from="", gpu=""):
    """A model directory as build-default-model.sh leaves it, with made-up weights; with `gpu`,
    as scripts/gpu/pretrain.sh leaves it (on CUDA, the learning rate on the clock)."""
    os.makedirs(path)
    config = {"num_hidden_layers": 2, "hidden_size": 32, "num_attention_heads": 2,
              "intermediate_size": 64, "max_position_embeddings": 64, "torch_dtype": "float16"}
    summary = {"autocast": "off", "batch_size": 4, "corpus_documents": 10, "corpus_tokens": 1000,
               "cpu": "Test CPU", "device": "cpu", "dropout": 0.0, "init_range": 0.02,
               "learning_rate": lr, "parameters": 12345, "seed": 42, "seq_len": 10, "steps": steps,
               "threads": 1, "total_steps": steps, "train_seconds": seconds,
               "heldout": {"accuracy": accuracy, "documents": 3, "loss": 5.0, "masked_tokens": 30,
                           "unigram_accuracy": 0.05}}
    if init_from:
        summary["init_from"] = init_from
    if gpu:
        summary.update({"device": "cuda", "gpu": gpu, "lr_schedule": "time", "autocast": "bf16"})
    for name, value in (("config.json", config), ("pretrain_summary.json", summary)):
        with open(os.path.join(path, name), "w") as f:
            json.dump(value, f)
    with open(os.path.join(path, "train_log.jsonl"), "w") as f:
        for step in range(1, steps + 1):
            f.write(json.dumps({"step": step, "loss": 6.0 - step / steps, "accuracy": 0.1,
                                "lr": lr, "seconds": seconds * step / steps}) + "\n")
    with open(os.path.join(path, "vocab.txt"), "w") as f:
        f.write("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n")
    with open(os.path.join(path, "model.safetensors"), "wb") as f:
        f.write(os.urandom(256))


class ModelCardTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="model_card_test_")
        self.provenance = os.path.join(self.dir, "PROVENANCE.md")
        with open(self.provenance, "w") as f:
            f.write("# Pretraining corpus: provenance\n\n## Sources and counts\n\nmade up\n")

    def tearDown(self):
        shutil.rmtree(self.dir)

    def card(self, model_dir, *extra):
        return subprocess.run([sys.executable, CARD, "--model_dir", model_dir, "--provenance",
                               self.provenance, *extra], check=True, capture_output=True,
                              text=True).stdout

    def test_a_model_from_scratch_has_no_lineage(self):
        a = os.path.join(self.dir, "a")
        make_model(a, steps=10, seconds=60, lr=2e-3, accuracy=0.30)
        text = self.card(a, "--write_lineage")
        self.assertIn("| steps | 10 of a 10-step schedule (400 token positions, 0.40 epochs) |", text)
        self.assertIn("normal, std 0.02", text)
        self.assertIn("| masked-token accuracy | **0.3000** |", text)
        self.assertIn("| hardware | cpu: Test CPU, 1 threads |", text)
        self.assertIn("## Appendix: corpus provenance", text)
        self.assertIn("### Sources and counts", text)
        self.assertNotIn("## Lineage", text)
        self.assertFalse(os.path.exists(os.path.join(a, "lineage.json")))

    def test_a_gpu_run_on_the_clock_names_its_gpu_and_schedule(self):
        a, b = os.path.join(self.dir, "a"), os.path.join(self.dir, "b")
        make_model(a, steps=10, seconds=60, lr=2e-3, accuracy=0.30, gpu="NVIDIA H200")
        make_model(b, steps=20, seconds=30, lr=5e-4, accuracy=0.40, init_from=a, gpu="NVIDIA H200")
        text = self.card(b, "--write_lineage")
        self.assertIn("| hardware | cuda: NVIDIA H200 (host Test CPU) |", text)
        self.assertIn("| steps | 20 steps; learning rate on the clock (`--lr_schedule time`): 6% warmup, then "
                      "linear decay to 0 at the end of a 0.5-minute budget (800 token positions, 0.80 epochs) |",
                      text)
        self.assertIn("| 10 | 0.40 | 0.002 | 1.0 | cuda: NVIDIA H200 (host Test CPU), autocast bf16 | 0.3000 |",
                      text)

    def test_a_chain_of_continuations_is_described_and_survives_its_parents(self):
        a, b, c = (os.path.join(self.dir, n) for n in ("a", "b", "c"))
        make_model(a, steps=10, seconds=60, lr=2e-3, accuracy=0.30)
        make_model(b, steps=20, seconds=120, lr=5e-4, accuracy=0.40, init_from=a)
        make_model(c, steps=5, seconds=30, lr=1e-4, accuracy=0.45, init_from=b)
        sha_a = sha256_file(os.path.join(a, "model.safetensors"))
        sha_b = sha256_file(os.path.join(b, "model.safetensors"))

        text = self.card(c, "--write_lineage")
        self.assertIn(f"the weights of `{b}` (`--init_from`", text)
        self.assertIn(f"| `{a}` (weights sha256 {sha_a[:12]}) | 10 | 0.40 | 0.002 | 1.0 | "
                      "cpu: Test CPU, 1 threads, autocast off | 0.3000 |", text)
        self.assertIn(f"| `{b}` (weights sha256 {sha_b[:12]}) | 20 | 0.80 | 0.0005 | 2.0 |", text)
        self.assertIn("| this model, `c` | 5 | 0.20 | 0.0001 | 0.5 |", text)
        self.assertIn("| **all** | **35** | **1.40** | | **3.5** | | |", text)
        self.assertIn("In all, 1,400 token positions.", text)
        # Oldest first: a's row before b's, b's before this model's.
        self.assertLess(text.index(f"| `{a}`"), text.index(f"| `{b}`"))
        self.assertLess(text.index(f"| `{b}`"), text.index("| this model"))

        stored = read_json(os.path.join(c, "lineage.json"))
        self.assertEqual([r["model_dir"] for r in stored], [a, b])
        self.assertEqual([r["weights_sha256"] for r in stored], [sha_a, sha_b])
        self.assertEqual(stored[1]["summary"]["init_from"], a)

        # The parents are gone: the stored lineage still describes them.
        shutil.rmtree(a)
        shutil.rmtree(b)
        self.assertEqual(self.card(c), text)

    def test_without_write_lineage_nothing_is_written(self):
        a, b = os.path.join(self.dir, "a"), os.path.join(self.dir, "b")
        make_model(a, steps=10, seconds=60, lr=2e-3, accuracy=0.30)
        make_model(b, steps=20, seconds=120, lr=5e-4, accuracy=0.40, init_from=a)
        self.assertIn("## Lineage", self.card(b))
        self.assertFalse(os.path.exists(os.path.join(b, "lineage.json")))

    def test_a_new_model_in_the_same_directory_replaces_the_stored_lineage(self):
        a, b, out = (os.path.join(self.dir, n) for n in ("a", "b", "out"))
        make_model(a, steps=10, seconds=60, lr=2e-3, accuracy=0.30)
        make_model(b, steps=20, seconds=120, lr=5e-4, accuracy=0.40)
        make_model(out, steps=5, seconds=30, lr=1e-4, accuracy=0.45, init_from=a)
        self.card(out, "--write_lineage")
        self.assertEqual([r["model_dir"] for r in read_json(os.path.join(out, "lineage.json"))], [a])

        # Another model exported to `out` (the old lineage.json left there), continuing b: the card
        # and the stored file describe b, not a.
        stale = read_json(os.path.join(out, "lineage.json"))
        shutil.rmtree(out)
        make_model(out, steps=5, seconds=30, lr=1e-4, accuracy=0.45, init_from=b)
        with open(os.path.join(out, "lineage.json"), "w") as f:
            json.dump(stale, f)
        text = self.card(out, "--write_lineage")
        self.assertIn(f"| `{b}` (weights sha256", text)
        self.assertNotIn(f"| `{a}`", text)
        self.assertEqual([r["model_dir"] for r in read_json(os.path.join(out, "lineage.json"))], [b])

        # And one trained from scratch: no lineage, and the stale file is gone.
        shutil.copy(os.path.join(a, "pretrain_summary.json"), os.path.join(out, "pretrain_summary.json"))
        self.assertNotIn("## Lineage", self.card(out, "--write_lineage"))
        self.assertFalse(os.path.exists(os.path.join(out, "lineage.json")))

    def test_a_missing_parent_is_an_error(self):
        b = os.path.join(self.dir, "b")
        make_model(b, steps=20, seconds=120, lr=5e-4, accuracy=0.40, init_from=os.path.join(self.dir, "gone"))
        result = subprocess.run([sys.executable, CARD, "--model_dir", b, "--provenance", self.provenance],
                                capture_output=True, text=True)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("gone", result.stderr)


if __name__ == "__main__":
    unittest.main()
