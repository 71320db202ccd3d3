"""The adapterd client: one method per call of adapterctl, typed results, typed errors.

Contract (the C++ client's, client/adapterd_client.h, plus retries):

* Metadata: every call sends ``authorization: Bearer <api_key>`` when a key is
  set (argument, else ``$ADAPTERD_API_KEY``), and ``x-task-id: <task>`` on every
  call that concerns a task, as adapterctl does: Predict, CreateTrainingJob,
  GetTask, DeleteTask, ExportAdapter, ImportAdapter, ListTrainingJobs with a
  task filter, UploadDataset when the caller names its task, and the job and
  dataset calls (the caller's ``task_id`` hint, else the task a server-minted
  id carries: ``job-<19 hex>.<task>``). List calls without a task send none.
* Deadlines: every call but a watch has ``timeout`` seconds (the client's
  default, or the method's ``timeout=`` argument), retries included; a watch
  has ``watch_timeout`` (none by default: training can run for hours).
* Retries: idempotent calls are retried on UNAVAILABLE (server unreachable,
  starting or draining) with exponential backoff, per :class:`RetryPolicy`.
  The unary ones are retried by gRPC, from the channel's service config
  (adapterd._retry): Get*, List* (each page), Predict, health, Delete* and
  CancelTrainingJob (their effect is the same however often they run; a delete
  retried after an attempt that did land raises NotFound), and
  CreateTrainingJob (always sent with a ``request_id``: the server returns the
  same job for the same id and payload). Streams are restarted by the client
  (gRPC retries no call once its response began, nor a client stream past
  256 KiB, and its per-method config cannot tell one upload from another):
  ExportAdapter (downloaded again), the uploads
  ``train`` makes under content-derived ids (an ALREADY_EXISTS is taken as
  done only when the stored dataset's file_sha256 is that of the caller's
  rows), and a watch that ends UNAVAILABLE (re-subscribed with ``after_seq``
  of the last event seen). ``upload_dataset`` and ``import_adapter`` create
  resources and are not retried (a failed stream stores nothing, so the
  caller may simply call again).
* Errors: every failure raises a subclass of :class:`adapterd.errors.AdapterdError`
  for its gRPC code; bad local input raises InvalidArgument too.

Thread safety: a Client may be shared by threads (gRPC channels are
thread-safe; the client holds no per-call state). Generators it returns
(``watch``, ``tasks``, ``jobs``, ``datasets``) belong to one thread each.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import logging
import os
import random
import tempfile
import time
import uuid
import zipfile
from typing import (
    cast,
    IO,
    Any,
    Callable,
    Iterable,
    Iterator,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    TypeVar,
    Union,
)

import grpc

from adapterd import _health
from adapterd._progress import ProgressPrinter
from adapterd._retry import NO_RETRIES, RETRYABLE_CODES, RetryPolicy, service_config
from adapterd._routing import TASK_ROUTING_HEADER, is_printable_ascii, routing_task_of, task_metadata
from adapterd._stubs import pb, pb_grpc
from adapterd.errors import (
    AlreadyExists,
    DataLoss,
    Internal,
    InvalidArgument,
    JobCancelled,
    JobFailed,
    from_rpc_error,
)
from adapterd.records import (
    HYPERPARAMETERS,
    Dataset,
    ExportedAdapter,
    JobEvent,
    JobState,
    PredictResult,
    Task,
    TaskKind,
    TrainingJob,
    prediction_from_proto,
)
from adapterd._health import ServingStatus

DEFAULT_TARGET = "127.0.0.1:8500"
API_KEY_ENV = "ADAPTERD_API_KEY"
#: Largest message the client sends or accepts (the server's default limit is 16 MiB).
MAX_MESSAGE_BYTES = 64 << 20
#: Upper bound on one UploadDataset chunk's and one ImportAdapter chunk's size.
UPLOAD_CHUNK_BYTES = 1 << 20
#: Texts per Predict call (the server's default per-tenant limit is 256).
PREDICT_BATCH = 64

T = TypeVar("T")
Credential = Union[bytes, str, "os.PathLike[str]", None]
PathLike = Union[str, "os.PathLike[str]"]
#: A row built in code: a dict with the JSON Lines members (sent as a line of JSON Lines, read by the
#: server), or an ``adapterd.v1.Example`` message (sent as it is).
Row = Union[Mapping[str, Any], Any]
DatasetSource = Union[str, "os.PathLike[str]", Dataset, Iterable[Row]]


class _StopUpload(Exception):
    """Carries a local error out of an upload's request iterator (gRPC then cancels the stream)."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


