"""Retries with exponential backoff and jitter, for idempotent calls only."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Optional, Union

import grpc

#: The only code retried: the server is unreachable, starting or draining,
#: and did not act on the call (docs/API.md, "Transport security": "retry it
#: elsewhere, with backoff").
RETRYABLE_CODES = frozenset({grpc.StatusCode.UNAVAILABLE})


@dataclass(frozen=True)
class RetryPolicy:
    """How idempotent calls are retried on UNAVAILABLE.

    Attempt n (n >= 1) that fails is followed, if ``n < max_attempts`` and the
    call's deadline leaves room, by a sleep of ``min(max_backoff,
    initial_backoff * multiplier**(n-1))`` scaled by a random factor in
    ``[1 - jitter, 1]`` (so clients that lost the same server do not come back
    in lockstep). ``max_attempts=1`` turns retries off.
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
        """Seconds to wait after failed attempt ``attempt`` (1-based)."""
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
