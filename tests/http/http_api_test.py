"""The REST/JSON gateway (server/http) against the real adapterd binary.

Every route with a real HTTP client (http.client, one keep-alive connection
per test), every task kind, and the gRPC contract's bad inputs over HTTP:
wrong JSON, unknown fields and parameters, oversize bodies, a client that
disconnects mid-upload (nothing stored), plus the Server-Sent Events watch,
the export download and the import upload, tenancy and quotas, TLS and
mutual TLS, the drain, the metrics' protocol label, and a gRPC/HTTP parity
check: the same Predict over both gives the identical PredictResponse.

Run by ctest (tests/http/CMakeLists.txt) with Debian's python3 and pytest;
environment: ADAPTERD_BIN, MAKE_MODEL_BIN, ADAPTERD_SOURCE_DIR, and
PYTHONPATH holding the Python stubs generated from proto/ (for the gRPC
side of the parity check).
"""

import hashlib
import http.client
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import tempfile
import time

import grpc
import pytest
from google.protobuf import json_format

from adapterd.v1 import adapterd_service_pb2 as pb
from adapterd.v1 import adapterd_service_pb2_grpc as pb_grpc
from tls_certs import make_certs  # tests/testing, on PYTHONPATH

ADAPTERD = os.environ["ADAPTERD_BIN"]
MAKE_MODEL = os.environ["MAKE_MODEL_BIN"]
SOURCE = os.environ["ADAPTERD_SOURCE_DIR"]
KINDS = os.path.join(SOURCE, "examples", "kinds")


def wait_for(predicate, timeout=60.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class Server:
    """One adapterd process on free loopback ports."""

    def __init__(self, workdir, model, extra=(), name="server"):
        self.log_path = os.path.join(workdir, f"{name}.log")
        self.data = os.path.join(workdir, f"{name}-data")
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [ADAPTERD, "--listen", "127.0.0.1:0", "--metrics_listen", "127.0.0.1:0", "--http_listen",
             "127.0.0.1:0", "--data_dir", self.data, "--model_dir", model, "--threads", "1",
             "--max_queue_delay_us", "500", "--drain_seconds", "5", *extra],
            stdout=self.log, stderr=subprocess.STDOUT)
        text = wait_for(lambda: self._serving(), 60, f"{name} to serve")
        self.grpc_port = int(re.search(r"SERVING on port (\d+)", text).group(1))
        self.http_port = int(re.search(r"HTTP on port (\d+)", text).group(1))
        self.metrics_port = int(re.search(r"/metrics on port (\d+)", text).group(1))

    def _serving(self):
        if self.proc.poll() is not None:
            raise AssertionError(f"adapterd exited {self.proc.returncode}:\n{self.read_log()}")
        text = self.read_log()
        return text if "SERVING on port" in text else None

    def read_log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


