"""Retries, metadata and watch re-subscription against an in-process gRPC server that fails on purpose.

The server counts the attempts it sees: gRPC retries a unary call within one
call of the stub (the client's service config), the client restarts streams.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent import futures
from typing import Any, Callable, Dict, List, Tuple

import grpc
import pytest

import adapterd
from adapterd import _health
from adapterd._retry import GRPC_MAX_ATTEMPTS, RETRIED_UNARY_METHODS, service_config
from adapterd._stubs import pb, pb_grpc
from free_port import free_port  # tests/testing, on PYTHONPATH

JOB_ID = "job-0123456789abcdef012.fake-task"


class FakeAdapterd(pb_grpc.AdapterdServicer):
    """Records every call's metadata; fails the first ``fail[method]`` calls UNAVAILABLE.

    ``break_exports``: that many ExportAdapter streams end UNAVAILABLE after their first chunk.
    """

    def __init__(self) -> None:
        self.calls: List[Tuple[str, Dict[str, str], object]] = []
        self.fail: Dict[str, int] = {}
        self.break_exports = 0
        self.lock = threading.Lock()
        self.final_state = pb.JOB_STATE_FAILED

    def _enter(self, method: str, request: object, context: grpc.ServicerContext) -> None:
        with self.lock:
            self.calls.append((method, dict(context.invocation_metadata()), request))
            if self.fail.get(method, 0) > 0:
                self.fail[method] -= 1
                context.abort(grpc.StatusCode.UNAVAILABLE, "draining (fake)")

    def calls_of(self, method: str) -> List[Tuple[Dict[str, str], object]]:
        return [(md, r) for m, md, r in self.calls if m == method]

    def GetTask(self, request, context):
        self._enter("GetTask", request, context)
        return pb.Task(task_id=request.task_id, task_kind=pb.TASK_KIND_REGRESSION)

    def GetTrainingJob(self, request, context):
        self._enter("GetTrainingJob", request, context)
        return pb.TrainingJob(job_id=request.job_id, task_id="fake-task", state=self.final_state)

    def UploadDataset(self, request_iterator, context):
        ended = threading.Event()
        context.add_callback(ended.set)
        requests = list(request_iterator)
        # gRPC Python can end this iterator for a client that cancelled
        # before it reports the cancellation. Only a cancellation ends a call
        # while its handler still runs: a moment's wait tells the two apart,
        # and a cancelled stream is not counted as one the server completed.
        if ended.wait(0.5) or not context.is_active():
            return pb.Dataset()
        self._enter("UploadDataset", requests, context)
        # Examples are counted; a file's lines (dict rows come as JSON Lines) stand in for the
        # server's reader, which this fake does not have.
        lines = b"".join(r.file_bytes for r in requests[1:]).count(b"\n")
        return pb.Dataset(dataset_id="ds-x", num_examples=sum(len(r.chunk.examples) for r in requests[1:]) + lines)

    def ExportAdapter(self, request, context):
        self._enter("ExportAdapter", request, context)
        yield pb.ExportAdapterResponse(version=3, total_bytes=4, chunk=b"ab")
        with self.lock:
            broken = self.break_exports > 0
            self.break_exports -= broken
        if broken:
            context.abort(grpc.StatusCode.UNAVAILABLE, "server shutting down (fake)")
        yield pb.ExportAdapterResponse(chunk=b"cd")

    def CreateTrainingJob(self, request, context):
        self._enter("CreateTrainingJob", request, context)
        return pb.TrainingJob(job_id=JOB_ID, task_id=request.task_id, state=pb.JOB_STATE_QUEUED)

    def ListTasks(self, request, context):
        self._enter("ListTasks", request, context)
        start = int(request.page_token or 0)
        ids = [f"t{i}" for i in range(7)][start:start + request.page_size]
        following = start + request.page_size
        return pb.ListTasksResponse(
            tasks=[pb.Task(task_id=t) for t in ids], next_page_token=str(following) if following < 7 else ""
        )

    def WatchTrainingJob(self, request, context):
        self._enter("WatchTrainingJob", request, context)
        job = pb.TrainingJob(job_id=request.job_id, task_id="fake-task", state=pb.JOB_STATE_RUNNING)

        def event(seq: int, to: int) -> pb.JobEvent:
            e = pb.JobEvent(seq=seq, time_micros=1_000_000 * seq)
            e.state_change.to = to
            return e

        if request.after_seq == 0:
            # The snapshot, then the stream breaks as a draining server's does.
            yield pb.WatchTrainingJobResponse(
                job=job, events=[event(1, pb.JOB_STATE_QUEUED), event(2, pb.JOB_STATE_RUNNING)]
            )
            context.abort(grpc.StatusCode.UNAVAILABLE, "server shutting down (fake)")
        job.state = self.final_state
        job.error_message = "disk full (fake)"
        # A re-subscription repeats seq 2 (as if it raced) and ends the job.
        yield pb.WatchTrainingJobResponse(job=job, events=[event(2, pb.JOB_STATE_RUNNING), event(3, self.final_state)])


def health_handler(servicer: FakeAdapterd) -> grpc.GenericRpcHandler:
    """grpc.health.v1.Health/Check: SERVING, failing like the servicer's methods ("Health")."""

    def check(request: Any, context: grpc.ServicerContext) -> Any:
        servicer._enter("Health", request, context)
        return _health.HealthCheckResponse(status=_health.ServingStatus.SERVING)

    return grpc.method_handlers_generic_handler(
        "grpc.health.v1.Health",
        {
            "Check": grpc.unary_unary_rpc_method_handler(
                check,
                request_deserializer=_health.HealthCheckRequest.FromString,
                response_serializer=_health.HealthCheckResponse.SerializeToString,
            )
        },
    )


