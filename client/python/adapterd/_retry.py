"""Retries on UNAVAILABLE, for idempotent calls only.

Unary calls are retried by gRPC itself: the channel carries a service config
(:func:`service_config`) whose ``retryPolicy`` names the idempotent methods.
The streams the client restarts itself (a job watch re-subscribed after its
last event, an adapter export downloaded again, an upload under a
content-derived id sent again) wait :meth:`RetryPolicy.backoff` between
attempts; gRPC cannot retry them:

* gRPC commits a call, and retries it no more, once response headers or a
  message arrived: a watch or an export broken after its first message ends
  with the error.
* A service config is per method, and UploadDataset is retried only when the
  dataset id is content-derived; gRPC also stops retrying a client stream
  once it has sent more than ``grpc.per_rpc_retry_buffer_size`` (256 KiB).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple, Union

import grpc

#: The only code retried: the server is unreachable, starting or draining,
#: and did not act on the call (docs/API.md, "Transport security": "retry it
#: elsewhere, with backoff").
RETRYABLE_CODES = frozenset({grpc.StatusCode.UNAVAILABLE})

#: gRPC makes at most 5 attempts of a call: it clamps a larger ``maxAttempts``
#: (logging an error), and no channel argument raises the limit.
GRPC_MAX_ATTEMPTS = 5

ADAPTERD_SERVICE = "adapterd.v1.Adapterd"
HEALTH_SERVICE = "grpc.health.v1.Health"

#: The unary methods gRPC retries, (service, method): those whose effect is the
#: same however often they run. Reads, Predict and health; the deletes and
#: CancelTrainingJob (a delete retried after an attempt that did land raises
#: NotFound); CreateTrainingJob, which the client always sends with a
#: request_id (the server returns the same job for the same id and payload).
#: Every other method gets no retryPolicy.
RETRIED_UNARY_METHODS: Tuple[Tuple[str, str], ...] = tuple(
    (ADAPTERD_SERVICE, method)
    for method in (
        "GetDataset",
        "ListDatasets",
        "DeleteDataset",
        "CreateTrainingJob",
        "GetTrainingJob",
        "ListTrainingJobs",
        "CancelTrainingJob",
        "GetTask",
        "ListTasks",
        "DeleteTask",
        "Predict",
    )
) + ((HEALTH_SERVICE, "Check"),)


@dataclass(frozen=True)
class RetryPolicy:
    """How idempotent calls are retried on UNAVAILABLE. ``max_attempts=1`` turns retries off.

    Unary calls (gRPC's retryPolicy, :func:`service_config`): after failed
    attempt 1, gRPC waits ``initial_backoff``; after attempt n >= 2,
    ``min(max_backoff, initial_backoff * multiplier**(n-1))`` times a random
    factor in [0.8, 1.2] (gRPC's jitter: ``jitter`` is not used). At most
    ``min(max_attempts, 5)`` attempts (:data:`GRPC_MAX_ATTEMPTS`); backoffs
    are whole milliseconds, at least 1. A retry that would start after the
    call's deadline is not made: the call ends DEADLINE_EXCEEDED at its
    deadline.

    Streams the client restarts (watch, export, content-addressed upload):
    attempt n that fails is followed, if ``n < max_attempts`` and the deadline
    leaves room (else the UNAVAILABLE is raised at once), by a sleep of
    :meth:`backoff` ``(n)``.
    """

    max_attempts: int = 5
    initial_backoff: float = 0.2
    max_backoff: float = 5.0
    multiplier: float = 2.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.initial_backoff < 0 or self.max_backoff < 0 or self.multiplier < 1:
            raise ValueError("backoffs must be non-negative and the multiplier at least 1")
        if not 0 <= self.jitter <= 1:
            raise ValueError("jitter must be in [0, 1]")

    def backoff(self, attempt: int, rng: Optional[random.Random] = None) -> float:
        """Seconds a restarted stream waits after failed attempt ``attempt`` (1-based).

        ``min(max_backoff, initial_backoff * multiplier**(attempt-1))`` scaled by a
        random factor in ``[1 - jitter, 1]`` (so clients that lost the same server
        do not come back in lockstep).
        """
        base = min(self.max_backoff, self.initial_backoff * self.multiplier ** (attempt - 1))
        factor = 1.0 - self.jitter * (rng or random).random()
        return base * factor

    @classmethod
    def of(cls, value: Union["RetryPolicy", int, None]) -> "RetryPolicy":
        """A policy from a RetryPolicy, a number of attempts, or None/0 (no retries)."""
        if isinstance(value, RetryPolicy):
            return value
        if value is None or value == 0:
            return cls(max_attempts=1)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"retries must be a RetryPolicy or a number of attempts, got {value!r}")
        return cls(max_attempts=value)


NO_RETRIES = RetryPolicy(max_attempts=1)


def _duration(seconds: float) -> str:
    """A google.protobuf.Duration in JSON, whole milliseconds and at least 1 (gRPC refuses 0)."""
    return f"{max(1, round(seconds * 1000)) / 1000:.3f}s"


def retry_policy_json(policy: RetryPolicy) -> Optional[Dict[str, Any]]:
    """The service config's ``retryPolicy`` for ``policy``; None when it makes one attempt."""
    if policy.max_attempts < 2:
        return None  # gRPC refuses maxAttempts below 2: no policy is no retries
    return {
        "maxAttempts": min(policy.max_attempts, GRPC_MAX_ATTEMPTS),
        "initialBackoff": _duration(policy.initial_backoff),
        "maxBackoff": _duration(policy.max_backoff),
        "backoffMultiplier": policy.multiplier,
        "retryableStatusCodes": sorted(code.name for code in RETRYABLE_CODES),
    }


def service_config(policy: RetryPolicy) -> Optional[str]:
    """The channel's service config (JSON): ``policy`` for :data:`RETRIED_UNARY_METHODS`; None for no retries."""
    retry = retry_policy_json(policy)
    if retry is None:
        return None
    names: List[Dict[str, str]] = [{"service": s, "method": m} for s, m in RETRIED_UNARY_METHODS]
    return json.dumps({"methodConfig": [{"name": names, "retryPolicy": retry}]})