class Http:
    """A keep-alive HTTP/1.1 client of one server."""

    def __init__(self, port, context=None, key=None):
        self.port, self.context, self.key = port, context, key
        self.conn = None

    def _connect(self):
        if self.context is not None:
            return http.client.HTTPSConnection("localhost", self.port, context=self.context, timeout=60)
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)

    def request(self, method, path, body=None, headers=None):
        """(status, headers, body bytes); JSON bodies are sent for dicts."""
        headers = dict(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            headers.setdefault("Content-Type", "application/json")
        elif isinstance(body, str):
            body = body.encode()
        if self.key is not None:
            headers.setdefault("Authorization", f"Bearer {self.key}")
        for attempt in range(2):
            if self.conn is None:
                self.conn = self._connect()
            try:
                self.conn.request(method, path, body=body, headers=headers)
                r = self.conn.getresponse()
                data = r.read()
                if r.getheader("Connection", "").lower() == "close":
                    self.conn.close()
                    self.conn = None
                return r.status, r, data
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.conn.close()
                self.conn = None
                if attempt == 1:
                    raise
        raise AssertionError("unreachable")

    def json(self, method, path, body=None, headers=None, expect=200):
        status, r, data = self.request(method, path, body, headers)
        assert status == expect, f"{method} {path}: {status} {data[:500]!r}"
        assert r.getheader("Content-Type") == "application/json", r.getheader("Content-Type")
        return json.loads(data)

    def error(self, method, path, body=None, headers=None, status=400, code=3):
        """Checks an error answer: the HTTP status and a google.rpc.Status body."""
        got, r, data = self.request(method, path, body, headers)
        assert got == status, f"{method} {path}: {got} (want {status}) {data[:500]!r}"
        error = json.loads(data.decode("utf-8"))  # valid UTF-8, or this raises
        assert set(error) == {"code", "message", "details"}, error
        assert error["code"] == code, error
        assert error["details"] == []
        assert "/tmp/" not in error["message"] and "/work/" not in error["message"], error
        return error["message"]

    def close(self):
        if self.conn is not None:
            self.conn.close()


def read_events(port, path, headers=None, context=None, timeout=120):
    """Reads a Server-Sent Events response to its end: [(event, id, data)]."""
    conn = (http.client.HTTPSConnection("localhost", port, context=context, timeout=timeout) if context
            else http.client.HTTPConnection("127.0.0.1", port, timeout=timeout))
    conn.request("GET", path, headers=headers or {})
    r = conn.getresponse()
    assert r.status == 200, (r.status, r.read()[:300])
    assert r.getheader("Content-Type").startswith("text/event-stream")
    events, fields = [], {}
    while True:
        line = r.readline()
        if not line:
            break
        line = line.decode("utf-8").rstrip("\n")
        if line == "":
            if fields:
                events.append((fields.get("event"), fields.get("id"), fields.get("data")))
                if fields.get("event") == "end":
                    break
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(": ")
            fields[name] = value
    conn.close()
    return events


def upload(client, path, content_type, query="", headers=None):
    with open(path, "rb") as f:
        body = f.read()
    h = {"Content-Type": content_type}
    h.update(headers or {})
    return client.json("POST", f"/v1/datasets{query}", body, h)


def train(client, task, dataset, kind=None, epochs=2, extra=None):
    body = {"taskId": task, "datasetIds": [dataset],
            "hyperparameters": {"epochs": epochs, "learningRate": 0.002, "batchSize": 16}}
    if kind:
        body["taskKind"] = kind
    body.update(extra or {})
    job = client.json("POST", "/v1/trainingJobs", body)
    assert job["jobId"].endswith("." + task)
    return job


def wait_job(client, job_id, states=("JOB_STATE_SUCCEEDED",), timeout=240):
    def done():
        job = client.json("GET", f"/v1/trainingJobs/{job_id}")
        return job if job["state"] in states + ("JOB_STATE_FAILED", "JOB_STATE_CANCELLED") else None
    job = wait_for(done, timeout, f"job {job_id}")
    assert job["state"] in states, job
    return job


@pytest.fixture(scope="module")
def work():
    with tempfile.TemporaryDirectory(prefix="http-api-test-") as d:
        yield d


@pytest.fixture(scope="module")
def model(work):
    out = os.path.join(work, "model")
    subprocess.run([MAKE_MODEL, "--out", out, "--preset", "tiny", "--seed", "5", "--init_range", "0.2"],
                   check=True, capture_output=True, timeout=300)
    return out


@pytest.fixture(scope="module")
def server(work, model):
    s = Server(work, model, name="main")
    yield s
    s.stop()


@pytest.fixture
def client(server):
    c = Http(server.http_port)
    yield c
    c.close()


@pytest.fixture(scope="module")
def trained(server):
    """One task of every kind, trained over HTTP: {kind: (task, sample request)}."""
    c = Http(server.http_port)
    sets = [
        ("TASK_KIND_SEQUENCE_CLASSIFICATION", "sentiment", os.path.join(SOURCE, "examples", "sentiment_train.csv"),
         "text/csv", {"texts": ["a wonderful, moving film", "dull and far too long"], "returnAllScores": True}),
        ("TASK_KIND_MULTI_LABEL_CLASSIFICATION", "aspects", os.path.join(KINDS, "aspects_train.jsonl"),
         "application/x-ndjson", {"texts": ["the courier lost it, the price was fair"], "threshold": 0.3}),
        ("TASK_KIND_REGRESSION", "ratings", os.path.join(KINDS, "ratings_train.csv"), "text/csv",
         {"texts": ["absolutely love it", "it broke after a week"]}),
        ("TASK_KIND_TOKEN_CLASSIFICATION", "people", os.path.join(KINDS, "people_train.jsonl"),
         "application/x-ndjson", {"texts": ["Ada Lovelace visited Paris with IBM ."]}),
        ("TASK_KIND_EXTRACTIVE_QA", "bios", os.path.join(KINDS, "biographies_train.json"), "application/json",
         {"texts": ["Where was Ada born?"], "textPairs": ["Ada was born in London and moved to Paris."],
          "topKAnswers": 2}),
    ]
    jobs = {}
    for kind, task, path, content_type, request in sets:
        dataset = upload(c, path, content_type, f"?datasetId={task}-data")
        jobs[kind] = (task, train(c, task, dataset["datasetId"], kind, epochs=3)["jobId"], request)
    for kind, (task, job_id, _) in jobs.items():
        wait_job(c, job_id)
    c.close()
    return {kind: (task, request, job_id) for kind, (task, job_id, request) in jobs.items()}


# --- Every route ---------------------------------------------------------------


def test_cross_site_requests_cannot_change_state(server, client, trained):
    """A page of another site in the operator's browser (the README's quickstart: no tenants file) can
    neither change state with fetch(no-cors, text/plain) nor read through DNS rebinding."""
    task, request, job_id = trained["TASK_KIND_SEQUENCE_CLASSIFICATION"]
    body = json.dumps(request)
    # Only the route's own content type: text/plain and a form (what a page may send without asking,
    # and what `curl -d` sends) are 415.
    for content_type in ("text/plain", "application/x-www-form-urlencoded", None):
        headers = {"Content-Type": content_type} if content_type else {}
        m = client.error("POST", f"/v1/tasks/{task}:predict", body, headers, status=415, code=3)
        assert "application/json" in m
    m = client.error("POST", f"/v1/tasks/{task}-x:import", b"bytes", {"Content-Type": "text/plain"},
                     status=415, code=3)
    assert "application/octet-stream" in m
    client.error("GET", f"/v1/tasks/{task}-x", status=404, code=5)  # nothing imported
    # A state-changing call from another origin: 403, whatever it asks; from this origin (the console), it runs.
    for origin in ("http://evil.example", "null", f"http://127.0.0.1:{client.port}.evil.example"):
        client.error("POST", f"/v1/trainingJobs/{job_id}:cancel", None, {"Origin": origin}, status=403, code=7)
        client.error("POST", f"/v1/tasks/{task}:predict", body,
                     {"Origin": origin, "Content-Type": "application/json"}, status=403, code=7)
        client.error("DELETE", f"/v1/tasks/{task}", None, {"Origin": origin}, status=403, code=7)
    assert client.json("POST", f"/v1/tasks/{task}:predict", request,
                       {"Origin": f"http://127.0.0.1:{client.port}"})["predictions"]
    assert client.json("GET", f"/v1/tasks/{task}", headers={"Origin": "http://evil.example"})  # reads: CORS' job
    # DNS rebinding: another name for 127.0.0.1 is not a Host this loopback server answers to.
    for host in ("evil.example", f"evil.example:{client.port}"):
        m = client.error("GET", "/v1/tasks", headers={"Host": host}, status=403, code=7)
        assert "--http_allowed_hosts" in m
    for host in (f"127.0.0.1:{client.port}", f"localhost:{client.port}", "LOCALHOST"):
        assert "tasks" in client.json("GET", "/v1/tasks", headers={"Host": host})
    assert client.json("GET", f"/v1/tasks/{task}")["taskId"] == task  # nothing changed


def test_datasets_upload_streamed_get_list_delete(client):
    # CSV with Content-Length, JSON Lines with chunked transfer encoding.
    d1 = upload(client, os.path.join(SOURCE, "examples", "sentiment_train.csv"), "text/csv",
                "?datasetId=sent-csv&displayName=Sentiment%20(CSV)")
    assert d1["datasetId"] == "sent-csv" and d1["displayName"] == "Sentiment (CSV)"
    assert int(d1["numExamples"]) > 100 and set(d1["labelCounts"]) == {"positive", "negative"}

    def chunks():
        with open(os.path.join(KINDS, "aspects_train.jsonl"), "rb") as f:
            while True:
                piece = f.read(777)  # records cut mid-line
                if not piece:
                    return
                yield piece

    conn = http.client.HTTPConnection("127.0.0.1", client.port, timeout=60)
    conn.request("POST", "/v1/datasets", body=chunks(), headers={"Content-Type": "application/x-ndjson"},
                 encode_chunked=True)
    r = conn.getresponse()
    d2 = json.loads(r.read())
    conn.close()
    assert r.status == 200, d2
    assert d2["datasetId"].startswith("ds-") and d2["numExamples"] == "240"

    got = client.json("GET", "/v1/datasets/sent-csv")
    assert got == d1
    ids = []
    token = ""
    for _ in range(20):  # paging, one per page
        page = client.json("GET", f"/v1/datasets?pageSize=1&pageToken={token}")
        ids += [d["datasetId"] for d in page["datasets"]]
        token = page["nextPageToken"]
        if not token:
            break
    assert "sent-csv" in ids and d2["datasetId"] in ids
    assert client.json("DELETE", f"/v1/datasets/{d2['datasetId']}") == {}
    client.error("GET", f"/v1/datasets/{d2['datasetId']}", status=404, code=5)


def test_training_job_create_get_list_watch(client):
    dataset = upload(client, os.path.join(SOURCE, "examples", "topics_train.csv"), "text/csv")
    job = train(client, "topics", dataset["datasetId"], epochs=2)
    assert job["state"] in ("JOB_STATE_VALIDATING", "JOB_STATE_QUEUED", "JOB_STATE_RUNNING")
    # The watch: updates with increasing ids, epoch metrics, and the end.
    events = read_events(client.port, f"/v1/trainingJobs/{job['jobId']}:watch")
    assert events[-1][0] == "end" and json.loads(events[-1][2]) == {"code": 0, "message": "", "details": []}
    updates = [json.loads(data) for event, _, data in events if event == "update"]
    assert updates and updates[-1]["job"]["state"] == "JOB_STATE_SUCCEEDED"
    seqs = [int(e["seq"]) for u in updates for e in u["events"]]
    assert seqs == sorted(seqs) and len(seqs) == len(set(seqs))
    ids = [int(i) for event, i, _ in events if event == "update" and i is not None]
    assert ids == sorted(ids) and ids[-1] == seqs[-1]
    metrics = [e["epochMetrics"] for u in updates for e in u["events"] if "epochMetrics" in e]
    assert [m["epoch"] for m in metrics] == [1, 2]
    # Resuming after a seq (Last-Event-ID, as EventSource sends it) repeats nothing.
    again = read_events(client.port, f"/v1/trainingJobs/{job['jobId']}:watch",
                        headers={"Last-Event-ID": str(seqs[2])})
    resumed = [int(e["seq"]) for event, _, data in again if event == "update" for e in json.loads(data)["events"]]
    assert resumed == seqs[3:]
    # After the largest seq (2^63 - 1, where after_seq + 1 would overflow): the snapshot, no events,
    # and the end.
    for resume in ({"Last-Event-ID": str(2**63 - 1)}, None):
        path = f"/v1/trainingJobs/{job['jobId']}:watch" + ("" if resume else f"?afterSeq={2**63 - 1}")
        last = read_events(client.port, path, headers=resume, timeout=30)
        assert [event for event, _, _ in last] == ["update", "end"], last[:3]
        assert not json.loads(last[0][2]).get("events"), last[0]
        assert json.loads(last[-1][2])["code"] == 0
    assert client.json("GET", f"/v1/trainingJobs/{job['jobId']}")["state"] == "JOB_STATE_SUCCEEDED"
    listed = client.json("GET", "/v1/trainingJobs?taskId=topics&state=JOB_STATE_SUCCEEDED")
    assert [j["jobId"] for j in listed["jobs"]] == [job["jobId"]]
    assert client.json("GET", "/v1/trainingJobs?state=JOB_STATE_FAILED")["jobs"] == []


def test_cancel_a_running_job(client):
    dataset = upload(client, os.path.join(SOURCE, "examples", "sentiment_train.csv"), "text/csv")
    job = train(client, "to-cancel", dataset["datasetId"], epochs=50)
    wait_for(lambda: client.json("GET", f"/v1/trainingJobs/{job['jobId']}")["state"] == "JOB_STATE_RUNNING", 120,
             "the job to run")
    cancelled = client.json("POST", f"/v1/trainingJobs/{job['jobId']}:cancel")
    assert cancelled["state"] in ("JOB_STATE_CANCELLING", "JOB_STATE_CANCELLED")
    wait_job(client, job["jobId"], states=("JOB_STATE_CANCELLED",))


def test_every_kind_predicts_exports_imports_and_deletes(client, trained):
    for kind, (task, request, _) in trained.items():
        t = client.json("GET", f"/v1/tasks/{task}")
        assert t["taskKind"] == kind and t["state"] == "TASK_STATE_READY"
        p = client.json("POST", f"/v1/tasks/{task}:predict", request)
        assert p["taskKind"] == kind and len(p["predictions"]) == len(request["texts"])
        first = p["predictions"][0]
        if kind == "TASK_KIND_SEQUENCE_CLASSIFICATION":
            assert first["label"] in ("positive", "negative") and len(first["allScores"]) == 2
        elif kind == "TASK_KIND_MULTI_LABEL_CLASSIFICATION":
            assert all(s["score"] >= 0.3 for s in first["labels"])
        elif kind == "TASK_KIND_REGRESSION":
            assert isinstance(first["value"], (int, float))
        elif kind == "TASK_KIND_TOKEN_CLASSIFICATION":
            text = list(request["texts"][0])
            for e in first["entities"]:
                assert "".join(text[e["start"]:e["end"]]) == e["text"]
        else:
            context = list(request["textPairs"][0])
            assert 1 <= len(first["answers"]) <= 2
            for a in first["answers"]:
                assert "".join(context[a["start"]:a["end"]]) == a["text"]

        # Export as a download, import under a new id: the same predictions.
        status, r, blob = client.request("GET", f"/v1/tasks/{task}:export")
        assert status == 200 and r.getheader("Content-Type") == "application/octet-stream"
        assert int(r.getheader("Content-Length")) == len(blob) > 0
        assert r.getheader("Content-Disposition") == f'attachment; filename="{task}-v1.adapter"'
        assert r.getheader("X-Adapterd-Version") == "1"
        imported = client.json("POST", f"/v1/tasks/{task}-copy:import", blob,
                               {"Content-Type": "application/octet-stream"})
        assert imported["taskId"] == f"{task}-copy" and imported["taskKind"] == kind
        assert client.json("POST", f"/v1/tasks/{task}-copy:predict", request)["predictions"] == p["predictions"]
        assert client.json("DELETE", f"/v1/tasks/{task}-copy") == {}
        client.error("POST", f"/v1/tasks/{task}-copy:predict", request, status=404, code=5)

    listed, token = [], ""
    for _ in range(20):
        page = client.json("GET", f"/v1/tasks?pageSize=2&pageToken={token}")
        listed += [t["taskId"] for t in page["tasks"]]
        token = page["nextPageToken"]
        if not token:
            break
    assert set(task for task, _, _ in trained.values()) <= set(listed)


def test_each_kinds_best_epoch_is_chosen_by_its_own_metric(client, trained):
    metric = {"TASK_KIND_SEQUENCE_CLASSIFICATION": "valAccuracy", "TASK_KIND_MULTI_LABEL_CLASSIFICATION": "microF1",
              "TASK_KIND_REGRESSION": "spearman", "TASK_KIND_TOKEN_CLASSIFICATION": "f1",
              "TASK_KIND_EXTRACTIVE_QA": "f1"}
    for kind, (task, _, job_id) in trained.items():
        events = read_events(client.port, f"/v1/trainingJobs/{job_id}:watch")
        updates = [json.loads(data) for event, _, data in events if event == "update"]
        epochs = [e["epochMetrics"] for u in updates for e in u["events"] if "epochMetrics" in e]
        assert [m["epoch"] for m in epochs] == [1, 2, 3], kind
        best = epochs[0]
        for m in epochs[1:]:
            if (m[metric[kind]], -m["valLoss"]) > (best[metric[kind]], -best["valLoss"]):
                best = m  # the kind's metric, ties to the lower validation loss
        assert updates[-1]["job"]["bestMetrics"] == best, kind
        # Progress events between epochs carry the mean loss of their steps.
        losses = [float(e["progress"]["trainLoss"]) for u in updates for e in u["events"] if "progress" in e]
        assert losses and all(loss > 0 for loss in losses), (kind, losses)


def test_grpc_and_http_give_identical_predictions(server, client, trained):
    channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}")
    stub = pb_grpc.AdapterdStub(channel)
    for kind, (task, request, _) in trained.items():
        http_response = json_format.Parse(
            json.dumps(client.json("POST", f"/v1/tasks/{task}:predict", request)), pb.PredictResponse())
        grpc_request = json_format.Parse(json.dumps(request), pb.PredictRequest())
        grpc_request.task_id = task
        grpc_response = stub.Predict(grpc_request, metadata=[("x-task-id", task)], timeout=60)
        assert http_response == grpc_response, kind  # every field, every float bit
    channel.close()


