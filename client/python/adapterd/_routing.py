"""Task routing metadata (common/routing.h): the task a server-minted id carries."""

from __future__ import annotations

import re
from typing import Optional

#: Metadata key a task-sharding router hashes on.
TASK_ROUTING_HEADER = "x-task-id"

_MINTED = re.compile(r"^(?:job|ds)-[0-9a-f]{19}\.([\x21-\x7e]+)$")


def routing_task_of(minted_id: str) -> str:
    """The task a minted job or dataset id was made for: ``job-<19 hex>.<task>`` or ``ds-<19 hex>.<task>``.

    "" when the id is not minted or carries no task (client-chosen dataset ids,
    datasets uploaded without a task).
    """
    match = _MINTED.match(minted_id)
    return match.group(1) if match else ""


def is_printable_ascii(value: str) -> bool:
    """What a plain (non "-bin") gRPC metadata value may hold."""
    return all(0x20 <= ord(c) <= 0x7E for c in value)


def task_metadata(task_id: Optional[str]) -> Optional[str]:
    """The x-task-id value for ``task_id``, or None when there is none or it cannot be metadata."""
    if task_id and is_printable_ascii(task_id):
        return task_id
    return None