def start_fake(port: int = 0) -> Tuple[grpc.Server, FakeAdapterd, int]:
    servicer = FakeAdapterd()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pb_grpc.add_AdapterdServicer_to_server(servicer, server)
    server.add_generic_rpc_handlers((health_handler(servicer),))
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    return server, servicer, bound


@pytest.fixture()
def fake():
    server, servicer, port = start_fake()
    fast = adapterd.RetryPolicy(max_attempts=4, initial_backoff=0.01, max_backoff=0.05)
    with adapterd.Client(f"127.0.0.1:{port}", api_key="s3cret", retries=fast, timeout=10) as client:
        yield servicer, client
    server.stop(None)


def count_stub_calls(client: adapterd.Client, method: str) -> List[int]:
    """Wraps the client's stub method; the list's one element counts its calls."""
    count = [0]
    inner: Callable[..., Any] = getattr(client._stub, method)

    def counted(*args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return inner(*args, **kwargs)

    setattr(client._stub, method, counted)
    return count


def test_idempotent_call_retried_on_unavailable_with_metadata(fake):
    servicer, client = fake
    servicer.fail["GetTask"] = 2
    stub_calls = count_stub_calls(client, "GetTask")
    task = client.get_task("my-task")
    assert task.kind == adapterd.TaskKind.REGRESSION
    calls = servicer.calls_of("GetTask")
    assert len(calls) == 3
    assert stub_calls == [1]  # the retries were gRPC's, inside one call
    servicer.fail["Health"] = 2
    assert client.health() == adapterd.ServingStatus.SERVING
    assert len(servicer.calls_of("Health")) == 3
    for metadata, _ in calls:
        assert metadata["authorization"] == "Bearer s3cret"
        assert metadata["x-task-id"] == "my-task"


def test_retries_are_bounded(fake):
    servicer, client = fake
    servicer.fail["GetTask"] = 10
    with pytest.raises(adapterd.Unavailable) as info:
        client.get_task("my-task")
    assert info.value.code == grpc.StatusCode.UNAVAILABLE
    assert "draining (fake)" in info.value.message
    assert len(servicer.calls_of("GetTask")) == 4


def test_grpc_makes_at_most_five_attempts(capfd):
    server, servicer, port = start_fake()
    servicer.fail["GetTask"] = 10
    many = adapterd.RetryPolicy(max_attempts=1000, initial_backoff=0.01, max_backoff=0.02)
    try:
        with adapterd.Client(f"127.0.0.1:{port}", retries=many, timeout=10) as client:
            with pytest.raises(adapterd.Unavailable):
                client.get_task("my-task")
    finally:
        server.stop(None)
    assert len(servicer.calls_of("GetTask")) == GRPC_MAX_ATTEMPTS == 5
    # The client clamps maxAttempts itself, so gRPC logs no "clamped retryPolicy.maxAttempts".
    assert "clamped" not in capfd.readouterr().err


def test_retries_off_make_one_attempt():
    server, servicer, port = start_fake()
    servicer.fail["GetTask"] = 1
    try:
        for retries in (0, 1, None, adapterd.RetryPolicy(max_attempts=1)):
            assert service_config(adapterd.RetryPolicy.of(retries)) is None
            servicer.calls.clear()
            servicer.fail["GetTask"] = 1
            with adapterd.Client(f"127.0.0.1:{port}", retries=retries, timeout=5) as client:
                with pytest.raises(adapterd.Unavailable):
                    client.get_task("my-task")
            assert len(servicer.calls_of("GetTask")) == 1
        # The caller's channel arguments replace the client's: grpc.enable_retries=0 turns gRPC's retries off.
        servicer.calls.clear()
        servicer.fail["GetTask"] = 1
        off = [("grpc.enable_retries", 0)]
        with adapterd.Client(f"127.0.0.1:{port}", retries=3, timeout=5, channel_options=off) as client:
            with pytest.raises(adapterd.Unavailable):
                client.get_task("my-task")
        assert len(servicer.calls_of("GetTask")) == 1
    finally:
        server.stop(None)


def test_service_config_retries_exactly_the_unary_methods():
    config = json.loads(service_config(adapterd.RetryPolicy(initial_backoff=0, max_backoff=0.0004, multiplier=3)) or "")
    [method_config] = config["methodConfig"]
    assert method_config["retryPolicy"] == {
        "maxAttempts": 5,
        "initialBackoff": "0.001s",  # gRPC refuses a zero backoff (the channel would not work)
        "maxBackoff": "0.001s",
        "backoffMultiplier": 3,
        "retryableStatusCodes": ["UNAVAILABLE"],
    }
    named = {(n["service"], n["method"]) for n in method_config["name"]}
    assert named == set(RETRIED_UNARY_METHODS)
    # Every unary method of the service is idempotent (CreateTrainingJob through its request_id) and
    # retried; streams are not (UploadDataset and ImportAdapter create resources; the client restarts
    # WatchTrainingJob and ExportAdapter itself).
    service = pb.DESCRIPTOR.services_by_name["Adapterd"]
    unary = {m.name for m in service.methods if not m.client_streaming and not m.server_streaming}
    assert named == {("adapterd.v1.Adapterd", m) for m in unary} | {("grpc.health.v1.Health", "Check")}
    assert "UploadDataset" not in unary and "ImportAdapter" not in unary
    policy = adapterd.RetryPolicy(max_attempts=3, initial_backoff=0.25, max_backoff=1.5)
    retry = json.loads(service_config(policy) or "")["methodConfig"][0]["retryPolicy"]
    assert (retry["maxAttempts"], retry["initialBackoff"], retry["maxBackoff"]) == (3, "0.250s", "1.500s")


def test_non_idempotent_upload_is_not_retried(fake):
    servicer, client = fake
    servicer.fail["UploadDataset"] = 1
    with pytest.raises(adapterd.Unavailable):
        client.upload_dataset([{"text": "a", "label": "x"}], dataset_id="d1", task_id="t")
    assert len(servicer.calls_of("UploadDataset")) == 1
    dataset = client.upload_dataset([{"text": "a", "label": "x"}] * 3, task_id="t")
    assert dataset.num_examples == 3
    metadata, requests = servicer.calls_of("UploadDataset")[-1]
    assert metadata["x-task-id"] == "t"
    assert requests[0].WhichOneof("payload") == "metadata"


def test_dict_rows_go_as_json_lines_and_a_row_that_is_not_json_cancels_the_upload(fake):
    servicer, client = fake
    dataset = client.upload_dataset(({"text": f"t{i}", "label": "x"} for i in range(3)), dataset_id="d2")
    assert dataset.num_examples == 3
    metadata, requests = servicer.calls_of("UploadDataset")[-1]
    assert requests[0].metadata.file_format == pb.DATASET_FORMAT_JSONL and requests[0].metadata.file_name == "rows"
    sent = b"".join(r.file_bytes for r in requests[1:]).decode().splitlines()
    assert [json.loads(line) for line in sent] == [{"text": f"t{i}", "label": "x"} for i in range(3)]
    servicer.calls.clear()
    not_json: Any = {"x"}  # a set
    rows = ({"text": "a", "label": "x"} if i < 5 else {"text": "a set", "label": not_json} for i in range(10))
    with pytest.raises(adapterd.InvalidArgument, match="rows: row 6: not JSON"):
        client.upload_dataset(rows)
    # The server never saw a completed stream.
    assert servicer.calls_of("UploadDataset") == []


def test_a_file_is_sent_as_its_bytes_in_bounded_messages(fake, tmp_path):
    servicer, client = fake
    path = tmp_path / "mine.csv"
    path.write_bytes(b"text,label\n" + b"".join(b"row %d,x\n" % i for i in range(5000)))
    with adapterd.Client(client.target, api_key="s3cret", upload_chunk_bytes=4096) as small:
        small.upload_dataset(path, dataset_id="d3")
    _, requests = servicer.calls_of("UploadDataset")[-1]
    meta = requests[0].metadata
    assert (meta.file_format, meta.file_name, meta.display_name) == (pb.DATASET_FORMAT_AUTO, "mine.csv", "mine.csv")
    assert b"".join(r.file_bytes for r in requests[1:]) == path.read_bytes()
    assert len(requests) > 10 and all(len(r.file_bytes) <= 4096 for r in requests[1:])
    client.upload_dataset(path, dataset_id="d4", format="squad")
    assert servicer.calls_of("UploadDataset")[-1][1][0].metadata.file_format == pb.DATASET_FORMAT_SQUAD


def test_a_broken_export_is_downloaded_again(fake, tmp_path):
    servicer, client = fake
    # gRPC does not retry a stream once a message arrived: the client restarts it.
    servicer.break_exports = 2
    exported = client.export_adapter("t", tmp_path / "a.safetensors")
    assert (exported.version, exported.size) == (3, 4)
    assert (tmp_path / "a.safetensors").read_bytes() == b"abcd"
    assert len(servicer.calls_of("ExportAdapter")) == 3
    servicer.calls.clear()
    servicer.break_exports = 10
    with pytest.raises(adapterd.Unavailable):
        client.export_adapter("t")
    assert len(servicer.calls_of("ExportAdapter")) == 4  # the fixture's max_attempts, not more
    servicer.calls.clear()
    servicer.break_exports = 0
    servicer.fail["ExportAdapter"] = 1  # fails before any message: the client's restart, not gRPC's retry
    assert client.export_adapter("t").data == b"abcd"
    assert len(servicer.calls_of("ExportAdapter")) == 2


def test_minted_job_id_routes_by_its_task(fake):
    servicer, client = fake
    servicer.final_state = pb.JOB_STATE_SUCCEEDED
    client.get_job(JOB_ID)
    client.get_job("job-without-task")
    client.get_job("job-without-task", task_id="hint")
    tasks = [md.get("x-task-id") for md, _ in servicer.calls_of("GetTrainingJob")]
    assert tasks == ["fake-task", None, "hint"]


def test_create_is_retried_with_the_same_request_id_and_watch_resubscribes(fake, capsys):
    servicer, client = fake
    servicer.fail["CreateTrainingJob"] = 1
    with pytest.raises(adapterd.JobFailed) as info:
        client.train("fake-task", "some-dataset-id", kind="regression", epochs=2, progress=True)
    assert info.value.job.error_message == "disk full (fake)"
    assert "disk full (fake)" in str(info.value)
    creates = servicer.calls_of("CreateTrainingJob")
    assert len(creates) == 2
    assert creates[0][1].request_id == creates[1][1].request_id != ""
    assert creates[0][1].request_id.startswith("py-")
    assert creates[0][1].hyperparameters.epochs == 2
    assert not creates[0][1].hyperparameters.HasField("learning_rate")
    assert creates[0][1].task_kind == pb.TASK_KIND_REGRESSION
    assert list(creates[0][1].dataset_ids) == ["some-dataset-id"]
    watches = servicer.calls_of("WatchTrainingJob")
    assert [r.after_seq for _, r in watches] == [0, 2]
    assert all(md["x-task-id"] == "fake-task" for md, _ in watches)
    assert "FAILED" in capsys.readouterr().err


def test_watch_yields_each_event_once_across_a_resubscription(fake):
    servicer, client = fake
    servicer.final_state = pb.JOB_STATE_CANCELLED
    events = list(client.watch(JOB_ID))
    assert [e.seq for e in events] == [1, 2, 3]
    assert events[-1].state_change.to_state == adapterd.JobState.CANCELLED
    assert events[-1].job.state == adapterd.JobState.CANCELLED
    with pytest.raises(adapterd.JobCancelled):
        client.wait(JOB_ID)


def test_paging_follows_tokens(fake):
    servicer, client = fake
    assert [t.task_id for t in client.tasks(page_size=3)] == [f"t{i}" for i in range(7)]
    assert [r.page_token for _, r in servicer.calls_of("ListTasks")] == ["", "3", "6"]
    assert all("x-task-id" not in md for md, _ in servicer.calls_of("ListTasks"))


def test_a_server_that_starts_late_is_reached_by_retries():
    port = free_port()
    started: List[grpc.Server] = []
    timer = threading.Timer(0.7, lambda: started.append(start_fake(port)[0]))
    timer.start()
    # Attempts at about 0, 0.5, 1.5, 2.5 and 3.5 s: gRPC reconnects about 1 s after the first refusal.
    policy = adapterd.RetryPolicy(max_attempts=5, initial_backoff=0.5, max_backoff=1.0)
    try:
        with adapterd.Client(f"127.0.0.1:{port}", retries=policy, timeout=20) as client:
            begin = time.monotonic()
            assert client.get_task("late").task_id == "late"
            assert time.monotonic() - begin >= 0.5
        with adapterd.Client(f"127.0.0.1:{free_port()}", retries=0, timeout=5) as nobody:
            with pytest.raises(adapterd.Unavailable):
                nobody.get_task("x")
    finally:
        timer.join()
        for s in started:
            s.stop(None)


def test_the_deadline_bounds_retries():
    server, servicer, port = start_fake()
    servicer.fail["GetTask"] = 10
    # The first retry would come after the deadline: gRPC waits for it, and the deadline ends the call.
    policy = adapterd.RetryPolicy(max_attempts=5, initial_backoff=5, max_backoff=5)
    try:
        with adapterd.Client(f"127.0.0.1:{port}", retries=policy, timeout=0.6) as client:
            begin = time.monotonic()
            with pytest.raises(adapterd.DeadlineExceeded):
                client.get_task("x")
            assert 0.5 <= time.monotonic() - begin < 3
    finally:
        server.stop(None)
    assert len(servicer.calls_of("GetTask")) == 1


def test_channel_options_replace_the_clients_own():
    server, _, port = start_fake()
    try:
        # The client sets a 64 MiB receive limit; the caller's 8 bytes must be the one gRPC applies.
        tiny = [("grpc.max_receive_message_length", 8)]
        with adapterd.Client(f"127.0.0.1:{port}", retries=0, timeout=5, channel_options=tiny) as client:
            with pytest.raises(adapterd.QuotaExceeded):
                client.get_task("a-task-id-longer-than-eight-bytes")
    finally:
        server.stop(None)


def test_client_argument_checks():
    with pytest.raises(ValueError, match="printable ASCII"):
        adapterd.Client("127.0.0.1:1", api_key="bad\nkey")
    with pytest.raises(ValueError, match="both certificate_chain and private_key"):
        adapterd.Client("127.0.0.1:1", certificate_chain=b"x")
    with pytest.raises(adapterd.InvalidArgument, match="cannot read the TLS CA file"):
        adapterd.Client("127.0.0.1:1", root_certificates="/nonexistent/ca.pem")
    with pytest.raises(TypeError, match="unknown hyperparameter"):
        adapterd.Client("127.0.0.1:1").train("t", "d", learning_rat=1e-3)