def test_health_and_console(client):
    assert client.json("GET", "/healthz") == {"status": "SERVING"}
    status, r, page = client.request("GET", "/")
    assert status == 200 and r.getheader("Content-Type") == "text/html; charset=utf-8"
    assert "default-src 'self'" in r.getheader("Content-Security-Policy")
    for src in re.findall(rb'(?:src|href)="(/console/[^"]+)"', page):
        status, r, _ = client.request("GET", src.decode())
        assert status == 200, src
    client.error("GET", "/console/nosuch.js", status=404, code=5)
    client.error("GET", "/console/..%2Fhttp_gateway.cc", status=404, code=5)


def test_head_answers_as_get_without_the_body(client, trained):
    task, _, _ = trained["TASK_KIND_SEQUENCE_CLASSIFICATION"]
    for path in ("/healthz", "/", "/v1/tasks", f"/v1/tasks/{task}", f"/v1/tasks/{task}:export", "/v1/datasets"):
        got, r, body = client.request("GET", path)
        status, head, nothing = client.request("HEAD", path)
        assert (status, nothing) == (got, b""), path
        for header in ("Content-Type", "Content-Disposition", "X-Adapterd-Version"):
            assert head.getheader(header) == r.getheader(header), (path, header)
        if path.endswith(":export"):  # the size of the download, without downloading it
            assert int(head.getheader("Content-Length")) == len(body) > 0
    status, head, nothing = client.request("HEAD", "/v1/tasks/nosuch")
    assert (status, nothing) == (404, b"")
    status, head, _ = client.request("HEAD", f"/v1/tasks/{task}:predict")
    assert status == 405 and head.getheader("Allow") == "POST"
    # The server still serves on the same connection.
    assert client.json("GET", f"/v1/tasks/{task}")["taskId"] == task


