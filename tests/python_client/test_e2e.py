"""The Python client against the real adapterd: every kind of call (tests/python_client/conftest.py)."""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import re
import subprocess
import venv
import zipfile
from pathlib import Path

import grpc
import pytest

import adapterd
from adapterd.v1 import adapterd_service_pb2 as pb
from conftest import EXAMPLES, SOURCE_DIR, AdapterdServer


def test_health(client):
    assert client.health() == adapterd.ServingStatus.SERVING
    assert str(client.health()) == "SERVING"


def test_upload_file_and_rows_then_get_list_delete(client):
    from_file = client.upload_dataset(EXAMPLES / "topics_validation.csv", task_id="py-up")
    assert from_file.num_examples == 100
    assert from_file.display_name == "topics_validation.csv"
    assert from_file.dataset_id.endswith(".py-up")  # minted for the task named in x-task-id
    assert sum(from_file.label_counts.values()) == 100
    rows = [{"text": f"text {i}", "label": "a" if i % 2 else "b"} for i in range(2500)]
    # Small chunks: the upload streams many messages.
    with adapterd.Client(client.target, upload_chunk_bytes=4096) as small:
        from_rows = small.upload_dataset(iter(rows), dataset_id="py-rows", display_name="rows")
    assert (from_rows.dataset_id, from_rows.num_examples, from_rows.label_counts) == (
        "py-rows", 2500, {"a": 1250, "b": 1250})
    assert client.get_dataset(from_file.dataset_id) == from_file
    listed = {d.dataset_id for d in client.datasets(page_size=1)}
    assert {from_file.dataset_id, "py-rows"} <= listed
    with pytest.raises(adapterd.AlreadyExists):
        client.upload_dataset(rows[:3], dataset_id="py-rows")
    client.delete_dataset("py-rows")
    with pytest.raises(adapterd.NotFound):
        client.get_dataset("py-rows")
    # A bad row (the server's reader names its line: one row a line) cancels the stream: the id stays free.
    with pytest.raises(adapterd.InvalidArgument, match="rows: line 3"):
        client.upload_dataset([{"text": "a", "label": "x"}, {"text": "b", "label": "y"}, {"text": ""}],
                              dataset_id="py-bad")
    with pytest.raises(adapterd.NotFound):
        client.get_dataset("py-bad")


def test_train_waits_to_succeeded_and_watch_replays_events(client, capsys):
    job = client.train(
        "py-topics",
        EXAMPLES / "topics_train.csv",
        validation_dataset=str(EXAMPLES / "topics_validation.csv"),
        epochs=2,
        seed=3,
        learning_rate=1e-3,
        progress=True,
    )
    assert job.state == adapterd.JobState.SUCCEEDED and job.done
    assert job.result_version == 1 and job.kind == adapterd.TaskKind.SEQUENCE_CLASSIFICATION
    assert job.hyperparameters["epochs"] == 2 and job.hyperparameters["learning_rate"] == 1e-3
    assert job.num_train_examples == 400 and job.num_validation_examples == 100
    assert job.best_metrics is not None and job.best_metrics.epoch in (1, 2)
    # The selection metric is the server's (the client keeps no table of kinds), shown as adapterctl shows it.
    best = job.best_metrics
    assert best.selection is not None and best.selection.field == "val_accuracy" and best.selection.fraction
    assert best.selection.value == best.val_accuracy
    assert best.describe() == f"val accuracy {100 * best.val_accuracy:.1f}%"
    err = capsys.readouterr().err
    assert f"({best.describe()})" in err
    assert "state RUNNING" in err and "epoch 2: train loss" in err and "SUCCEEDED: task py-topics version 1" in err
    # The same file again reuses the content-addressed dataset.
    assert job.dataset_ids[0].startswith("data-")
    events = list(client.watch(job))
    seqs = [e.seq for e in events]
    assert seqs == sorted(seqs) and seqs[0] == 1 and len(set(seqs)) == len(seqs)
    states = [e.state_change.to_state for e in events if e.kind == "state_change"]
    assert states[0] == adapterd.JobState.VALIDATING and states[-1] == adapterd.JobState.SUCCEEDED
    assert [e.epoch_metrics.epoch for e in events if e.epoch_metrics] == [1, 2]
    later = list(client.watch(job.job_id, after_seq=seqs[-3]))
    assert [e.seq for e in later] == seqs[-2:]
    assert client.get_job(job.job_id) == job
    assert [j.job_id for j in client.jobs(task_id="py-topics")] == [job.job_id]
    assert job.job_id in {j.job_id for j in client.jobs(state="succeeded")}
    with pytest.raises(adapterd.FailedPrecondition):
        client.cancel_job(job)
    retrain = client.train("py-topics", job.dataset_ids[0], wait=False, epochs=1)
    assert retrain.state in (adapterd.JobState.VALIDATING, adapterd.JobState.QUEUED, adapterd.JobState.RUNNING)
    assert client.wait(retrain).result_version == 2
    assert client.get_task("py-topics").versions == (1, 2)


