"""Fixtures of the Python client's tests: the real adapterd on 127.0.0.1.

Environment (tests/python_client/CMakeLists.txt sets it):
  ADAPTERD_BIN, ADAPTERD_MAKE_MODEL_BIN  the binaries (required);
  ADAPTERCTL_BIN                         adapterctl, for the reader cross-check (optional);
  ADAPTERD_SOURCE_DIR                    the repository (default: two levels up);
  PYTHONPATH                             client/python and the generated stubs.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Iterator, List, Optional

import pytest

# ctest's python_lint_test runs it with unittest; it is not one of these tests.
collect_ignore = ["python_lint_test.py"]

SOURCE_DIR = Path(os.environ.get("ADAPTERD_SOURCE_DIR", Path(__file__).resolve().parents[2]))
EXAMPLES = SOURCE_DIR / "examples"


def _binary(env: str) -> str:
    path = os.environ.get(env)
    if not path or not os.access(path, os.X_OK):
        pytest.fail(f"${env} must name the built binary (got {path!r}); run through ctest")
    return path


class AdapterdServer:
    """adapterd as a child process on free ports, over its own data dir; logs to <dir>/adapterd.log."""

    def __init__(self, directory: Path, model_dir: Path, extra_args: Optional[List[str]] = None) -> None:
        self.directory = directory
        self.model_dir = model_dir
        self.extra_args = extra_args or []
        self.log_path = directory / "adapterd.log"
        self.process: Optional[subprocess.Popen] = None
        self.port = 0

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def start(self, timeout: float = 120.0) -> "AdapterdServer":
        argv = [
            _binary("ADAPTERD_BIN"),
            "--listen", "127.0.0.1:0",
            "--metrics_listen", "127.0.0.1:0",
            "--data_dir", str(self.directory / "data"),
            "--model_dir", str(self.model_dir),
            "--threads", "1",
            "--max_queue_delay_us", "500",
            "--drain_seconds", "5",
        ] + self.extra_args
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            match = re.search(r"SERVING on port (\d+)", self.log())
            if match:
                self.port = int(match.group(1))
                return self
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"adapterd did not start:\n{self.log()}")

    def stop(self, timeout: float = 60.0) -> Optional[int]:
        """SIGTERM, then SIGKILL after ``timeout``; the exit code."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        code = self.process.returncode
        self.process = None
        return code


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random BERT, as tests/e2e/server_fixture.h makes it."""
    out = tmp_path_factory.mktemp("model") / "model"
    subprocess.run(
        [_binary("ADAPTERD_MAKE_MODEL_BIN"), "--out", str(out), "--preset", "tiny", "--seed", "5",
         "--init_range", "0.2"],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return out


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory, model_dir: Path) -> Iterator[AdapterdServer]:
    """One single-tenant server shared by the tests (they use distinct task ids)."""
    s = AdapterdServer(tmp_path_factory.mktemp("server"), model_dir).start()
    yield s
    assert s.stop() == 0, s.log()


@pytest.fixture()
def client(server: AdapterdServer) -> Iterator["object"]:
    import adapterd

    with adapterd.Client(server.target, api_key="", timeout=60) as c:
        yield c


@pytest.fixture(scope="session")
def trained(server: AdapterdServer) -> dict:
    """One task of every kind, trained once on examples/ (1 epoch, seed 7): kind flag -> task id."""
    import adapterd

    tasks = {
        "classification": ("py-sentiment", EXAMPLES / "sentiment_train.csv"),
        "multi-label": ("py-aspects", EXAMPLES / "kinds" / "aspects_train.jsonl"),
        "regression": ("py-ratings", EXAMPLES / "kinds" / "ratings_train.csv"),
        "ner": ("py-people", EXAMPLES / "kinds" / "people_train.jsonl"),
        "qa": ("py-bios", EXAMPLES / "kinds" / "biographies_train.json"),
    }
    with adapterd.Client(server.target, api_key="", timeout=120) as c:
        for kind, (task, path) in tasks.items():
            job = c.train(task, path, kind=kind, epochs=1, seed=7)
            assert job.state == adapterd.JobState.SUCCEEDED
    return {kind: task for kind, (task, _) in tasks.items()}