# --- Bad input -------------------------------------------------------------------


def test_bad_requests_are_google_rpc_statuses(client, trained):
    task, request, _ = trained["TASK_KIND_SEQUENCE_CLASSIFICATION"]
    m = client.error("POST", f"/v1/tasks/{task}:predict", '{"texts": ["a"', {"Content-Type": "application/json"})
    assert "invalid JSON body" in m
    m = client.error("POST", f"/v1/tasks/{task}:predict", {"txts": ["a"]})
    assert "txts" in m
    client.error("POST", f"/v1/tasks/{task}:predict", {"texts": ["a"], "topKAnswers": "many"})
    client.error("POST", f"/v1/tasks/{task}:predict", {"texts": [{"a": 1}]})
    client.error("POST", f"/v1/tasks/{task}:predict", b'{"texts": ["\xff"]}', {"Content-Type": "application/json"})
    m = client.error("POST", f"/v1/tasks/{task}:predict", {"texts": []})  # the service's own check
    m = client.error("POST", f"/v1/tasks/{task}:predict", {"taskId": "other", "texts": ["a"]})
    assert "in the body but" in m
    m = client.error("GET", "/v1/tasks?pageSise=2")
    assert "unknown parameter 'pageSise'" in m
    client.error("GET", "/v1/tasks?pageSize=two")
    client.error("GET", "/v1/tasks/bad%20id")  # the id's alphabet: the service's check
    # A percent-encoded NUL does not end the path: the id with it is refused, not the id before it.
    m = client.error("POST", f"/v1/tasks/{task}%00evil:predict", request)
    assert "task_id" in m
    client.error("GET", f"/v1/tasks/{task}%00evil")
    # A scalar where the API takes an array, and nesting past 32 levels.
    m = client.error("POST", f"/v1/tasks/{task}:predict", {"texts": "a"})
    assert "'texts' must be an array" in m
    m = client.error("POST", f"/v1/tasks/{task}:predict", '{"texts": ' + "[" * 100000 + "]" * 100000 + "}",
                     {"Content-Type": "application/json"})
    assert "nested deeper than 32" in m
    client.error("GET", "/v1/tasks", headers={"Grpc-Timeout": "soon"})
    # A deadline no call can meet: DEADLINE_EXCEEDED, 504, every time (the gateway refuses a deadline
    # already past rather than racing the call with it).
    for _ in range(20):
        m = client.error("POST", f"/v1/tasks/{task}:predict", request, {"Grpc-Timeout": "1n"}, status=504, code=4)
        assert "passed before the call was made" in m
    assert client.json("GET", "/v1/tasks", headers={"Grpc-Timeout": "30S"})["tasks"]
    client.error("POST", "/v1/tasks/nosuch:predict", {"texts": ["a"]}, status=404, code=5)
    client.error("GET", "/v1/trainingJobs/job-0000000000000000000:watch", status=404, code=5)
    client.error("GET", "/v1/tasks/nosuch:export", status=404, code=5)
    m = client.error("GET", "/v1/nosuch", status=404, code=5)
    assert m.startswith("no route for GET /v1/nosuch")
    status, r, _ = client.request("PUT", f"/v1/tasks/{task}")
    assert status == 405 and r.getheader("Allow") == "GET, HEAD, DELETE"
    client.error("GET", f"/v1/tasks/{task}", b"a body", {"Content-Type": "text/plain"})
    m = client.error("POST", "/v1/datasets", "text,label\na,b\n", {"Content-Type": "text/plain"})
    assert "Content-Type" in m
    # The server still serves.
    assert client.json("POST", f"/v1/tasks/{task}:predict", request)["predictions"]