def test_cancel_while_training_raises_job_cancelled(client):
    job = client.train("py-cancel", EXAMPLES / "sentiment_train.csv", wait=False, epochs=100)
    cancelled = client.cancel_job(job.job_id)
    assert cancelled.state in (adapterd.JobState.CANCELLED, adapterd.JobState.CANCELLING)
    with pytest.raises(adapterd.JobCancelled) as info:
        client.wait(job)
    assert info.value.job.state == adapterd.JobState.CANCELLED


def test_predict_every_kind(client, trained):
    r = client.predict(trained["classification"], ["great and fast, I love it", "broken, rude and slow"],
                       return_all_scores=True)
    assert r.kind == adapterd.TaskKind.SEQUENCE_CLASSIFICATION and r.version == 1 and len(r) == 2
    for p in r:
        assert isinstance(p, adapterd.ClassificationPrediction)
        assert set(p.scores) == {"negative", "positive"} and p.label in p.scores
        assert p.score == pytest.approx(max(p.scores.values()))
        assert sum(p.scores.values()) == pytest.approx(1.0, abs=1e-5)

    r = client.predict(trained["multi-label"], "it arrived the next day, the price was fair", threshold=0.01,
                       return_all_scores=True)
    p = r[0]
    assert isinstance(p, adapterd.MultiLabelPrediction)
    assert set(p.label_names) == {"delivery", "price", "quality", "service"}  # every label passes 0.01
    assert [s.score for s in p.labels] == sorted((s.score for s in p.labels), reverse=True)
    assert client.predict(trained["multi-label"], "x", threshold=1.0)[0].labels == ()

    r = client.predict(trained["regression"], ["works perfectly, it is blue", "complete waste of money"])
    assert all(isinstance(p, adapterd.RegressionPrediction) and 0.0 < p.value < 6.0 for p in r)

    text = "Grace Hopper moved to Zürich in the spring ."
    r = client.predict(trained["ner"], text)
    assert isinstance(r[0], adapterd.TokenClassificationPrediction)
    for e in r[0].entities:
        assert text[e.start:e.end] == e.text and e.label in {"PER", "LOC", "ORG"} and 0 <= e.score <= 1

    contexts = ["Ada Lovelace was born in London in 1815. Ada became a mathematician.", "Alan Turing worked for IBM."]
    r = client.predict(trained["qa"], ["Where was Ada Lovelace born?", "Who did Alan Turing work for?"],
                       contexts=contexts, top_k=2)
    assert r.kind == adapterd.TaskKind.EXTRACTIVE_QA
    for p, context in zip(r, contexts):
        assert isinstance(p, adapterd.QuestionAnsweringPrediction) and len(p.answers) == 2
        assert p.best == p.answers[0] and p.answers[0].score >= p.answers[1].score
        for a in p.answers:
            assert a.is_no_answer or context[a.start:a.end] == a.text


def test_predict_batches_stay_on_one_version(client, trained):
    texts = [f"text number {i}" for i in range(10)]
    whole = client.predict(trained["classification"], texts)
    batched = client.predict(trained["classification"], texts, batch_size=3)
    assert batched.version == whole.version
    # The same answers, to float32 rounding: a row's scores do not depend on
    # the rows batched beside it, except that oneDNN's kernels on some CPUs
    # (AVX2 ones) block a product by its row count, which reorders sums
    # (6e-8 apart measured on an AVX2-only AMD EPYC).
    assert [p.label for p in batched.predictions] == [p.label for p in whole.predictions]
    for b, w in zip(batched.predictions, whole.predictions):
        assert b.score == pytest.approx(w.score, rel=1e-6, abs=1e-6)


