"""Rewinding a session's files to a node: the plan (pure) and carrying it out.

**Which changes.** The checkpoints to undo are those of this session not undone by an earlier rewind whose
tool node comes after the target node (``node_seq`` greater than the target's; a checkpoint whose node was
never written — the process stopped during the call — counts from the node its call was made in). Child
agents' calls count too: files are one timeline per session, whatever agent changed them.

**Per path**, the checkpoints touching it form a chain in the order they closed: the path goes back to the
state before the first, provided that

* it is still in the state recorded after the last (else it was *changed since by someone else*), and
* each checkpoint started from the state the previous one left (else it was changed outside this session
  between two of its calls).

Either failure is a **conflict**: the whole rewind is refused with the list, and nothing is written.

**Left alone** (reported as skipped, never written): a path outside the write roots or below a symlinked
directory, a protected path (git internals, soong-agent's state, credential files), a state whose content
was not captured (sensitive, too large, store full), and a change another session made: a path that a
checkpoint of another session, open at the same time, also recorded — unless this session's checkpoint
wrote that path itself (a write/edit tool) and the other one only observed it (a command's walk).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

from agent_core._checkpoints.model import CheckpointRecord, Entry, FileState, RewindRecord, same_state
from agent_core._checkpoints.store import CheckpointStore
from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.tools._safe_fs import open_dir

NOT_CAPTURED = {
    "sensitive": "a sensitive or credential file: its content is never stored",
    "too_large": "its earlier content was larger than checkpoints.max_file_bytes and was not stored",
    "store_full": "the checkpoint store was full (checkpoints.max_store_bytes)",
    "unreadable": "its earlier content could not be read",
}


@dataclass(slots=True, frozen=True)
class Conflict:
    path: str
    reason: str


@dataclass(slots=True, frozen=True)
class Action:
    """Put ``path`` back into ``state`` (it is now in ``current``)."""

    path: str
    state: FileState
    current: FileState


@dataclass(slots=True)
class Plan:
    checkpoint_ids: list[str] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)
    skipped: list[Conflict] = field(default_factory=list)


def position(record: CheckpointRecord, node_seqs: Mapping[str, int]) -> float:
    """Where a checkpoint sits in the session's node order (see the module docstring)."""
    seq = node_seqs.get(record.checkpoint_id)
    if seq is not None:
        return float(seq)
    return record.base_node_seq + 0.5 if record.base_node_seq is not None else float("inf")


def to_undo(
    journal: Sequence[CheckpointRecord | RewindRecord], boundary: int, node_seqs: Mapping[str, int]
) -> list[CheckpointRecord]:
    """The checkpoints a rewind to the node with ``node_seq == boundary`` undoes, in closing order."""
    undone = {cid for r in journal if isinstance(r, RewindRecord) for cid in r.checkpoint_ids}
    records = [r for r in journal if isinstance(r, CheckpointRecord) and r.checkpoint_id not in undone]
    chosen = [r for r in records if position(r, node_seqs) > boundary]
    return sorted(chosen, key=lambda r: r.closed_at)


def _claimed_elsewhere(
    record: CheckpointRecord, entry: Entry, others: Iterable[CheckpointRecord]
) -> CheckpointRecord | None:
    """Another session's checkpoint that recorded ``entry.path`` while ``record`` was open, when the change
    may be that session's (see the module docstring)."""
    for other in others:
        if other.session_id == record.session_id or not other.overlaps(record):
            continue
        if not any(e.path == entry.path for e in other.entries):
            continue
        if record.kind == "files" and other.kind == "walk":
            continue  # this session wrote it; the other command only saw it change
        return other
    return None


def plan_rewind(
    undo: Sequence[CheckpointRecord],
    current: Callable[[str], FileState],
    *,
    others: Sequence[CheckpointRecord] = (),
    refuse: Callable[[str], str | None] = lambda path: None,
) -> Plan:
    """What a rewind undoing ``undo`` (closing order) does. ``current(path)`` is the path's state now,
    ``refuse(path)`` why it may never be written (``None``: it may), ``others`` the checkpoints of other
    sessions (for changes that may be theirs)."""
    plan = Plan(checkpoint_ids=[r.checkpoint_id for r in undo])
    chains: dict[str, list[tuple[CheckpointRecord, Entry]]] = {}
    for record in undo:
        for entry in record.entries:
            chains.setdefault(entry.path, []).append((record, entry))
    for path in sorted(chains):
        chain = chains[path]
        claimed = next(
            (o for r, e in chain if (o := _claimed_elsewhere(r, e, others)) is not None),
            None,
        )
        if claimed is not None:
            plan.skipped.append(
                Conflict(path, f"also changed by session {claimed.session_id} at the same time: left alone")
            )
            continue
        why = refuse(path)
        if why is not None:
            plan.skipped.append(Conflict(path, why))
            continue
        broken = next(
            (b for (_, a), (b, e) in pairwise(chain) if not same_state(a.after, e.before)),
            None,
        )
        if broken is not None:
            plan.conflicts.append(
                Conflict(
                    path, f"changed outside this session before {broken.tool_name} ({broken.tool_call_id})"
                )
            )
            continue
        now = current(path)
        if not same_state(now, chain[-1][1].after):
            plan.conflicts.append(Conflict(path, "changed since by someone else"))
            continue
        target = chain[0][1].before
        if not target.restorable:
            plan.skipped.append(
                Conflict(path, NOT_CAPTURED.get(target.note or "", "its content was not captured"))
            )
            continue
        if not same_state(now, target):
            plan.actions.append(Action(path, target, now))
    return plan


