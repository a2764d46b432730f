"""The durable per-agent inbox (``AgentRuntime.deliver``): what an entry is.

An entry is delivered to one agent of one session (``runtime.deliver(session_id, agent_id, entry)``) and
reaches that agent's model once, inside one synthetic ``<inbox>`` note written to the conversation's tail
before the agent's next model step (or at the start of a wake-up run when the agent was idle). See
``docs/teams.md``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import ConfigDict, Field

from agent_core.types.base import FrozenModel

InboxKind = Literal["message", "request", "response", "job_result", "schedule", "channel"]
"""What an entry is: a plain message, a teammate protocol request or its response (correlated by
``request_id``), a background job's result, a due schedule's message, or a chat channel's message."""

INBOX_KINDS: tuple[str, ...] = ("message", "request", "response", "job_result", "schedule", "channel")


def _empty() -> dict[str, Any]:
    return {}


class InboxEntry(FrozenModel):
    """One inbox entry. ``from`` (``from_`` in Python) names the sender as the model sees it (a teammate's
    name, ``"lead"``, ``"job:<job_id>"``, ``"schedule:<schedule_id>"``, a channel address, ...).

    ``entry_id`` and ``created_at`` are set on delivery when left out; ``metadata`` carries kind-specific
    fields (``request_kind`` of a request, ``approve`` of a response, ...) shown to the model as attributes.
    """

    model_config = ConfigDict(
        extra="forbid", frozen=True, defer_build=True, populate_by_name=True, serialize_by_alias=True
    )

    entry_id: str | None = None
    kind: InboxKind
    from_: str = Field(alias="from", min_length=1, max_length=200)
    content: str
    request_id: str | None = None
    created_at: datetime | None = None
    metadata: dict[str, Any] = Field(default_factory=_empty)


class InboxDelivery(FrozenModel):
    """What ``AgentRuntime.deliver`` returns: the stored entry, its recipient and what wakes it.

    ``run_id`` is the run that will read the entry when one is known in this process: the recipient's
    live (or queued) run, or the wake-up run started for it. ``None`` when the recipient is busy in
    another process or was not woken (``wake=False``); the entry then waits for its next run.
    """

    entry: InboxEntry
    session_id: str
    agent_id: str
    depth: int
    """Unread entries of the recipient after this one."""
    run_id: str | None = None
    woke: bool = False
    """A wake-up run was started for this entry."""