def test_errors_are_typed(client, trained):
    with pytest.raises(adapterd.NotFound) as info:
        client.predict("no-such-task", "hello")
    assert info.value.code == grpc.StatusCode.NOT_FOUND and "no-such-task" in info.value.message
    assert isinstance(info.value, adapterd.AdapterdError)
    with pytest.raises(adapterd.NotFound):
        client.get_task("no-such-task")
    with pytest.raises(adapterd.InvalidArgument):
        client.predict(trained["classification"], [""])  # the server refuses an empty text
    with pytest.raises(adapterd.InvalidArgument, match="context"):
        client.predict(trained["qa"], "Where?")  # a question without its context
    with pytest.raises(adapterd.InvalidArgument):
        client.predict(trained["multi-label"], "x", threshold=1.5)
    with pytest.raises(adapterd.InvalidArgument):
        client.train("py-bad-kind", EXAMPLES / "sentiment_train.csv", kind="qa")  # no QA examples
    with pytest.raises(adapterd.NotFound):
        client.train("py-x", "no-such-dataset")
    with pytest.raises(adapterd.InvalidArgument):
        client.train("py-x", EXAMPLES / "sentiment_train.csv", epochs=-1)
    with pytest.raises(adapterd.InvalidArgument, match="line 2"):
        client.upload_dataset(io_path(client, "text,label\nfoo\n"))


def io_path(client, text: str) -> str:
    import tempfile

    fd, path = tempfile.mkstemp(suffix=".csv")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


def test_paging_of_tasks_and_jobs(client, trained):
    tasks = list(client.tasks(page_size=2))
    ids = [t.task_id for t in tasks]
    assert ids == sorted(ids) and len(ids) == len(set(ids))
    assert set(trained.values()) <= set(ids) and len(ids) >= 5
    assert ids == [t.task_id for t in client.tasks()]  # one page
    jobs = list(client.jobs(page_size=2))
    assert len(jobs) >= 5 and [j.job_id for j in jobs] == [j.job_id for j in client.jobs(page_size=1000)]
    assert len({j.job_id for j in jobs}) == len(jobs)
    kinds = {t.task_id: t.kind for t in tasks}
    assert kinds[trained["qa"]] == adapterd.TaskKind.EXTRACTIVE_QA
    assert kinds[trained["ner"]] == adapterd.TaskKind.TOKEN_CLASSIFICATION


@pytest.mark.parametrize("kind", ["classification", "qa", "ner"])
def test_export_import_round_trip_predicts_identically(client, trained, tmp_path, kind):
    task = trained[kind]
    exported = client.export_adapter(task)
    assert exported.version == 1 and exported.size == len(exported.data) > 0
    path = tmp_path / f"{task}.safetensors"
    assert client.export_adapter(task, path).path == str(path)
    assert path.read_bytes() == exported.data
    buffer = io.BytesIO()
    client.export_adapter(task, buffer, version=1)
    assert buffer.getvalue() == exported.data
    copy = client.import_adapter(f"{task}-copy-{kind}", path if kind != "ner" else exported.data)
    assert copy.kind == client.get_task(task).kind and copy.current_version >= 1
    texts = ["Where was Ada born?", "Grace Hopper moved to Zürich ."]
    contexts = ["Ada was born in Paris.", "Grace Hopper moved to Zürich in 1950."] if kind == "qa" else None
    assert (
        client.predict(copy.task_id, texts, contexts=contexts, return_all_scores=True).predictions
        == client.predict(task, texts, contexts=contexts, return_all_scores=True).predictions
    )
    with pytest.raises(adapterd.AlreadyExists):
        client.import_adapter(copy.task_id, exported.data)
    with pytest.raises(adapterd.InvalidArgument):
        client.import_adapter(f"{task}-corrupt", b"not an adapter file at all")
    client.delete_task(copy.task_id)
    with pytest.raises(adapterd.NotFound):
        client.predict(copy.task_id, "x")


# One validation file of each kind, in the order of adapterctl's --kind names below.
EVERY_KIND_FILES = [
    EXAMPLES / "sentiment_validation.csv",
    EXAMPLES / "kinds" / "aspects_validation.jsonl",
    EXAMPLES / "kinds" / "people_validation.jsonl",
    EXAMPLES / "kinds" / "biographies_validation.json",
    EXAMPLES / "kinds" / "ratings_validation.csv",
]