def conflict_error(conflicts: Sequence[Conflict]) -> AgentCoreError:
    shown = "; ".join(f"{c.path} ({c.reason})" for c in conflicts[:10])
    more = f"; and {len(conflicts) - 10} more" if len(conflicts) > 10 else ""
    return AgentCoreError(
        ErrorCode.path_conflict,
        f"rewind refused, nothing was changed: {len(conflicts)} file(s) changed since: {shown}{more}",
        details={"conflicts": [{"path": c.path, "reason": c.reason} for c in conflicts]},
    )


# ---- carrying it out ---------------------------------------------------------------------------


def _depth(path: str) -> int:
    return path.count(os.sep)


def _write_file(parent_fd: int, name: str, data: bytes, mode: int) -> None:
    """Replaces ``name`` in ``parent_fd`` with a regular file (temp file + rename: a symlink there is
    replaced, never written through)."""
    tmp = f".{name[:64]}.{secrets.token_hex(6)}.soong-rewind"
    fd = os.open(
        tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=parent_fd
    )
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
        os.replace(tmp, name, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=parent_fd)
        raise


def _remove(parent_fd: int, name: str) -> None:
    try:
        st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        os.rmdir(name, dir_fd=parent_fd)
    else:
        os.unlink(name, dir_fd=parent_fd)


def _put(path: str, state: FileState, content: bytes | None) -> None:
    """Makes ``path`` be ``state`` (parent directories created; no symlink followed on the way)."""
    target = Path(path)
    parent = open_dir(target.parent, create=state.kind != "missing")
    try:
        name = target.name
        if state.kind == "missing":
            _remove(parent, name)
        elif state.kind == "dir":
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, state.mode if state.mode is not None else 0o777, dir_fd=parent)
        elif state.kind == "symlink":
            assert state.target is not None
            tmp = f".{name[:64]}.{secrets.token_hex(6)}.soong-rewind"
            os.symlink(state.target, tmp, dir_fd=parent)
            os.replace(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
        else:
            assert content is not None
            _write_file(parent, name, content, state.mode if state.mode is not None else 0o644)
    finally:
        os.close(parent)


@dataclass(slots=True)
class Applied:
    restored: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    skipped: list[Conflict] = field(default_factory=list)


def apply_plan(plan: Plan, store: CheckpointStore, read_current: Callable[[str], bytes | None]) -> Applied:
    """Carries out ``plan``: directories first (shallowest first), then files and links, then removals
    (deepest first; a directory that is not empty is left and reported). If a step fails, the steps done
    are undone (best effort) and the error is raised."""
    contents: dict[str, bytes] = {}
    for action in plan.actions:
        if action.state.kind == "file":
            assert action.state.sha is not None
            contents[action.path] = store.get(action.state.sha)
    creates = sorted((a for a in plan.actions if a.state.kind == "dir"), key=lambda a: _depth(a.path))
    writes = [a for a in plan.actions if a.state.kind in ("file", "symlink")]
    removals = sorted((a for a in plan.actions if a.state.kind == "missing"), key=lambda a: -_depth(a.path))
    applied = Applied()
    done: list[tuple[Action, bytes | None]] = []
    try:
        for action in [*creates, *writes, *removals]:
            previous = read_current(action.path) if action.current.kind == "file" else None
            try:
                _put(action.path, action.state, contents.get(action.path))
            except OSError as exc:
                if action.state.kind == "missing" and exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                    applied.skipped.append(Conflict(action.path, "a directory that is not empty: left"))
                    continue
                raise
            done.append((action, previous))
            (applied.removed if action.state.kind == "missing" else applied.restored).append(action.path)
    except BaseException:
        for action, previous in reversed(done):
            with contextlib.suppress(Exception):
                _put(action.path, action.current, previous)
        raise
    return applied