def test_bad_datasets_store_nothing(client):
    before = client.json("GET", "/v1/datasets?pageSize=1000")["datasets"]
    m = client.error("POST", "/v1/datasets?datasetId=bad1", "text,label\na,x\nb\n", {"Content-Type": "text/csv"})
    assert m.startswith("request body: line 3: expected 2 fields")
    m = client.error("POST", "/v1/datasets?datasetId=bad2", '{"text": "a", "label": "x"}\n{"text": 5}\n',
                     {"Content-Type": "application/x-ndjson"})
    assert m.startswith("request body: line 2:")
    client.error("POST", "/v1/datasets?datasetId=bad3", "", {"Content-Type": "text/csv"})
    client.error("POST", "/v1/datasets?datasetId=bad4", '{"data": [{"paragraphs": 1}]}',
                 {"Content-Type": "application/json"})
    client.error("POST", "/v1/datasets?nosuch=1", "text,label\na,x\n", {"Content-Type": "text/csv"})
    # A failure after the first examples were sent (line 20000): the stream is cancelled.
    big = "text,label\n" + "".join(f"text {i},x\n" for i in range(20000)) + "a,b,c\n"
    m = client.error("POST", "/v1/datasets?datasetId=bad5", big, {"Content-Type": "text/csv"})
    assert "line 20002" in m
    assert client.json("GET", "/v1/datasets?pageSize=1000")["datasets"] == before


def post_declared_oversize(port, path):
    """POSTs the start of a body whose Content-Length is over --max_message_bytes (16 MiB); the answer's bytes.

    Such a body is answered at once, before the body (as a client sending `Expect: 100-continue` sees it).
    """
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              f"Content-Length: {17 << 20}\r\n\r\n".encode() + b'{"texts": ["xxxx')
    answer = b""
    while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
        piece = s.recv(65536)
        if not piece:
            break
        answer += piece
    s.close()
    return answer