def test_a_files_dataset_id_is_adapterctls(client):
    """Both clients name a training file's dataset by the SHA-256 of its bytes (one definition, no
    reader of their own): the same file gets the same id from adapterctl and from Python, and the
    server reads it to the same examples (content_sha256) whichever client sent it."""
    adapterctl = os.environ.get("ADAPTERCTL_BIN")
    if not adapterctl:
        pytest.skip("ADAPTERCTL_BIN not set")
    for i, path in enumerate(EVERY_KIND_FILES):
        expected = adapterd.dataset_id_for_file(path.read_bytes())
        run = subprocess.run(
            [adapterctl, "--server", client.target, "train", "--detach", "--task", f"py-ctl-{i}", "--data", str(path),
             "--kind", ["classification", "multi-label", "ner", "qa", "regression"][i]],
            capture_output=True, text=True, timeout=120,
        )
        match = re.search(r"dataset (data-[0-9a-f]{40})", run.stderr)
        assert match, run.stderr + run.stdout
        assert match.group(1) == expected, path
        stored = client.get_dataset(expected, task_id=f"py-ctl-{i}")
        assert stored.file_sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
        again = client.upload_dataset(path)
        assert (again.content_sha256, again.num_examples) == (stored.content_sha256, stored.num_examples), path
        client.delete_dataset(again)


def test_the_server_reads_files_and_rows_and_names_bad_lines(client):
    """Files, their bytes and dict rows go to the server's one reader; Example rows go as they are."""
    path = EXAMPLES / "kinds" / "aspects_validation.jsonl"
    from_file = client.upload_dataset(path)
    assert from_file.display_name == path.name and from_file.file_sha256
    from_bytes = client.upload_dataset(path.read_bytes(), format="jsonl")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    from_rows = client.upload_dataset(rows)
    examples = [pb.Example(text=r["text"], labels=r["labels"]) for r in rows]
    from_examples = client.upload_dataset(examples)
    assert from_examples.file_sha256 == ""
    for d in (from_bytes, from_rows, from_examples):
        assert (d.content_sha256, d.num_examples) == (from_file.content_sha256, from_file.num_examples)
    with pytest.raises(adapterd.InvalidArgument, match=r"rows: line 3: missing key \"label\""):
        client.upload_dataset([{"text": "a", "label": "x"}, {"text": "b", "label": "y"}, {"text": "no label"}])
    with pytest.raises(adapterd.InvalidArgument, match="unknown dataset format"):
        client.upload_dataset(path, format="xml")
    for d in (from_file, from_bytes, from_rows, from_examples):
        client.delete_dataset(d)


def test_train_reuses_a_stored_dataset_only_when_it_holds_the_same_rows(client):
    """train() with rows uploads them (as JSON Lines) under their content-derived id; on ALREADY_EXISTS it
    reuses the stored dataset only when it holds the same bytes, not merely as many rows."""
    mine = [{"text": f"a review number {i}", "label": "good" if i % 2 else "bad"} for i in range(12)]
    other = [{"text": f"another text {i}", "label": "good" if i % 2 else "bad"} for i in range(12)]
    mine_jsonl = "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in mine).encode()
    mine_id = adapterd.dataset_id_for_file(mine_jsonl)
    planted = client.upload_dataset(other, dataset_id=mine_id)  # same size, same id, other rows
    assert planted.num_examples == len(mine)
    with pytest.raises(adapterd.AlreadyExists, match="different content"):
        client.train("py-reuse", mine, epochs=1, wait=False)
    client.delete_dataset(mine_id)
    # With the id free, the rows are uploaded; a second train() reuses the very same upload.
    job = client.train("py-reuse", mine, epochs=1, wait=False)
    again = client.train("py-reuse", mine, epochs=1, wait=False)
    assert list(job.dataset_ids) == list(again.dataset_ids) == [mine_id]
    client.wait(again)


@pytest.fixture(scope="module")
def tenant_server(tmp_path_factory, model_dir):
    directory = tmp_path_factory.mktemp("tenants")
    key = "py-client-test-key"
    tenants = directory / "tenants.json"
    tenants.write_text(
        '{"tenants": [{"id": "acme", "api_key_sha256": ["%s"]}]}' % hashlib.sha256(key.encode()).hexdigest()
    )
    os.chmod(tenants, 0o600)
    s = AdapterdServer(directory, model_dir, ["--tenants_file", str(tenants)]).start()
    yield s, key
    s.stop()


