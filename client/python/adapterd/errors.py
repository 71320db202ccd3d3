"""Typed errors of the adapterd client: one class per gRPC status code.

Every failed call raises a subclass of :class:`AdapterdError`, chosen by the
call's gRPC status code (the codes the server uses are listed in
proto/adapterd/v1/adapterd_service.proto). Checks the client makes itself
(a malformed dataset file, a bad argument) raise the class of the code the
server would have answered, usually :class:`InvalidArgument`. A training job
that ends FAILED or CANCELLED while :meth:`adapterd.Client.train` waits for it
raises :class:`JobFailed` / :class:`JobCancelled`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple, Type

import grpc

if TYPE_CHECKING:  # pragma: no cover
    from adapterd.records import TrainingJob


class AdapterdError(Exception):
    """A failed adapterd call.

    Attributes:
        code: the gRPC status code (``grpc.StatusCode``).
        message: the server's (or the client's) message, human-readable.
        details: gRPC's debug string of the failure, when gRPC gave one
            (useful for connection failures); None otherwise.
    """

    #: The status code the class stands for (the base class: UNKNOWN).
    default_code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(self, code: Optional[grpc.StatusCode], message: str, details: Optional[str] = None) -> None:
        self.code: grpc.StatusCode = code if code is not None else self.default_code
        self.message: str = message
        self.details: Optional[str] = details
        super().__init__(f"{self.code.name}: {message}" if message else self.code.name)

    def __reduce__(self) -> Tuple[Any, ...]:  # keeps errors picklable (multiprocessing, pytest-xdist)
        return (_rebuild, (type(self), self.code.name, self.message, self.details))


def _rebuild(cls: Type[AdapterdError], code_name: str, message: str, details: Optional[str]) -> AdapterdError:
    error = cls.__new__(cls)
    AdapterdError.__init__(error, grpc.StatusCode[code_name], message, details)
    return error


class Cancelled(AdapterdError):
    """CANCELLED: the call was cancelled (by the client, or a client stream ended unclosed)."""

    default_code = grpc.StatusCode.CANCELLED


class Unknown(AdapterdError):
    """UNKNOWN: an error gRPC could not classify."""

    default_code = grpc.StatusCode.UNKNOWN


class InvalidArgument(AdapterdError):
    """INVALID_ARGUMENT: bad input whatever the server's state (ids, texts, files, hyperparameters)."""

    default_code = grpc.StatusCode.INVALID_ARGUMENT


class DeadlineExceeded(AdapterdError):
    """DEADLINE_EXCEEDED: the call's deadline (``timeout``) passed."""

    default_code = grpc.StatusCode.DEADLINE_EXCEEDED


class NotFound(AdapterdError):
    """NOT_FOUND: an unknown resource, or another tenant's."""

    default_code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(AdapterdError):
    """ALREADY_EXISTS: importing onto an existing task, or a dataset id already used."""

    default_code = grpc.StatusCode.ALREADY_EXISTS


class PermissionDenied(AdapterdError):
    """PERMISSION_DENIED: the caller may not do this."""

    default_code = grpc.StatusCode.PERMISSION_DENIED


class QuotaExceeded(AdapterdError):
    """RESOURCE_EXHAUSTED: a quota or limit (tasks, queued jobs, texts per Predict, bytes, rate, message size)."""

    default_code = grpc.StatusCode.RESOURCE_EXHAUSTED


class FailedPrecondition(AdapterdError):
    """FAILED_PRECONDITION: the state does not allow it (no ready version, a finished job, another encoder)."""

    default_code = grpc.StatusCode.FAILED_PRECONDITION


class Aborted(AdapterdError):
    """ABORTED: the operation was aborted."""

    default_code = grpc.StatusCode.ABORTED


class OutOfRange(AdapterdError):
    """OUT_OF_RANGE."""

    default_code = grpc.StatusCode.OUT_OF_RANGE


class Unimplemented(AdapterdError):
    """UNIMPLEMENTED: the server does not have this method (e.g. no health service)."""

    default_code = grpc.StatusCode.UNIMPLEMENTED


class Internal(AdapterdError):
    """INTERNAL: a server-side bug, or a request gRPC could not deserialise."""

    default_code = grpc.StatusCode.INTERNAL


class Unavailable(AdapterdError):
    """UNAVAILABLE: the server is unreachable, starting, draining or shutting down (retry with backoff)."""

    default_code = grpc.StatusCode.UNAVAILABLE


class DataLoss(AdapterdError):
    """DATA_LOSS: e.g. an adapter export that did not add up to the size the server announced."""

    default_code = grpc.StatusCode.DATA_LOSS


class Unauthenticated(AdapterdError):
    """UNAUTHENTICATED: a missing or unknown API key (multi-tenant servers)."""

    default_code = grpc.StatusCode.UNAUTHENTICATED


class _JobEnded(AdapterdError):
    """A training job ended without succeeding; ``job`` is its final state."""

    _ended = "ended"

    def __init__(self, job: "TrainingJob") -> None:
        message = f"job {job.job_id} {self._ended}"
        if job.error_message:
            message += f": {job.error_message}"
        super().__init__(self.default_code, message)
        self.job = job

    def __reduce__(self) -> Tuple[Any, ...]:
        return (type(self), (self.job,))


class JobFailed(_JobEnded):
    """A training job ended FAILED; ``job`` is its final state (``job.error_message`` says why).

    Its code is ABORTED, as adapterctl reports it.
    """

    default_code = grpc.StatusCode.ABORTED
    _ended = "FAILED"


class JobCancelled(_JobEnded):
    """A training job ended CANCELLED; ``job`` is its final state."""

    default_code = grpc.StatusCode.CANCELLED
    _ended = "was CANCELLED"


_BY_CODE: Dict[grpc.StatusCode, Type[AdapterdError]] = {
    cls.default_code: cls
    for cls in (
        Cancelled,
        Unknown,
        InvalidArgument,
        DeadlineExceeded,
        NotFound,
        AlreadyExists,
        PermissionDenied,
        QuotaExceeded,
        FailedPrecondition,
        Aborted,
        OutOfRange,
        Unimplemented,
        Internal,
        Unavailable,
        DataLoss,
        Unauthenticated,
    )
}


def error_class(code: grpc.StatusCode) -> Type[AdapterdError]:
    """The AdapterdError subclass for ``code`` (AdapterdError itself for OK or an unknown code)."""
    return _BY_CODE.get(code, AdapterdError)


def from_rpc_error(error: grpc.RpcError) -> AdapterdError:
    """The typed error for a failed gRPC call (a ``grpc.RpcError`` that is also a ``grpc.Call``)."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    message = error.details() if hasattr(error, "details") else str(error)
    debug = error.debug_error_string() if hasattr(error, "debug_error_string") else None
    if code is None:
        code = grpc.StatusCode.UNKNOWN
    return error_class(code)(code, message or "", debug)


__all__ = [
    "AdapterdError",
    "Cancelled",
    "Unknown",
    "InvalidArgument",
    "DeadlineExceeded",
    "NotFound",
    "AlreadyExists",
    "PermissionDenied",
    "QuotaExceeded",
    "FailedPrecondition",
    "Aborted",
    "OutOfRange",
    "Unimplemented",
    "Internal",
    "Unavailable",
    "DataLoss",
    "Unauthenticated",
    "JobFailed",
    "JobCancelled",
    "error_class",
    "from_rpc_error",
]