class _QuietStopUpload(logging.Filter):
    """gRPC logs every exception of a request iterator; ours are reported to the caller instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, _StopUpload)


logging.getLogger("grpc._channel").addFilter(_QuietStopUpload())


def _read_credential(value: Credential, what: str) -> Optional[bytes]:
    """PEM bytes as given, or read from a path; None stays None."""
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    path = os.fspath(value)
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as error:
        raise InvalidArgument(None, f"cannot read the {what} {path!r}: {error.strerror}") from error


def dataset_format(name: Optional[str]) -> int:
    """The ``DatasetFormat`` a format name gives: "auto" (or None), "csv", "jsonl" ("json", "ndjson"), "squad"."""
    if name is None:
        return pb.DATASET_FORMAT_AUTO
    key = {"json": "jsonl", "ndjson": "jsonl"}.get(name.strip().lower(), name.strip().lower())
    try:
        return pb.DatasetFormat.Value("DATASET_FORMAT_" + key.upper())
    except ValueError:
        raise InvalidArgument(None, f"unknown dataset format {name!r} (auto, csv, jsonl, squad)") from None


def dataset_id_for_file(data: bytes) -> str:
    """The content-derived dataset id adapterctl and this client give a training file: ``data-`` + the
    first 40 hex digits of the SHA-256 of its bytes (the server records the whole as ``file_sha256``)."""
    return "data-" + hashlib.sha256(data).hexdigest()[:40]


def _jsonl_of_rows(rows: Iterable[Mapping[str, Any]]) -> Iterator[bytes]:
    """Dict rows as lines of JSON Lines, which the server reads as a file (its errors name "line <n>",
    the row's number)."""
    for number, row in enumerate(rows, start=1):
        if not isinstance(row, Mapping):
            raise InvalidArgument(None, f"rows: row {number}: expected a dict, got {type(row).__name__}")
        try:
            line = json.dumps(row, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        except (TypeError, ValueError) as error:
            raise InvalidArgument(None, f"rows: row {number}: not JSON: {error}") from None
        yield line.encode("utf-8") + b"\n"


def _example_chunks(examples: Iterable[Any], max_chunk_bytes: int) -> Iterator[List[Any]]:
    """Consecutive runs of Example rows whose ``DatasetChunk`` stays within about ``max_chunk_bytes``."""
    chunk: List[Any] = []
    size = 0
    for number, example in enumerate(examples, start=1):
        if not isinstance(example, pb.Example):
            raise InvalidArgument(None, f"rows: row {number}: expected an Example like the rows before it")
        n = example.ByteSize() + 8  # the field's tag and length
        if chunk and size + n > max_chunk_bytes:
            yield chunk
            chunk, size = [], 0
        chunk.append(example)
        size += n
    if chunk:
        yield chunk


def _zip_directory(directory: str) -> bytes:
    """The regular files directly in ``directory``, as one zip (what ImportAdapter takes)."""
    buffer = io.BytesIO()
    names = sorted(n for n in os.listdir(directory) if os.path.isfile(os.path.join(directory, n)))
    if not names:
        raise ValueError(f"{directory} holds no files")
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        for name in names:
            z.write(os.path.join(directory, name), name)
    return buffer.getvalue()


def _unzip_to_directory(data: bytes, directory: str) -> None:
    """The zip's files written into ``directory`` (created; an existing one must be empty)."""
    if os.path.exists(directory) and os.listdir(directory):
        raise ValueError(f"{directory} exists and is not empty: the AdapterHub directory goes into a new or "
                         "empty one")
    os.makedirs(directory, exist_ok=True)
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        for name in z.namelist():
            if os.path.basename(name) != name or name in ("", ".", ".."):
                raise DataLoss(None, f"the AdapterHub zip holds {name!r}, not a plain file name")
            _write_atomically(os.path.join(directory, name), z.read(name))


class Client:
    """A connection to one adapterd server (or a router in front of several).

    Example::

        with adapterd.Client("127.0.0.1:8500") as client:
            job = client.train("sentiment", "examples/sentiment_train.csv", epochs=3, progress=True)
            result = client.predict("sentiment", ["great and fast", "broken"])
            print(result[0].label, result[0].score)
    """

    def __init__(
        self,
        target: str = DEFAULT_TARGET,
        api_key: Optional[str] = None,
        *,
        tls: bool = False,
        root_certificates: Credential = None,
        certificate_chain: Credential = None,
        private_key: Credential = None,
        server_name: Optional[str] = None,
        timeout: Optional[float] = 30.0,
        watch_timeout: Optional[float] = None,
        retries: Union[RetryPolicy, int, None] = RetryPolicy(),
        upload_chunk_bytes: int = UPLOAD_CHUNK_BYTES,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        channel_options: Sequence[Tuple[str, Any]] = (),
    ) -> None:
        """Creates the channel (connecting is lazy: an unreachable server shows up as Unavailable on a call).

        Args:
            target: ``host:port`` or any gRPC target URI.
            api_key: sent as ``authorization: Bearer <key>``; None reads ``$ADAPTERD_API_KEY``; "" sends none.
            tls: use TLS; implied by any of the three certificate arguments.
            root_certificates: PEM CA bundle (bytes, or a path) the server's certificate must chain to;
                None = the system's roots.
            certificate_chain, private_key: PEM client certificate and key (bytes or paths) for mutual TLS;
                both or neither.
            server_name: the name the server's certificate must carry when it is not the target's host
                (e.g. when connecting by IP address).
            timeout: seconds each call may take, retries included; None = no deadline.
            watch_timeout: seconds a watch (and ``train(wait=True)``'s wait) may take; None = no deadline.
            retries: a RetryPolicy, a number of attempts, or 0/None for none. Unary calls make at
                most 5 attempts (gRPC's limit); see :class:`RetryPolicy`.
            upload_chunk_bytes: upper bound on one upload or import message.
            max_message_bytes: largest message sent or accepted.
            channel_options: extra gRPC channel arguments; one the client also sets (a message
                size limit, ``grpc.ssl_target_name_override``, ``grpc.enable_retries``,
                ``grpc.service_config``: the unary retries) takes the caller's value.

        Raises:
            ValueError: an API key that is not printable ASCII, a non-positive timeout or chunk size,
                a certificate without its key.
            InvalidArgument: a certificate file that cannot be read.
        """
        if api_key is None:
            api_key = os.environ.get(API_KEY_ENV, "")
        if not is_printable_ascii(api_key):
            raise ValueError("the API key must be printable ASCII")
        for name, value in (("timeout", timeout), ("watch_timeout", watch_timeout)):
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive (or None for no deadline)")
        if upload_chunk_bytes <= 0 or max_message_bytes <= 0:
            raise ValueError("chunk and message sizes must be positive")
        if (certificate_chain is None) != (private_key is None):
            raise ValueError("give both certificate_chain and private_key (mutual TLS), or neither")
        self._target = target
        self._api_key = api_key
        self._timeout = timeout
        self._watch_timeout = watch_timeout
        self._retry = RetryPolicy.of(retries)
        self._chunk_bytes = upload_chunk_bytes
        self._rng = random.Random()
        options: List[Tuple[str, Any]] = [
            ("grpc.max_send_message_length", max_message_bytes),
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.enable_retries", 1),
        ]
        retry_config = service_config(self._retry)
        if retry_config is not None:
            options.append(("grpc.service_config", retry_config))
        use_tls = tls or root_certificates is not None or certificate_chain is not None
        if server_name:
            options.append(("grpc.ssl_target_name_override", server_name))
        # gRPC keeps the first of two arguments with the same name: the caller's replace the client's.
        given = {name for name, _ in channel_options}
        options = [option for option in options if option[0] not in given] + list(channel_options)
        if use_tls:
            credentials = grpc.ssl_channel_credentials(
                root_certificates=_read_credential(root_certificates, "TLS CA file"),
                private_key=_read_credential(private_key, "TLS client key"),
                certificate_chain=_read_credential(certificate_chain, "TLS client certificate"),
            )
            self._channel = grpc.secure_channel(target, credentials, options=options)
        else:
            self._channel = grpc.insecure_channel(target, options=options)
        self._stub = pb_grpc.AdapterdStub(self._channel)
        self._health_check = _health.check_callable(self._channel)

    # --- Lifetime ----------------------------------------------------------------

    @property
    def target(self) -> str:
        """The server address this client talks to."""
        return self._target

    def close(self) -> None:
        """Closes the channel; calls in flight end CANCELLED. Idempotent."""
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client({self._target!r})"

    # --- Plumbing ----------------------------------------------------------------

    def _metadata(self, task_id: Optional[str]) -> List[Tuple[str, str]]:
        metadata: List[Tuple[str, str]] = []
        if self._api_key:
            metadata.append(("authorization", f"Bearer {self._api_key}"))
        task = task_metadata(task_id)
        if task is not None:
            metadata.append((TASK_ROUTING_HEADER, task))
        return metadata

    def _call_timeout(self, timeout: Optional[float]) -> Optional[float]:
        return self._timeout if timeout is None else timeout

    def _deadline(self, timeout: Optional[float]) -> Optional[float]:
        timeout = self._call_timeout(timeout)
        return None if timeout is None else time.monotonic() + timeout

    @staticmethod
    def _remaining(deadline: Optional[float]) -> Optional[float]:
        return None if deadline is None else max(0.0, deadline - time.monotonic())

    def _sleep_before_retry(self, attempt: int, deadline: Optional[float], policy: RetryPolicy) -> bool:
        """Sleeps a restarted stream's backoff after failed attempt ``attempt``.

        False when no retry is left or the sleep would pass the deadline.
        """
        if attempt >= policy.max_attempts:
            return False
        delay = policy.backoff(attempt, self._rng)
        if deadline is not None and time.monotonic() + delay >= deadline:
            return False
        time.sleep(delay)
        return True

    def _with_retries(
        self, attempt_fn: Callable[[Optional[float]], T], idempotent: bool, timeout: Optional[float]
    ) -> T:
        """Runs stream ``attempt_fn(remaining seconds)`` until it succeeds, fails for good, or retries run out.

        For streams only: gRPC retries the unary calls (:meth:`_unary`), and would
        not retry these (adapterd._retry).
        """
        policy = self._retry if idempotent else NO_RETRIES
        deadline = self._deadline(timeout)
        attempt = 0
        while True:
            attempt += 1
            try:
                return attempt_fn(self._remaining(deadline))
            except grpc.RpcError as error:
                if error.code() in RETRYABLE_CODES and self._sleep_before_retry(attempt, deadline, policy):
                    continue
                raise from_rpc_error(error) from None

    def _unary(self, method: str, request: Any, task_id: Optional[str], timeout: Optional[float] = None) -> Any:
        """One unary call; gRPC retries it when its method is in adapterd._retry.RETRIED_UNARY_METHODS."""
        call = getattr(self._stub, method)
        try:
            return call(request, timeout=self._call_timeout(timeout), metadata=self._metadata(task_id))
        except grpc.RpcError as error:
            raise from_rpc_error(error) from None

    # --- Health --------------------------------------------------------------------

    def health(self, service: str = "", timeout: Optional[float] = None) -> ServingStatus:
        """grpc.health.v1.Health/Check for ``service`` ("" = the whole server).

        Returns the status the server reports (SERVING, or NOT_SERVING while the
        encoder loads and while draining). Raises Unavailable when the server
        cannot be reached (after retries) and Unimplemented when it has no health service.
        """
        request = _health.HealthCheckRequest(service=service)
        try:
            response = self._health_check(request, timeout=self._call_timeout(timeout), metadata=self._metadata(None))
        except grpc.RpcError as error:
            raise from_rpc_error(error) from None
        try:
            return ServingStatus(response.status)
        except ValueError:
            return ServingStatus.UNKNOWN

    # --- Datasets ------------------------------------------------------------------

    def _payloads(self, source: Union[PathLike, bytes, Iterable[Row]], format: Optional[str]) -> Tuple[
        Any, Callable[[], Iterator[Any]]
    ]:
        """What an upload of ``source`` sends: its metadata (file_format, file_name) and its messages.

        A path is sent as the file's bytes, dict rows as JSON Lines, both read by the server's one
        reader of dataset files; Example rows as examples. A file is read as the stream goes; rows
        are taken into a list first. Each call of the messages' function starts them again.
        """
        chunk_bytes = self._chunk_bytes
        if isinstance(source, (str, os.PathLike)):
            path = os.fspath(source)
            if not os.path.isfile(path):
                raise FileNotFoundError(errno.ENOENT, "no such dataset file", path)
            metadata = pb.UploadDatasetRequest.Metadata(
                file_format=dataset_format(format), file_name=os.path.basename(path)
            )

            def file_messages() -> Iterator[Any]:
                with open(path, "rb") as f:
                    while True:
                        piece = f.read(chunk_bytes)
                        if not piece:
                            return
                        yield pb.UploadDatasetRequest(file_bytes=piece)

            return metadata, file_messages
        if isinstance(source, (bytes, bytearray)):
            data = bytes(source)
            metadata = pb.UploadDatasetRequest.Metadata(file_format=dataset_format(format), file_name="data")
            pieces = [data[i:i + chunk_bytes] for i in range(0, len(data), chunk_bytes)]  # noqa: E226
            return metadata, lambda: (pb.UploadDatasetRequest(file_bytes=p) for p in pieces)
        rows: List[Any] = list(source)
        if not rows:
            raise InvalidArgument(None, "rows: no examples")
        if isinstance(rows[0], pb.Example):
            return pb.UploadDatasetRequest.Metadata(), lambda: (
                pb.UploadDatasetRequest(chunk=pb.DatasetChunk(examples=c)) for c in _example_chunks(rows, chunk_bytes)
            )
        lines = rows
        metadata = pb.UploadDatasetRequest.Metadata(file_format=pb.DATASET_FORMAT_JSONL, file_name="rows")

        def row_messages() -> Iterator[Any]:
            buffer = bytearray()
            for line in _jsonl_of_rows(lines):
                buffer += line
                if len(buffer) >= chunk_bytes:
                    yield pb.UploadDatasetRequest(file_bytes=bytes(buffer))
                    buffer.clear()
            if buffer:
                yield pb.UploadDatasetRequest(file_bytes=bytes(buffer))

        return metadata, row_messages

    def _upload(
        self,
        metadata: Any,
        messages: Callable[[], Iterator[Any]],
        task_id: Optional[str],
        remaining: Optional[float],
    ) -> Any:
        """One UploadDataset stream; raises grpc.RpcError, or the local error that stopped the messages."""
        failures: List[BaseException] = []

        def requests() -> Iterator[Any]:
            yield pb.UploadDatasetRequest(metadata=metadata)
            try:
                yield from messages()
            except Exception as error:
                # Raised to gRPC (on its request thread), which then cancels the
                # stream instead of half-closing it: nothing is stored.
                failures.append(error)
                raise _StopUpload(error) from error

        try:
            return self._stub.UploadDataset(requests(), timeout=remaining, metadata=self._metadata(task_id))
        except grpc.RpcError:
            if failures:
                raise failures[0] from None
            raise

    def upload_dataset(
        self,
        path_or_rows: Union[PathLike, bytes, Iterable[Row]],
        dataset_id: Optional[str] = None,
        display_name: Optional[str] = None,
        task_id: Optional[str] = None,
        format: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> Dataset:
        """Uploads a dataset and returns it once the server has stored it.

        Args:
            path_or_rows: a dataset file (.csv, .jsonl/.ndjson, SQuAD .json) or its bytes, sent as
                they are and read by the server (docs/API.md, ``UploadDataset``); or rows built in
                code: dicts with the JSON Lines members (text, text_pair, label, labels, tokens +
                tags, entities, question + context, answers), sent as JSON Lines, or ``Example``
                messages. Streamed in messages of at most ``upload_chunk_bytes``.
            dataset_id: the id to store it under; None = the server assigns one
                (``ds-...``, carrying ``task_id`` when given).
            display_name: a name for people; default: the file's base name.
            task_id: the task the data are for: sent as x-task-id (so the upload
                lands on that task's replica behind a router).
            format: "csv", "jsonl" or "squad" for a file; None = from its name and content.

        Raises:
            InvalidArgument: a malformed file or row, named by its line (the server's reader) or row
                (nothing is stored).
            AlreadyExists: ``dataset_id`` is taken. QuotaExceeded: the tenant's bytes quota.
            FileNotFoundError: a missing file.
        Not retried: a failed upload stores nothing, so calling again is safe.
        """
        metadata, messages = self._payloads(path_or_rows, format)
        metadata.dataset_id = dataset_id or ""
        if display_name is not None:
            metadata.display_name = display_name
        elif isinstance(path_or_rows, (str, os.PathLike)):
            metadata.display_name = os.path.basename(os.fspath(path_or_rows))
        response = self._with_retries(
            lambda remaining: self._upload(metadata, messages, task_id, remaining), False, timeout
        )
        return Dataset.from_proto(response)

    def _upload_or_reuse(
        self, source: Union[PathLike, List[Mapping[str, Any]]], task_id: str, format: Optional[str]
    ) -> str:
        """Uploads a file (or dict rows, as JSON Lines) under its content-derived id, or reuses that
        dataset if it is already stored and holds the very same bytes."""
        if isinstance(source, (str, os.PathLike)):
            with open(os.fspath(source), "rb") as f:
                digest = hashlib.sha256()
                for piece in iter(lambda: f.read(1 << 20), b""):
                    digest.update(piece)
            display_name = os.path.basename(os.fspath(source))
        else:
            digest = hashlib.sha256()
            for line in _jsonl_of_rows(source):
                digest.update(line)
            display_name = ""
        file_sha256 = digest.hexdigest()
        dataset_id = "data-" + file_sha256[:40]
        metadata, messages = self._payloads(source, format)
        metadata.dataset_id = dataset_id
        metadata.display_name = display_name
        try:
            self._with_retries(lambda remaining: self._upload(metadata, messages, task_id, remaining), True, None)
        except AlreadyExists:
            # Reused only when it holds these very bytes: an id is a name anyone may have used.
            existing = self.get_dataset(dataset_id, task_id=task_id)
            if existing.file_sha256 != file_sha256:
                raise AlreadyExists(None, f"dataset {dataset_id} already exists with different content") from None
        return dataset_id

    def get_dataset(self, dataset: Union[str, Dataset], task_id: Optional[str] = None) -> Dataset:
        """The dataset; NotFound if unknown. ``task_id``: routing hint (default: the task a minted id carries)."""
        dataset_id = dataset.dataset_id if isinstance(dataset, Dataset) else dataset
        response = self._unary(
            "GetDataset", pb.GetDatasetRequest(dataset_id=dataset_id), task_id or routing_task_of(dataset_id)
        )
        return Dataset.from_proto(response)

    def datasets(self, page_size: int = 0) -> Iterator[Dataset]:
        """Every dataset of the caller, in id order, page by page (``page_size`` 0 = the server's 50)."""
        for item in self._pages("ListDatasets", pb.ListDatasetsRequest(page_size=page_size), "datasets", None):
            yield Dataset.from_proto(item)

    def delete_dataset(self, dataset: Union[str, Dataset], task_id: Optional[str] = None) -> None:
        """Deletes a dataset (its bytes go back to the quota).

        FailedPrecondition while a queued or running job uses it; NotFound if unknown.
        """
        dataset_id = dataset.dataset_id if isinstance(dataset, Dataset) else dataset
        self._unary(
            "DeleteDataset", pb.DeleteDatasetRequest(dataset_id=dataset_id), task_id or routing_task_of(dataset_id)
        )

    def _pages(self, method: str, request: Any, field: str, task_id: Optional[str]) -> Iterator[Any]:
        while True:
            page = self._unary(method, request, task_id)
            yield from getattr(page, field)
            if not page.next_page_token:
                return
            request.page_token = page.next_page_token

    # --- Training ------------------------------------------------------------------

    def _dataset_id(self, source: DatasetSource, task_id: str, format: Optional[str]) -> str:
        """A dataset id from an id, a Dataset, a file path (uploaded) or rows (uploaded)."""
        if isinstance(source, Dataset):
            return source.dataset_id
        if isinstance(source, os.PathLike) or (isinstance(source, str) and os.path.isfile(source)):
            return self._upload_or_reuse(source, task_id, format)
        if isinstance(source, str):
            return source
        rows = list(source)
        if rows and isinstance(rows[0], pb.Example):
            # Example messages have no file to name them by: the server assigns the id.
            metadata, messages = self._payloads(rows, None)
            response = self._with_retries(
                lambda remaining: self._upload(metadata, messages, task_id, remaining), False, None
            )
            return str(response.dataset_id)
        return self._upload_or_reuse(cast(List[Mapping[str, Any]], rows), task_id, None)

    @staticmethod
    def _dataset_sources(datasets: Any) -> List[DatasetSource]:
        if isinstance(datasets, (str, os.PathLike, Dataset)):
            return [datasets]
        items = list(datasets)
        if items and (isinstance(items[0], Mapping) or isinstance(items[0], pb.Example)):
            return [items]  # one dataset given as rows
        if not items:
            raise InvalidArgument(None, "give at least one training dataset")
        return items

    @staticmethod
    def _hyperparameters(values: Mapping[str, Any]) -> Any:
        unknown = sorted(set(values) - set(HYPERPARAMETERS))
        if unknown:
            raise TypeError(f"unknown hyperparameter(s) {', '.join(unknown)} (known: {', '.join(HYPERPARAMETERS)})")
        h = pb.Hyperparameters()
        for name, value in values.items():
            if value is None:
                continue
            try:
                setattr(h, name, value)
            except (TypeError, ValueError) as error:
                raise InvalidArgument(None, f"hyperparameter {name}={value!r}: {error}") from None
        return h

    def train(
        self,
        task_id: str,
        datasets: Any,
        validation_dataset: Optional[DatasetSource] = None,
        kind: Union[TaskKind, str, int, None] = None,
        wait: bool = True,
        progress: bool = False,
        request_id: Optional[str] = None,
        format: Optional[str] = None,
        **hyperparameters: Any,
    ) -> TrainingJob:
        """Trains (or retrains) ``task_id`` and, with ``wait``, watches the job to its end.

        Args:
            task_id: the task; an existing one gets a new version (same labels and kind).
            datasets: one source or a list of them, concatenated in order. A source is a
                dataset id, a :class:`Dataset`, a path of a dataset file (a ``str`` naming an
                existing file, or a ``pathlib.Path``), or rows (a list of dicts or Examples). Files
                and dict rows are uploaded under a content-derived id (``data-`` + the SHA-256 of
                the file's bytes, adapterctl's; dict rows as JSON Lines), or reused when that
                dataset is already stored with the same bytes; Example rows get a server-assigned id.
            validation_dataset: one source as above; None = a split of the training data.
            kind: the task kind ("classification", "multi-label", "regression", "ner", "qa",
                a TaskKind); None = the existing task's, or classification for a new one.
            wait: watch the job to a terminal state (re-subscribing after a lost stream).
            progress: show progress on stderr (a live line on a terminal).
            request_id: idempotency key; None = a fresh one per call (so a call trains anew,
                and only its own retries are deduplicated).
            format: the files' format ("csv", "jsonl", "squad"); None = the server detects it.
            **hyperparameters: the ``Hyperparameters`` fields (learning_rate, epochs,
                batch_size, bottleneck_size, activation, max_seq_len, seed, ...); unset = the
                server's defaults.

        Returns:
            The job: with ``wait``, SUCCEEDED (``result_version`` is the new version);
            otherwise as created (VALIDATING or QUEUED, or terminal for a replayed request_id).

        Raises:
            JobFailed / JobCancelled: with ``wait``, the job ended FAILED / CANCELLED.
            InvalidArgument: data the kind cannot learn from, hyperparameters out of range.
            NotFound: a dataset id that does not exist. TypeError: an unknown hyperparameter name.
        """
        request = pb.CreateTrainingJobRequest(task_id=task_id, task_kind=int(TaskKind.parse(kind)))
        request.hyperparameters.CopyFrom(self._hyperparameters(hyperparameters))
        for source in self._dataset_sources(datasets):
            request.dataset_ids.append(self._dataset_id(source, task_id, format))
        if validation_dataset is not None:
            request.validation_dataset_id = self._dataset_id(validation_dataset, task_id, format)
        request.request_id = request_id or f"py-{uuid.uuid4().hex}"
        job = TrainingJob.from_proto(self._unary("CreateTrainingJob", request, task_id))
        if not wait:
            return job
        return self.wait(job, progress=progress)

    def wait(self, job: Union[str, TrainingJob], progress: bool = False, task_id: Optional[str] = None) -> TrainingJob:
        """Watches a job to its end and returns it if it SUCCEEDED.

        Raises JobFailed / JobCancelled when it ended FAILED / CANCELLED, and the watch's
        error if the stream could not be kept (after re-subscribing).
        """
        job_id = job.job_id if isinstance(job, TrainingJob) else job
        printer = ProgressPrinter() if progress else None
        final: Optional[TrainingJob] = None
        try:
            for event in self.watch(job_id, task_id=task_id):
                final = event.job
                if printer is not None:
                    printer.event(event)
        finally:
            if printer is not None:
                printer.close()
        if final is None or not final.done:
            final = self.get_job(job_id, task_id=task_id)
        if printer is not None:
            printer.finish(final)
        if final.state == JobState.FAILED:
            raise JobFailed(final)
        if final.state == JobState.CANCELLED:
            raise JobCancelled(final)
        if final.state != JobState.SUCCEEDED:
            raise Internal(None, f"the watch of job {job_id} ended while it was {final.state.name}")
        return final

    def watch(
        self,
        job_or_id: Union[str, TrainingJob],
        after_seq: int = 0,
        progress: bool = False,
        task_id: Optional[str] = None,
    ) -> Iterator[JobEvent]:
        """The job's events after ``after_seq`` (0 = all), then new ones as they happen, until the job ends.

        Each :class:`JobEvent` carries the job as the server sent it with the event.
        A stream that ends UNAVAILABLE (the server restarted or drained) is
        re-subscribed after the last event seen, with backoff; the retry budget
        starts afresh whenever events arrive. ``progress`` shows them on stderr.
        Closing the generator early cancels the stream. The deadline is the
        client's ``watch_timeout``, over the whole watch.
        """
        job_id = job_or_id.job_id if isinstance(job_or_id, TrainingJob) else job_or_id
        task = task_id or (job_or_id.task_id if isinstance(job_or_id, TrainingJob) else "") or routing_task_of(job_id)
        metadata = self._metadata(task)
        deadline = None if self._watch_timeout is None else time.monotonic() + self._watch_timeout
        printer = ProgressPrinter() if progress else None
        last_seq = after_seq
        failures = 0
        try:
            while True:
                request = pb.WatchTrainingJobRequest(job_id=job_id, after_seq=last_seq)
                call = self._stub.WatchTrainingJob(request, timeout=self._remaining(deadline), metadata=metadata)
                try:
                    for response in call:
                        job = TrainingJob.from_proto(response.job)
                        for message in response.events:
                            if message.seq <= last_seq:
                                continue  # already seen before a re-subscription
                            last_seq = message.seq
                            failures = 0
                            event = JobEvent.from_proto(message, job)
                            if printer is not None:
                                printer.event(event)
                            yield event
                    return
                except grpc.RpcError as error:
                    failures += 1
                    if error.code() in RETRYABLE_CODES and self._sleep_before_retry(failures, deadline, self._retry):
                        continue
                    raise from_rpc_error(error) from None
                finally:
                    call.cancel()
        finally:
            if printer is not None:
                printer.close()

    def get_job(self, job: Union[str, TrainingJob], task_id: Optional[str] = None) -> TrainingJob:
        """The job; NotFound if unknown. ``task_id``: routing hint (default: the task the job id carries)."""
        job_id = job.job_id if isinstance(job, TrainingJob) else job
        response = self._unary(
            "GetTrainingJob", pb.GetTrainingJobRequest(job_id=job_id), task_id or routing_task_of(job_id)
        )
        return TrainingJob.from_proto(response)

    def cancel_job(self, job: Union[str, TrainingJob], task_id: Optional[str] = None) -> TrainingJob:
        """Cancels a job: QUEUED -> CANCELLED, RUNNING -> CANCELLING; FailedPrecondition if it has finished."""
        job_id = job.job_id if isinstance(job, TrainingJob) else job
        response = self._unary(
            "CancelTrainingJob", pb.CancelTrainingJobRequest(job_id=job_id), task_id or routing_task_of(job_id)
        )
        return TrainingJob.from_proto(response)

    def jobs(
        self,
        state: Union[JobState, str, int, None] = None,
        task_id: Optional[str] = None,
        page_size: int = 0,
    ) -> Iterator[TrainingJob]:
        """Every job of the caller, oldest first, optionally of one state and/or task, page by page."""
        request = pb.ListTrainingJobsRequest(
            page_size=page_size, state=int(JobState.parse(state)), task_id=task_id or ""
        )
        for item in self._pages("ListTrainingJobs", request, "jobs", task_id):
            yield TrainingJob.from_proto(item)

    # --- Tasks -----------------------------------------------------------------------

    def get_task(self, task_id: str) -> Task:
        """The task; NotFound if unknown (or another tenant's)."""
        return Task.from_proto(self._unary("GetTask", pb.GetTaskRequest(task_id=task_id), task_id))

    def tasks(self, page_size: int = 0) -> Iterator[Task]:
        """Every task of the caller, in id order, page by page."""
        for item in self._pages("ListTasks", pb.ListTasksRequest(page_size=page_size), "tasks", None):
            yield Task.from_proto(item)

    def delete_task(self, task_id: str) -> None:
        """Deletes the task, every version, and cancels its queued and running jobs; NotFound if unknown."""
        self._unary("DeleteTask", pb.DeleteTaskRequest(task_id=task_id), task_id)

    def export_adapter(
        self,
        task_id: str,
        path_or_file: Union[PathLike, IO[bytes], None] = None,
        version: Optional[int] = None,
        timeout: Optional[float] = None,
        format: str = "adapterd",
        accept_layer_norm_loss: bool = False,
    ) -> ExportedAdapter:
        """Downloads a version's adapter file (docs/ADAPTER_FORMAT.md).

        ``path_or_file``: None returns the bytes in ``ExportedAdapter.data``; a path is
        written atomically (a temporary file renamed over it); a binary file object is
        written to. ``version``: None = the current one. Raises DataLoss if the bytes
        received do not add up to the size the server announced.

        ``format="adapterhub"`` exports the directory AdapterHub's ``adapters`` library
        loads with ``load_adapter`` (the task id as the adapter's name): a path not
        ending in ``.zip`` becomes that directory (new, or empty), otherwise the zip of
        it is written or returned. A task whose LayerNorms were trained (adapterd's
        default) is FailedPrecondition, since the format holds none, unless
        ``accept_layer_norm_loss`` (then the library uses the encoder's, and predicts
        otherwise).
        """
        formats = {"adapterd": pb.ADAPTER_FORMAT_ADAPTERD, "adapterhub": pb.ADAPTER_FORMAT_ADAPTERHUB}
        if format not in formats:
            raise ValueError(f"format must be one of {sorted(formats)}, not {format!r}")
        request = pb.ExportAdapterRequest(task_id=task_id, version=version or 0, format=formats[format],
                                          accept_layer_norm_loss=accept_layer_norm_loss)
        metadata = self._metadata(task_id)

        def attempt(remaining: Optional[float]) -> Tuple[int, bytes]:
            buffer = io.BytesIO()
            announced_version, total = -1, -1
            call = self._stub.ExportAdapter(request, timeout=remaining, metadata=metadata)
            for response in call:
                if announced_version < 0:
                    announced_version, total = response.version, response.total_bytes
                buffer.write(response.chunk)
            if announced_version < 0:
                raise DataLoss(None, "the server sent no adapter data")
            data = buffer.getvalue()
            if total > 0 and len(data) != total:
                raise DataLoss(None, f"adapter export announced {total} bytes but sent {len(data)}")
            return announced_version, data

        exported_version, data = self._with_retries(attempt, True, timeout)
        if path_or_file is None:
            return ExportedAdapter(task_id=task_id, version=exported_version, size=len(data), data=data)
        if isinstance(path_or_file, (str, os.PathLike)):
            path = os.fspath(path_or_file)
            if format == "adapterhub" and not path.endswith(".zip"):
                _unzip_to_directory(data, path)
            else:
                _write_atomically(path, data)
            return ExportedAdapter(task_id=task_id, version=exported_version, size=len(data), path=path)
        path_or_file.write(data)
        return ExportedAdapter(task_id=task_id, version=exported_version, size=len(data))

    def import_adapter(
        self,
        task_id: str,
        path_or_bytes: Union[PathLike, bytes, bytearray, memoryview, IO[bytes]],
        timeout: Optional[float] = None,
        format: str = "adapterd",
    ) -> Task:
        """Creates task ``task_id`` from an adapter file (a path, the bytes, or a binary file object).

        The file's size is sent first, so a file the server would not take is refused
        before it is sent. AlreadyExists for an existing task; FailedPrecondition for a
        file trained on another encoder; InvalidArgument for a corrupt one. Not retried.

        ``format="adapterhub"`` imports an adapter AdapterHub's ``adapters`` library saved
        (``save_adapter``): the directory's path (its files are zipped here), or a zip of
        it. Options adapterd cannot compute exactly are InvalidArgument naming the field
        (Unimplemented for those not built yet). Such a directory carries no fingerprint
        of its model: the returned task's ``import_warning`` says what was not checked.
        """
        formats = {"adapterd": pb.ADAPTER_FORMAT_ADAPTERD, "adapterhub": pb.ADAPTER_FORMAT_ADAPTERHUB}
        if format not in formats:
            raise ValueError(f"format must be one of {sorted(formats)}, not {format!r}")
        if isinstance(path_or_bytes, (str, os.PathLike)) and os.path.isdir(os.fspath(path_or_bytes)):
            if format != "adapterhub":
                raise ValueError(f"{os.fspath(path_or_bytes)} is a directory: an AdapterHub adapter directory "
                                 "imports with format='adapterhub'")
            path_or_bytes = _zip_directory(os.fspath(path_or_bytes))
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            data = bytes(path_or_bytes)
        elif isinstance(path_or_bytes, (str, os.PathLike)):
            with open(os.fspath(path_or_bytes), "rb") as f:
                data = f.read()
        else:
            data = path_or_bytes.read()
        chunk = self._chunk_bytes

        def requests() -> Iterator[Any]:
            yield pb.ImportAdapterRequest(
                metadata=pb.ImportAdapterRequest.Metadata(task_id=task_id, total_bytes=len(data),
                                                          format=formats[format])
            )
            for offset in range(0, len(data), chunk):
                yield pb.ImportAdapterRequest(chunk=data[offset:offset + chunk])

        metadata = self._metadata(task_id)
        response = self._with_retries(
            lambda remaining: self._stub.ImportAdapter(requests(), timeout=remaining, metadata=metadata),
            False,
            timeout,
        )
        return Task.from_proto(response)

    # --- Predict ---------------------------------------------------------------------

    def predict(
        self,
        task_id: str,
        texts: Union[str, Sequence[str]],
        text_pairs: Optional[Union[str, Sequence[str]]] = None,
        contexts: Optional[Union[str, Sequence[str]]] = None,
        threshold: Optional[float] = None,
        top_k: Optional[int] = None,
        return_all_scores: bool = False,
        version: Optional[int] = None,
        batch_size: int = PREDICT_BATCH,
        timeout: Optional[float] = None,
    ) -> PredictResult:
        """Predicts with a task's current (or a given stored) version, for any task kind.

        Args:
            texts: one text or a list (extractive QA: the questions).
            text_pairs: second segments, one per text (pair classification).
            contexts: extractive QA's contexts, one per question (the same field as text_pairs).
            threshold: multi-label: the probability a label needs, in (0, 1] (None = the task's 0.5).
            top_k: extractive QA: answers per question, 1-20 (None = 1).
            return_all_scores: classification and multi-label: every label's probability too.
            version: a stored version; None = the current one.
            batch_size: texts per call; later calls use the version that served the first.

        Returns:
            A :class:`PredictResult`: one prediction per text, of the task kind's class
            (ClassificationPrediction, MultiLabelPrediction, RegressionPrediction,
            TokenClassificationPrediction or QuestionAnsweringPrediction).

        Raises:
            NotFound (unknown task), FailedPrecondition (no ready version), InvalidArgument
            (empty texts, pairs of the wrong count or kind), QuotaExceeded (rate or size).
        """
        if isinstance(texts, str):
            texts = [texts]
        if text_pairs is not None and contexts is not None:
            raise InvalidArgument(None, "give text_pairs or contexts (the same field), not both")
        pairs = contexts if contexts is not None else text_pairs
        if isinstance(pairs, str):
            pairs = [pairs]
        texts = list(texts)
        pairs = list(pairs) if pairs is not None else []
        if not texts:
            raise InvalidArgument(None, "no texts to predict")
        if pairs and len(pairs) != len(texts):
            raise InvalidArgument(
                None, f"got {len(pairs)} text pairs/contexts for {len(texts)} texts; give one per text"
            )
        if batch_size <= 0:
            raise ValueError("batch_size must be positive")
        served = version or 0
        kind = TaskKind.UNSPECIFIED
        predictions: List[Any] = []
        for begin in range(0, len(texts), batch_size):
            end = min(len(texts), begin + batch_size)
            request = pb.PredictRequest(
                task_id=task_id,
                texts=texts[begin:end],
                text_pairs=pairs[begin:end],
                return_all_scores=return_all_scores,
                version=served,
                threshold=threshold or 0.0,
                top_k_answers=top_k or 0,
            )
            response = self._unary("Predict", request, task_id, timeout=timeout)
            if len(response.predictions) != end - begin:
                raise Internal(
                    None, f"the server returned {len(response.predictions)} predictions for {end - begin} texts"
                )
            served = response.version
            kind = TaskKind(response.task_kind) if response.task_kind else TaskKind.SEQUENCE_CLASSIFICATION
            predictions.extend(prediction_from_proto(p, kind) for p in response.predictions)
        return PredictResult(task_id=task_id, version=served, kind=kind, predictions=tuple(predictions))


def _write_atomically(path: str, data: bytes) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".adapterd-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


__all__ = [
    "Client",
    "RetryPolicy",
    "ServingStatus",
    "dataset_format",
    "dataset_id_for_file",
    "DEFAULT_TARGET",
    "API_KEY_ENV",
]