def test_oversize_bodies_are_413(client, trained):
    task, _, _ = trained["TASK_KIND_SEQUENCE_CLASSIFICATION"]
    answer = post_declared_oversize(client.port, f"/v1/tasks/{task}:predict")
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["code"] == 8

    def pieces():  # the same without a Content-Length: refused while it arrives
        yield b'{"texts": ["'
        for _ in range(20):
            yield b"x" * (1 << 20)
        yield b'"]}'

    conn = http.client.HTTPConnection("127.0.0.1", client.port, timeout=60)
    try:
        conn.request("POST", f"/v1/tasks/{task}:predict", body=pieces(), encode_chunked=True,
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        assert r.status == 413 and json.loads(r.read())["code"] == 8
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server answered and closed while the body was still arriving
    conn.close()
    # An import declared larger than the server imports: 413 from the headers, the body unread.
    c = raw_request(client.port, f"POST /v1/tasks/{task}-big:import HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                 f"Content-Type: application/octet-stream\r\nContent-Length: {600 << 20}\r\n")
    head, body = read_answer(c)
    c.close()
    assert head.startswith(b"HTTP/1.1 413 "), head
    assert "imports at most" in json.loads(body)["message"]
    # A record over the streaming parser's bound.
    m = client.error("POST", "/v1/datasets", "text,label\n" + "y" * (2 << 20) + ",x\n", {"Content-Type": "text/csv"})
    assert "longer than" in m


def test_a_client_that_disconnects_mid_upload_stores_nothing(server, client):
    before = client.json("GET", "/v1/datasets?pageSize=1000")["datasets"]
    body = ("text,label\n" + "".join(f"an example text number {i},x\n" for i in range(40000))).encode()
    s = socket.create_connection(("127.0.0.1", server.http_port))
    s.sendall(b"POST /v1/datasets?datasetId=half HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/csv\r\n"
              + f"Content-Length: {len(body)}\r\n\r\n".encode() + body[: len(body) // 2])
    time.sleep(0.5)
    s.close()
    wait_for(lambda: metric(server, "adapterd_requests_total", 'method="UploadDataset"', 'code="CANCELLED"',
                            'protocol="http"') >= 1, 30, "the cancelled upload")
    assert client.json("GET", "/v1/datasets?pageSize=1000")["datasets"] == before
    client.error("GET", "/v1/datasets/half", status=404, code=5)


# --- The same core as gRPC -------------------------------------------------------


def metric(server, name, *labels):
    conn = http.client.HTTPConnection("127.0.0.1", server.metrics_port, timeout=10)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") and all(label in line for label in labels):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_metrics_are_labelled_by_protocol(server, client, trained):
    task, request, _ = trained["TASK_KIND_SEQUENCE_CLASSIFICATION"]
    before_http = metric(server, "adapterd_requests_total", 'method="Predict"', 'code="OK"', 'protocol="http"')
    before_grpc = metric(server, "adapterd_requests_total", 'method="Predict"', 'code="OK"', 'protocol="grpc"')
    for _ in range(3):
        client.json("POST", f"/v1/tasks/{task}:predict", request)
    client.error("POST", "/v1/tasks/nosuch:predict", {"texts": ["a"]}, status=404, code=5)
    assert metric(server, "adapterd_requests_total", 'method="Predict"', 'code="OK"',
                  'protocol="http"') == before_http + 3
    assert metric(server, "adapterd_requests_total", 'method="Predict"', 'code="OK"',
                  'protocol="grpc"') == before_grpc
    assert metric(server, "adapterd_requests_total", 'method="Predict"', 'code="NOT_FOUND"', 'protocol="http"') >= 1


def test_requests_the_gateway_refuses_itself_are_counted_once(server, client, trained):
    task, request, _ = trained["TASK_KIND_SEQUENCE_CLASSIFICATION"]
    http = ('protocol="http"',)
    unauthenticated = ('tenant="unauthenticated"',)  # refused before authentication: no tenant
    watched = {
        "bad JSON": ('method="Predict"', 'code="INVALID_ARGUMENT"') + http + unauthenticated,
        "too large": ('method="Predict"', 'code="RESOURCE_EXHAUSTED"') + http + unauthenticated,
        "bad parameter": ('method="ListTasks"', 'code="INVALID_ARGUMENT"') + http + unauthenticated,
        "no route": ('method="none"', 'code="NOT_FOUND"') + http + unauthenticated,
        "wrong method": ('method="none"', 'code="UNIMPLEMENTED"') + http + unauthenticated,
        "not found by the service": ('method="Predict"', 'code="NOT_FOUND"') + http,
        "every http call": http,
        "timed": ('method="Predict"',) + http + unauthenticated,
    }

    def counts():
        c = {what: metric(server, "adapterd_requests_total", *labels) for what, labels in watched.items()}
        c["timed"] = metric(server, "adapterd_request_duration_seconds_count", *watched["timed"])
        return c

    before = counts()
    # The console and /healthz are not API calls: not counted.
    client.request("GET", "/")
    client.request("GET", "/healthz")
    assert counts() == before
    client.error("POST", f"/v1/tasks/{task}:predict", "{not json", {"Content-Type": "application/json"})
    assert post_declared_oversize(client.port, f"/v1/tasks/{task}:predict").startswith(b"HTTP/1.1 413 ")
    client.error("GET", "/v1/tasks?pageSise=2")
    client.error("GET", "/v1/nosuch", status=404, code=5)
    status, _, _ = client.request("PUT", f"/v1/tasks/{task}")
    assert status == 405
    client.error("POST", "/v1/tasks/nosuch:predict", request, status=404, code=5)  # reaches gRPC: counted there
    after = counts()
    assert {what: after[what] - before[what] for what in watched} == {
        "bad JSON": 1, "too large": 1, "bad parameter": 1, "no route": 1, "wrong method": 1,
        "not found by the service": 1, "every http call": 6, "timed": 2,
    }


def raw_request(port, head, body=b""):
    """A socket that sent `head` (the request line and headers, CRLF-terminated) and `body`."""
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    s.sendall(f"{head}\r\n".encode() + body)
    return s


def read_answer(s):
    """(status line and headers, body) of one answer on `s`; (b"", b"") when it is closed unanswered."""
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            piece = s.recv(65536)
            if not piece:
                return data, b""
            data += piece
        head, _, body = data.partition(b"\r\n\r\n")
        length = re.search(rb"(?i)content-length: *(\d+)", head)
        while length and len(body) < int(length.group(1)):
            piece = s.recv(65536)
            if not piece:
                break
            body += piece
        return head, body
    except ConnectionResetError:
        return data, b""


def closed_by_server(s, timeout=10):
    """Whether the server closed `s` (the end of its input) within `timeout` seconds."""
    s.settimeout(timeout)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def test_admission_bounds_what_connections_hold(work, model):
    """The REST gateway's admission (docs/API.md, "Limits"), each bound at N and N+1 where it has one:
    authentication before the body, the server-wide body budget, the body deadline, and eviction of
    idle connections at --http_max_connections."""
    tenants, key = write_tenants(work, {})
    s = Server(work, model, ["--tenants_file", tenants, "--http_max_buffered_bytes", "1000",
                             "--http_body_timeout_seconds", "2", "--http_max_connections", "4"], name="admission")
    auth = f"Authorization: Bearer {key}\r\n"

    def predict_head(length, authorization=auth):
        return (f"POST /v1/tasks/t:predict HTTP/1.1\r\nHost: 127.0.0.1\r\n{authorization}"
                f"Content-Type: application/json\r\nContent-Length: {length}\r\n")

    def body_of(size):  # a JSON body of exactly `size` bytes
        body = json.dumps({"texts": ["a"]}).encode()
        return body[:-1] + b" " * (size - len(body)) + b"}"

    def used():
        return metric(s, "adapterd_admission_used", 'budget="http_request_bodies"')

    try:
        # Without a key, a 16 MiB body announced and never sent: 401 from the headers, the body unread.
        c = raw_request(s.http_port, predict_head(16 << 20, authorization=""))
        head, body = read_answer(c)
        c.close()
        assert head.startswith(b"HTTP/1.1 401 "), head
        assert json.loads(body)["code"] == 16
        # The body budget (1,000 bytes here) at N and N+1: a body of exactly the budget reaches the
        # service (NOT_FOUND: task t does not exist); one byte more is 503 at the headers.
        # An answered body's reservation is given back before the answer is sent: a client that sends
        # its next request on reading an answer finds the whole budget free (20 in a row, no pause).
        refusals = metric(s, "adapterd_admission_refusals_total", 'budget="http_request_bodies"')
        for _ in range(20):
            c = raw_request(s.http_port, predict_head(1000), body_of(1000))
            head, body = read_answer(c)
            c.close()
            assert head.startswith(b"HTTP/1.1 404 "), (head, body)
        assert used() == 0
        c = raw_request(s.http_port, predict_head(1001))
        head, body = read_answer(c)
        c.close()
        assert head.startswith(b"HTTP/1.1 503 "), head
        assert json.loads(body)["code"] == 8 and "--http_max_buffered_bytes" in json.loads(body)["message"]
        # A stalled body holds its reservation; the budget is shared by every connection.
        holder = raw_request(s.http_port, predict_head(600))
        wait_for(lambda: used() == 600, 10, "the stalled body's reservation")
        c = raw_request(s.http_port, predict_head(600), body_of(600))
        head, _ = read_answer(c)
        c.close()
        assert head.startswith(b"HTTP/1.1 503 "), head
        holder.close()
        wait_for(lambda: used() == 0, 10, "the reservation to be given back")
        c = raw_request(s.http_port, predict_head(600), body_of(600))
        head, _ = read_answer(c)
        c.close()
        assert head.startswith(b"HTTP/1.1 404 "), head
        assert metric(s, "adapterd_admission_refusals_total", 'budget="http_request_bodies"') == refusals + 2
        assert metric(s, "adapterd_admission_limit", 'budget="http_request_bodies"') == 1000

        # A body still arriving after --http_body_timeout_seconds (2) is cut off: a trickle cannot hold
        # a connection for as long as it likes.
        c = raw_request(s.http_port, predict_head(100), b'{"texts": ["')
        time.sleep(2.5)
        try:
            c.sendall(b"x")
        except OSError:
            pass
        assert closed_by_server(c), "a body that took longer than the deadline kept its connection"
        c.close()

        # At --http_max_connections (4), a new connection evicts the one idle longest: a client that
        # opens 4 connections and sends nothing cannot lock other clients out.
        time.sleep(0.5)  # the connections above are gone on the server's side too
        idle = []
        for _ in range(4):
            idle.append(socket.create_connection(("127.0.0.1", s.http_port), timeout=20))
            time.sleep(0.05)
        fresh = Http(s.http_port)
        assert fresh.json("GET", "/healthz") == {"status": "SERVING"}
        fresh.close()
        assert closed_by_server(idle[0]), "the connection idle longest was not evicted"
        for c in idle:
            c.close()
    finally:
        s.stop()


def test_connections_per_address_at_n_and_n_plus_one(work, model):
    """--http_max_connections_per_ip at N and N+1: N connections from one address are served, the
    next is closed without an answer while they stay open, and one closing makes room again."""
    s = Server(work, model, ["--http_max_connections_per_ip", "2"], name="per_ip")
    try:
        held = [socket.create_connection(("127.0.0.1", s.http_port), timeout=20) for _ in range(2)]
        for c in held:  # both are served (N)
            c.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            head, body = read_answer(c)
            assert head.startswith(b"HTTP/1.1 200 "), head
        extra = socket.create_connection(("127.0.0.1", s.http_port), timeout=20)  # N + 1
        try:
            extra.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            head, _ = read_answer(extra)
        except OSError:  # closed before the request was sent
            head = b""
        extra.close()
        assert head == b"", head
        held[0].close()
        time.sleep(0.5)  # the server sees the close
        fresh = Http(s.http_port)
        assert fresh.json("GET", "/healthz") == {"status": "SERVING"}
        fresh.close()
        held[1].close()
    finally:
        s.stop()


def write_tenants(work, quotas):
    key = "http-test-key-0123456789"
    path = os.path.join(work, "tenants.json")
    with open(path, "w") as f:
        json.dump({"tenants": [dict(id="acme", api_key_sha256=hashlib.sha256(key.encode()).hexdigest(),
                                    **quotas)]}, f)
    os.chmod(path, 0o600)
    return path, key


def test_tenancy_quotas_and_the_drain(work, model):
    tenants, key = write_tenants(work, {"max_texts_per_predict": 2, "max_dataset_bytes": 8192})
    s = Server(work, model, ["--tenants_file", tenants], name="tenants")
    try:
        anonymous, wrong, acme = Http(s.http_port), Http(s.http_port, key="wrong-key"), Http(s.http_port, key=key)
        anonymous.error("GET", "/v1/tasks", status=401, code=16)
        wrong.error("GET", "/v1/tasks", status=401, code=16)
        assert acme.json("GET", "/v1/tasks") == {"tasks": [], "nextPageToken": ""}
        # Quotas: the dataset size (streamed upload refused), texts per Predict.
        big = "text,label\n" + "".join(f"example number {i},x\n" for i in range(600))
        m = acme.error("POST", "/v1/datasets?datasetId=big", big, {"Content-Type": "text/csv"}, status=429, code=8)
        acme.error("GET", "/v1/datasets/big", status=404, code=5)
        with open(os.path.join(SOURCE, "examples", "sentiment_train.csv")) as f:
            small = "".join(f.readlines()[:60])
        d = acme.json("POST", "/v1/datasets", small, {"Content-Type": "text/csv"})
        job = acme.json("POST", "/v1/trainingJobs", {"taskId": "t", "datasetIds": [d["datasetId"]],
                                                     "hyperparameters": {"epochs": 1}})
        wait_job(acme, job["jobId"])
        acme.error("POST", "/v1/tasks/t:predict", {"texts": ["a", "b", "c"]}, status=429, code=8)
        assert len(acme.json("POST", "/v1/tasks/t:predict", {"texts": ["a", "b"]})["predictions"]) == 2

        # The drain: an open watch ends with UNAVAILABLE, /healthz and new calls
        # fail, and the process exits.
        long = acme.json("POST", "/v1/trainingJobs", {"taskId": "long", "datasetIds": [d["datasetId"]],
                                                      "hyperparameters": {"epochs": 500}})
        conn = http.client.HTTPConnection("127.0.0.1", s.http_port, timeout=60)
        conn.request("GET", f"/v1/trainingJobs/{long['jobId']}:watch", headers={"Authorization": f"Bearer {key}"})
        r = conn.getresponse()
        assert r.status == 200
        assert r.readline().startswith(b"event: update")
        s.proc.send_signal(signal.SIGTERM)
        rest = r.read().decode()
        conn.close()
        end = rest[rest.rindex("event: end"):]
        assert json.loads(end.split("data: ", 1)[1])["code"] == 14, end
        assert s.proc.wait(30) == 0
    finally:
        s.stop()


# --- TLS ------------------------------------------------------------------------------


def test_tls_and_mutual_tls(work, model):
    certs = os.path.join(work, "certs")
    os.makedirs(certs)
    make_certs(certs)
    tls = ["--tls_cert_file", f"{certs}/server.crt", "--tls_key_file", f"{certs}/server.key"]
    s = Server(work, model, tls, name="tls")
    try:
        context = ssl.create_default_context(cafile=f"{certs}/ca.crt")
        assert Http(s.http_port, context).json("GET", "/v1/tasks") == {"tasks": [], "nextPageToken": ""}
        plain = http.client.HTTPConnection("127.0.0.1", s.http_port, timeout=10)
        with pytest.raises((http.client.HTTPException, ConnectionError, OSError)):
            plain.request("GET", "/v1/tasks")
            plain.getresponse().read()
    finally:
        s.stop()
    s = Server(work, model, tls + ["--tls_client_ca_file", f"{certs}/ca.crt"], name="mtls")
    try:
        anonymous = ssl.create_default_context(cafile=f"{certs}/ca.crt")
        try:
            Http(s.http_port, anonymous).error("GET", "/v1/tasks", status=401, code=16)
        except (ssl.SSLError, ConnectionError):
            pass  # refused in the handshake: as good
        with_cert = ssl.create_default_context(cafile=f"{certs}/ca.crt")
        with_cert.load_cert_chain(f"{certs}/client.crt", f"{certs}/client.key")
        assert Http(s.http_port, with_cert).json("GET", "/healthz") == {"status": "SERVING"}
        assert Http(s.http_port, with_cert).json("GET", "/v1/tasks")["tasks"] == []
        # A certificate the CA signed for servers only (extendedKeyUsage serverAuth): refused, as the gRPC
        # port refuses it (HTTP took it).
        server_only = ssl.create_default_context(cafile=f"{certs}/ca.crt")
        server_only.load_cert_chain(f"{certs}/serveronly.crt", f"{certs}/serveronly.key")
        try:
            Http(s.http_port, server_only).error("GET", "/v1/tasks", status=401, code=16)
        except (ssl.SSLError, ConnectionError):
            pass  # refused in the handshake: as good
    finally:
        s.stop()
