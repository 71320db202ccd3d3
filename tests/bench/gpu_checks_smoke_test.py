"""CPU smoke run of adapterd-gpu-checks (bench/gpu_checks.cc).

The GPU issue's checks run on a lent GPU only (scripts/gpu/build-and-measure.sh);
this keeps the program building and working between lendings: on a tiny random
model and --device cpu, C1 then compares the CPU with itself and the mixed-task
strategies with each other, and every step must run and report its figures.
Standard library only; the binaries come from the environment (CMake sets it).
"""
import json
import os
import struct
import subprocess
import tempfile
import unittest

MAKE_MODEL = os.environ["ADAPTERD_MAKE_MODEL"]
GPU_CHECKS = os.environ["ADAPTERD_GPU_CHECKS"]


class GpuChecksOnCpu(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.model = os.path.join(cls.tmp.name, "model")
        cls.out = os.path.join(cls.tmp.name, "out")
        subprocess.run([MAKE_MODEL, "--preset", "tiny", "--out", cls.model], check=True, capture_output=True)
        cls.proc = subprocess.run(
            [GPU_CHECKS, "--model_dir", cls.model, "--out", cls.out, "--device", "cpu", "--tasks", "6",
             "--batch", "8", "--seq", "32", "--iters", "1", "--c2_inputs", "300", "--latency_runs", "5"],
            capture_output=True, text=True, timeout=600)
        with open(os.path.join(cls.out, "gpu_checks.json")) as f:
            cls.results = json.load(f)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_every_step_ran(self):
        self.assertEqual(self.proc.returncode, 0, self.proc.stdout + self.proc.stderr)
        self.assertNotIn("failed", self.results)
        printed = {line.split()[1] for line in self.proc.stdout.splitlines() if line.startswith("RESULT ")}
        self.assertEqual(printed, {k for k, v in self.results.items() if isinstance(v, float)} - {"flops_per_sequence"})

    def test_strategies_and_paths_agree_on_one_device(self):
        # Same device, same weights: the plain, one-task and segment paths are
        # the CPU forward itself; the gathered products only reassociate sums.
        for path in ("plain", "one_task", "mixed_segments"):
            self.assertEqual(self.results[f"c1.{path}.logits_max_abs_diff"], 0.0, path)
        self.assertLess(self.results["c1.mixed_gathered.hidden_max_abs_diff"], 1e-4)
        self.assertLess(self.results["c1.worst_max_abs_diff"], 1e-4)

    def test_c2_compares_every_input(self):
        self.assertEqual(self.results["c2.inputs"], 300)
        self.assertGreaterEqual(self.results["c2.argmax_agreement"], 0.0)
        self.assertLessEqual(self.results["c2.argmax_agreement"], 1.0)
        self.assertEqual(self.results["c2.agreeing_inputs"], round(300 * self.results["c2.argmax_agreement"]))
        self.assertGreater(self.results["c2.max_probability_difference"], 0.0)  # bf16 is not fp32

    def test_throughput_and_latency_are_measured(self):
        for case in ("bare_encoder", "one_task", "mixed_gathered", "mixed_segments"):
            self.assertGreater(self.results[f"g1.{case}.seq_per_s"], 0, case)
        self.assertAlmostEqual(self.results["g2.mixed_over_single"],
                               self.results["g1.best_mixed_seq_per_s"] / self.results["g1.one_task.seq_per_s"])
        for dtype in ("bf16", "fp32"):
            self.assertLessEqual(self.results[f"g4.{dtype}.p50_ms"], self.results[f"g4.{dtype}.p99_ms"])

    def test_c3_files_hold_a_task_and_its_logits(self):
        c3 = os.path.join(self.out, "c3")
        with open(os.path.join(c3, "adapter.safetensors"), "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(n))
        self.assertEqual(header["__metadata__"]["format"], "adapterd.adapter_set")
        labels = json.loads(header["__metadata__"]["labels"])
        self.assertEqual(header["head.weight"]["shape"], [len(labels), 128])
        with open(os.path.join(c3, "adapterd_fp32.json")) as f:
            ref = json.load(f)
        self.assertEqual(len(ref["logits"]), len(ref["input_ids"]))
        self.assertTrue(all(len(row) == len(labels) for row in ref["logits"]))
        self.assertEqual(len(ref["pooled"][0]), 128)


if __name__ == "__main__":
    unittest.main()


class GpuChecksDatasetC2OnCpu(unittest.TestCase):
    """--c2_task dataset: train on PREFIX_train.csv, compare on every text of PREFIX_test.csv."""

    def test_compares_every_test_text_of_the_dataset(self):
        with tempfile.TemporaryDirectory() as tmp:
            model = os.path.join(tmp, "model")
            subprocess.run([MAKE_MODEL, "--preset", "tiny", "--out", model], check=True, capture_output=True)
            words = {"north": ["river", "hill", "snow", "pine"], "south": ["sand", "palm", "sun", "reef"]}
            for split, n in (("train", 40), ("validation", 8), ("test", 14)):
                with open(os.path.join(tmp, f"ds_{split}.csv"), "w") as f:
                    f.write("text,label\n")
                    for i in range(n):
                        label = "north" if i % 2 else "south"
                        f.write(f"{words[label][i % 4]} and {words[label][(i + 1) % 4]},{label}\n")
            out = os.path.join(tmp, "out")
            proc = subprocess.run(
                [GPU_CHECKS, "--model_dir", model, "--out", out, "--device", "cpu", "--only", "c2", "--c2_task",
                 "dataset", "--c2_dataset", os.path.join(tmp, "ds"), "--c2_epochs", "1", "--seq", "16",
                 "--reduced_residual_stream"],
                capture_output=True, text=True, timeout=600)
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            with open(os.path.join(out, "gpu_checks.json")) as f:
                results = json.load(f)
            self.assertTrue(results["reduced_residual_stream"])
            self.assertEqual(results["c2.inputs"], 14)
            for key in ("c2.fp32_accuracy", "c2.bf16_accuracy", "c2.train_validation_accuracy"):
                self.assertGreaterEqual(results[key], 0.0, key)
                self.assertLessEqual(results[key], 1.0, key)

    def test_a_missing_dataset_file_is_a_reported_failure(self):
        with tempfile.TemporaryDirectory() as tmp:
            model = os.path.join(tmp, "model")
            subprocess.run([MAKE_MODEL, "--preset", "tiny", "--out", model], check=True, capture_output=True)
            proc = subprocess.run(
                [GPU_CHECKS, "--model_dir", model, "--out", os.path.join(tmp, "out"), "--device", "cpu", "--only",
                 "c2", "--c2_task", "dataset", "--c2_dataset", os.path.join(tmp, "nothing")],
                capture_output=True, text=True, timeout=600)
            self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
            self.assertIn("FAILED c2 dataset", proc.stdout)
            self.assertIn("nothing_train.csv", proc.stdout)
