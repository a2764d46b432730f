"""The ``<inbox>`` note: the one synthetic message that carries drained inbox entries to the model.

Pure text. Every entry becomes one ``<entry>`` element naming its kind and sender (and its request id,
request kind or answer when it has them) as attributes; attribute values are HTML-escaped and entry text
has every tag opener escaped, so no sender can close the note or forge another entry. The note is written
as a ``system_note`` node at the tail of the conversation (never into the system prompt).
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from agent_core._notes import escape_note_text
from agent_core.types.inbox import InboxEntry

NOTE_SOURCE = "inbox"
"""``metadata.source`` of the note node (its rendering is the note text itself)."""
_ATTRIBUTES = ("request_kind", "approve", "job_id", "schedule_id", "status", "channel")


def _attr(value: object) -> str:
    if isinstance(value, bool):
        value = "true" if value else "false"
    return escape(str(value), quote=True)


def entry_text(entry: InboxEntry) -> str:
    attrs = [f'kind="{_attr(entry.kind)}"', f'from="{_attr(entry.from_)}"']
    if entry.request_id:
        attrs.append(f'request_id="{_attr(entry.request_id)}"')
    for key in _ATTRIBUTES:
        if key in entry.metadata and entry.metadata[key] is not None:
            attrs.append(f'{key}="{_attr(entry.metadata[key])}"')
    if entry.created_at is not None:
        attrs.append(f'at="{entry.created_at:%Y-%m-%dT%H:%M:%SZ}"')
    return f"<entry {' '.join(attrs)}>\n{escape_note_text(entry.content)}\n</entry>"


def inbox_note(entries: Sequence[InboxEntry], *, can_respond: bool = False) -> str:
    """The note for ``entries`` (oldest first). ``can_respond``: the agent has ``agent.team_respond``, and
    the note reminds it to answer the requests it holds."""
    lines = ["<inbox>"]
    if can_respond and any(e.kind == "request" for e in entries):
        lines.append(
            "Requests below wait for your answer: call agent.team_respond(request_id, approve, reason)."
        )
    lines.extend(entry_text(e) for e in entries)
    lines.append("</inbox>")
    return "\n".join(lines)
