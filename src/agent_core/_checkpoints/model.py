"""What a checkpoint records: the journal records and the state of one path (pure data).

A *state* describes one path at one moment: ``missing``, a regular ``file`` (its size, mode and the
SHA-256 of its content; ``sha`` is ``None`` when the content was not captured, and ``note`` says why:
``too_large``, ``sensitive``, ``store_full``, ``unreadable``), a ``symlink`` (its target text) or a ``dir``.
Two states are *the same* when kind, content hash (or, uncaptured, size and modification time), mode and
link target agree (:func:`same_state`).

A :class:`CheckpointRecord` is one tool call's checkpoint: the entries (path, state before, state after) of
every path it changed, when it was opened and closed, and ``complete = False`` when a command's walk hit
``checkpoints.max_files``. A :class:`RewindRecord` marks checkpoints undone by a rewind. Both are lines of
the session's journal (``journal.jsonl``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from agent_core.types.base import StrictModel, empty_list

StateKind = Literal["missing", "file", "symlink", "dir"]
Note = Literal["too_large", "sensitive", "store_full", "unreadable"]


class FileState(StrictModel):
    kind: StateKind
    sha: str | None = None
    """SHA-256 of the content (a ``file`` whose content is in the store); ``None``: not captured."""
    size: int | None = None
    mode: int | None = None
    """Permission bits (``stat.S_IMODE``)."""
    mtime_ns: int | None = None
    target: str | None = None
    """A ``symlink``'s target text."""
    note: Note | None = None
    """Why a file's content was not captured."""

    @property
    def restorable(self) -> bool:
        """A rewind can recreate this state."""
        return self.kind != "file" or self.sha is not None


MISSING = FileState(kind="missing")


def same_state(a: FileState, b: FileState) -> bool:
    """``a`` and ``b`` describe the same content (see the module docstring)."""
    if a.kind != b.kind:
        return False
    if a.kind == "symlink":
        return a.target == b.target
    if a.kind != "file":
        return True
    if a.sha is not None and b.sha is not None:
        return a.sha == b.sha and (a.mode is None or b.mode is None or a.mode == b.mode)
    return (a.size, a.mtime_ns) == (b.size, b.mtime_ns)


class Entry(StrictModel):
    path: str
    """Absolute path (resolved when it was recorded)."""
    before: FileState
    after: FileState


class CheckpointRecord(StrictModel):
    type: Literal["checkpoint"] = "checkpoint"
    checkpoint_id: str
    session_id: str
    run_id: str
    agent_id: str
    tool_call_id: str
    tool_name: str
    kind: Literal["files", "walk"]
    """``files``: the call's known targets (write/edit); ``walk``: a command's changes, found by walking."""
    base_node_seq: int | None = None
    """The ``node_seq`` of the last node of the calling agent's path when the call started."""
    opened_at: float
    closed_at: float
    complete: bool = True
    """``False``: the walk stopped at ``checkpoints.max_files`` (changes beyond it are not recorded)."""
    entries: list[Entry] = Field(default_factory=empty_list)

    @property
    def window(self) -> tuple[float, float]:
        return self.opened_at, self.closed_at

    def overlaps(self, other: CheckpointRecord) -> bool:
        return self.opened_at <= other.closed_at and other.opened_at <= self.closed_at


class RewindRecord(StrictModel):
    type: Literal["rewind"] = "rewind"
    rewind_id: str
    node_id: str
    checkpoint_ids: list[str]
    at: float