def test_api_key_argument_and_environment(tenant_server, monkeypatch):
    server, key = tenant_server
    monkeypatch.delenv("ADAPTERD_API_KEY", raising=False)
    with adapterd.Client(server.target) as anonymous:
        with pytest.raises(adapterd.Unauthenticated):
            list(anonymous.tasks())
    with adapterd.Client(server.target, api_key="wrong") as wrong:
        with pytest.raises(adapterd.Unauthenticated):
            wrong.get_task("x")
    with adapterd.Client(server.target, api_key=key) as good:
        assert list(good.tasks()) == []
        with pytest.raises(adapterd.NotFound):
            good.get_task("x")
    monkeypatch.setenv("ADAPTERD_API_KEY", key)
    with adapterd.Client(server.target) as from_env:
        dataset = from_env.upload_dataset([{"text": "a", "label": "x"}, {"text": "b", "label": "y"}])
        assert [d.dataset_id for d in from_env.datasets()] == [dataset.dataset_id]


def _venv_python(tmp_path: Path) -> Path:
    directory = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(directory)
    return directory / "bin" / "python"


def _pip_install(python: Path, source: Path, env: dict) -> subprocess.CompletedProcess:
    # Debian's pip, run by the venv's interpreter (the venv sees the system site-packages).
    return subprocess.run(
        [str(python), "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--no-index", "--quiet",
         str(source)],
        capture_output=True, text=True, timeout=300, env=env,
    )


def test_pip_install_from_the_checkout_then_health(tmp_path, server):
    python = _venv_python(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ADAPTERD_PROTO_DIR")}
    env["ADAPTERD_BUILD_DIR"] = str(tmp_path / "build")  # keep the source tree clean
    install = _pip_install(python, SOURCE_DIR / "client" / "python", env)
    assert install.returncode == 0, install.stdout + install.stderr
    check = subprocess.run(
        [str(python), "-c",
         "import sys, adapterd, adapterd.v1.adapterd_service_pb2 as m; "
         "assert '/site-packages/' in adapterd.__file__ and '/site-packages/' in m.__file__, "
         "(adapterd.__file__, m.__file__); "
         f"c = adapterd.Client({server.target!r}); print(c.health()); c.close()"],
        capture_output=True, text=True, timeout=120, env=env, cwd=str(tmp_path),
    )
    assert check.returncode == 0, check.stderr
    assert check.stdout.strip() == "SERVING"
    assert not (SOURCE_DIR / "client" / "python" / "adapterd" / "v1").exists()


def test_pip_install_of_a_copy_needs_the_proto_dir(tmp_path):
    import shutil

    copy = tmp_path / "adapterd-src"
    shutil.copytree(SOURCE_DIR / "client" / "python", copy,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "v1"))
    python = _venv_python(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ADAPTERD_PROTO_DIR")}
    failed = _pip_install(python, copy, env)
    assert failed.returncode != 0
    assert "ADAPTERD_PROTO_DIR" in failed.stdout + failed.stderr
    env["ADAPTERD_PROTO_DIR"] = str(SOURCE_DIR / "proto")
    installed = _pip_install(python, copy, env)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    check = subprocess.run([str(python), "-c", "import adapterd; print(adapterd.TaskKind.parse('qa'))"],
                           capture_output=True, text=True, env=env, cwd=str(tmp_path))
    assert check.stdout.strip() == "EXTRACTIVE_QA", check.stderr


def test_the_stub_generator_runs_as_a_script_beside_the_package_modules(tmp_path):
    # The README's command (and the build's). Python puts the script's own
    # directory, adapterd/, first on sys.path, so a package module named like
    # a standard-library module would shadow it there. -S keeps site start-up
    # from importing standard modules first, which would hide such a clash.
    codegen = SOURCE_DIR / "client" / "python" / "adapterd" / "_codegen.py"
    out = tmp_path / "stubs"
    for cwd in (tmp_path, codegen.parent):
        run = subprocess.run(
            ["/usr/bin/python3", "-S", str(codegen), "--out", str(out), "--proto-dir", str(SOURCE_DIR / "proto")],
            capture_output=True, text=True, timeout=120, cwd=str(cwd),
        )
        assert run.returncode == 0, run.stderr
    generated = sorted(p.name for p in (out / "adapterd" / "v1").iterdir())
    assert generated == ["__init__.py", "adapterd_service_pb2.py", "adapterd_service_pb2_grpc.py"]
    assert "class AdapterdStub" in (out / "adapterd" / "v1" / "adapterd_service_pb2_grpc.py").read_text()


def test_import_adapterhub_directory_predicts_what_the_reference_computed(tmp_path):
    """An AdapterHub directory (tests/model/testdata/adapterhub/reference, written by a plain-PyTorch
    reference for the golden tiny BERT) imports by path, zipped by the client, and predicts the
    reference's sigmoids for golden/inputs.json's row 1, "[CLS] tok8 tok24 [SEP]"."""
    golden = SOURCE_DIR / "tests" / "model" / "testdata" / "golden" / "model"
    reference = SOURCE_DIR / "tests" / "model" / "testdata" / "adapterhub" / "reference" / "tanh_multilabel"
    (tmp_path / "hub").mkdir()
    server = AdapterdServer(tmp_path / "hub", golden, ["--max_seq_len", "24"]).start()
    try:
        with adapterd.Client(server.target, api_key="", timeout=60) as c:
            task = c.import_adapter("hub-aspects", reference / "adapter", format="adapterhub")
            assert task.kind == adapterd.TaskKind.MULTI_LABEL_CLASSIFICATION
            assert task.labels == ("a", "b", "c", "d")
            assert "no fingerprint" in task.import_warning
            prediction = c.predict("hub-aspects", ["tok8 tok24"], return_all_scores=True).predictions[0]
            assert isinstance(prediction, adapterd.MultiLabelPrediction)
            scores = prediction.scores
            logits = json.loads((reference / "expected.json").read_text())["logits"][1]
            expected = {label: 1 / (1 + math.exp(-x)) for label, x in zip(task.labels, logits)}
            assert scores == pytest.approx(expected, abs=1e-5)
            # The same directory as a zip's bytes; a directory without the format is refused here.
            zipped = io.BytesIO()
            with zipfile.ZipFile(zipped, "w") as z:
                for f in sorted((reference / "adapter").iterdir()):
                    z.write(f, f.name)
            again = c.import_adapter("hub-aspects-2", zipped.getvalue(), format="adapterhub")
            assert again.labels == task.labels
            with pytest.raises(ValueError, match="format='adapterhub'"):
                c.import_adapter("hub-x", reference / "adapter")
            pfeiffer = SOURCE_DIR / "tests" / "model" / "testdata" / "adapterhub" / "pfeiffer"
            with pytest.raises(adapterd.Unimplemented, match="pfeiffer placement"):
                c.import_adapter("hub-pfeiffer", pfeiffer, format="adapterhub")
            assert {t.task_id for t in c.tasks()} == {"hub-aspects", "hub-aspects-2"}

            # Exported back as an AdapterHub directory (by path), or its zip (no path):
            # the same four files, and the directory imports back to the same scores.
            exported = c.export_adapter("hub-aspects", tmp_path / "exported", format="adapterhub")
            assert exported.path == str(tmp_path / "exported")
            assert sorted(p.name for p in (tmp_path / "exported").iterdir()) == [
                "adapter_config.json", "head_config.json", "pytorch_adapter.bin", "pytorch_model_head.bin"]
            config = json.loads((tmp_path / "exported" / "adapter_config.json").read_text())
            assert config["name"] == "hub-aspects" and config["version"].startswith("adapters.")
            as_zip = c.export_adapter("hub-aspects", format="adapterhub")
            assert as_zip.data is not None
            with zipfile.ZipFile(io.BytesIO(as_zip.data)) as z:
                assert z.read("pytorch_adapter.bin") == (tmp_path / "exported" / "pytorch_adapter.bin").read_bytes()
            c.import_adapter("hub-back", tmp_path / "exported", format="adapterhub")
            back = c.predict("hub-back", ["tok8 tok24"], return_all_scores=True).predictions[0]
            assert isinstance(back, adapterd.MultiLabelPrediction)
            assert back.scores == scores
            with pytest.raises(ValueError, match="not empty"):
                c.export_adapter("hub-aspects", tmp_path / "exported", format="adapterhub")
            with pytest.raises(adapterd.InvalidArgument, match="accept_layer_norm_loss"):
                c.export_adapter("hub-aspects", accept_layer_norm_loss=True)
    finally:
        assert server.stop() == 0, server.log()
