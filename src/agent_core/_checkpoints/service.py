"""Checkpoints around tool calls: the tool pipeline opens one before the handler runs and closes it after.

Which calls (``CheckpointService.kind_for``): ``code.write_file`` and ``code.edit_file`` record their
targets (``files``); ``code.run_command`` and declarative tools (commands) walk the write roots
(``walk``, :mod:`agent_core._checkpoints.walk`) unless ``checkpoints.commands = false``. Nothing when
``checkpoints.enabled = false``.

* ``files``: before the handler, each target's state is captured (content stored, unless sensitive or
  larger than ``max_file_bytes``); after it, the new state. Entries are the targets that changed.
* ``walk``: before the command, the write roots are walked; a file whose ``stat`` differs from the
  session's stat cache (every file, the first time) is read and stored, so its prior content can be put
  back; afterwards they are walked again and every path whose ``stat``, kind or link target differs is an
  entry (its new content stored too: the next command's prior state). The walks of one session are
  serialised; the commands themselves are not.

Closing writes the checkpoint to the session's journal (also when nothing changed) and returns its id,
which the pipeline records on the tool node (``metadata.checkpoint_id``). A checkpoint that cannot be
taken (disk full, unreadable tree) is logged and the call runs without one: a rewind then cannot undo it
and refuses the files it changed as changed elsewhere (their state no longer matches).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import stat
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from agent_core._checkpoints.model import (
    MISSING,
    CheckpointRecord,
    Entry,
    FileState,
    same_state,
)
from agent_core._checkpoints.store import CheckpointStore, StatSig, digest
from agent_core._checkpoints.walk import Seen, WalkResult, WalkRules, walk
from agent_core._ids import new_id, validate_session_id
from agent_core.config.schema import Settings
from agent_core.permissions._protected import credential_entries
from agent_core.tools._paths import SensitiveMatcher, resolve_dir, user_home, write_roots
from agent_core.tools.preflight import Preflight
from agent_core.types.model import ToolCall
from agent_core.types.tools import ToolDefinition

log = logging.getLogger(__name__)

KEPT_SESSIONS = 16
FILE_TOOLS = frozenset({"code.write_file", "code.edit_file"})
COMMAND_TOOLS = frozenset({"code.run_command"})
Kind = Literal["files", "walk"]
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


@dataclass(slots=True)
class SessionCheckpoints:
    """One session's store, stat cache and walk lock (loaded on first use)."""

    store: CheckpointStore
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    cache: dict[str, tuple[StatSig, str | None]] | None = None
    dirty: bool = False
    """The stat cache changed since it was last saved."""


@dataclass(slots=True)
class OpenCheckpoint:
    """A checkpoint between the states before and after one call."""

    checkpoint_id: str
    kind: Kind
    session: SessionCheckpoints
    session_id: str
    run_id: str
    agent_id: str
    tool_call_id: str
    tool_name: str
    base_node_seq: int | None
    opened_at: float
    targets: dict[str, FileState] = field(default_factory=dict)
    """``files``: each target's state before the call."""
    sensitive: bool = False
    roots: tuple[Path, ...] = ()
    before: WalkResult | None = None
    """``walk``: the walk before the command."""
    hashes: dict[str, str | None] = field(default_factory=dict)
    """``walk``: the content hash of each file of ``before`` (``None``: not captured)."""


def _sig(st: os.stat_result) -> StatSig:
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, stat.S_IMODE(st.st_mode))


class CheckpointService:
    """One per runtime: opens and closes checkpoints, per session (see the module docstring)."""

    def __init__(self, settings: Settings, home: Path) -> None:
        self._settings = settings.checkpoints
        self._tools = settings.tools
        self._home = home
        self._sessions: OrderedDict[str, SessionCheckpoints] = OrderedDict()
        """The sessions used lately (their stat caches in memory), most recent last."""

    # ---- which calls ----------------------------------------------------------------------------

    def kind_for(self, definition: ToolDefinition) -> Kind | None:
        if not self._settings.enabled:
            return None
        if definition.name in FILE_TOOLS:
            return "files"
        commands = definition.name in COMMAND_TOOLS or definition.metadata.get("source") == "declarative"
        return "walk" if commands and self._settings.commands else None

    def directory(self, session_id: str) -> Path:
        return self._home / "sessions" / validate_session_id(session_id) / "checkpoints"

    def session(self, session_id: str) -> SessionCheckpoints:
        """The session's checkpoint state; at most :data:`KEPT_SESSIONS` stay in memory (an idle one is
        dropped and its stat cache read from disk again when it is next used)."""
        found = self._sessions.get(session_id)
        if found is None:
            store = CheckpointStore(
                self.directory(session_id), max_store_bytes=self._settings.max_store_bytes
            )
            found = self._sessions[session_id] = SessionCheckpoints(store)
            idle = [sid for sid, s in self._sessions.items() if sid != session_id and not s.lock.locked()]
            for sid in idle[: max(0, len(self._sessions) - KEPT_SESSIONS)]:
                del self._sessions[sid]
        else:
            self._sessions.move_to_end(session_id)
        return found

    def forget(self, session_id: str) -> None:
        """Drops the in-memory state of a deleted session."""
        self._sessions.pop(session_id, None)

    def rules(self, project: Path) -> WalkRules:
        home = user_home()
        matcher = SensitiveMatcher.from_entries(
            [*self._tools.sensitive_paths, *credential_entries()],
            soong_home=resolve_dir(self._home),
            project_dir=project,
            home=home,
        )
        return WalkRules(
            sensitive=matcher,
            max_files=self._settings.max_files,
            use_gitignore=self._settings.use_gitignore,
            exclude=tuple(self._settings.exclude),
        )

    def roots(self, project: Path) -> tuple[Path, ...]:
        """The write roots a command's walk covers (the temporary directory never: it is not the project's)."""
        roots = write_roots(project, self._tools.allowed_write_roots, allow_tmp=False)
        return tuple(
            r for r in roots if not any(r != o and str(r).startswith(str(o) + os.sep) for o in roots)
        )

    # ---- capturing states -----------------------------------------------------------------------

    def _content_state(
        self, store: CheckpointStore | None, path: str, st: os.stat_result, *, sensitive: bool
    ) -> tuple[FileState, StatSig]:
        """A regular file's state with its content stored when allowed (and the ``stat`` it matches);
        ``store=None``: only hashed (the state of a file now, compared by a rewind)."""
        sig = _sig(st)
        base = {"size": st.st_size, "mode": stat.S_IMODE(st.st_mode), "mtime_ns": st.st_mtime_ns}
        if sensitive:
            return FileState(kind="file", note="sensitive", **base), sig
        if st.st_size > self._settings.max_file_bytes:
            return FileState(kind="file", note="too_large", **base), sig
        try:
            fd = os.open(path, _READ_FLAGS)
            try:
                os.set_blocking(fd, True)
                with os.fdopen(fd, "rb", closefd=False) as fh:
                    data = fh.read(self._settings.max_file_bytes + 1)
                opened = os.fstat(fd)
            finally:
                os.close(fd)
        except OSError:
            return FileState(kind="file", note="unreadable", **base), sig
        if len(data) > self._settings.max_file_bytes or not stat.S_ISREG(opened.st_mode):
            return FileState(kind="file", note="too_large", **base), sig
        sha = store.put(data) if store is not None else digest(data)
        base = {"size": len(data), "mode": stat.S_IMODE(opened.st_mode), "mtime_ns": opened.st_mtime_ns}
        if sha is None:
            return FileState(kind="file", note="store_full", **base), _sig(opened)
        return FileState(kind="file", sha=sha, **base), _sig(opened)

    def peek(self, path: str) -> FileState:
        """The state of ``path`` now, hashed but not stored (never read when sensitive)."""
        return self.capture(None, path, sensitive=False)

    def capture(self, store: CheckpointStore | None, path: str, *, sensitive: bool) -> FileState:
        """The state of ``path`` now (``lstat``: a symlink is recorded, never followed)."""
        try:
            st = os.lstat(path)
        except OSError:
            return MISSING
        if stat.S_ISLNK(st.st_mode):
            try:
                return FileState(kind="symlink", target=os.readlink(path), mode=stat.S_IMODE(st.st_mode))
            except OSError:
                return MISSING
        if stat.S_ISDIR(st.st_mode):
            return FileState(kind="dir", mode=stat.S_IMODE(st.st_mode))
        if not stat.S_ISREG(st.st_mode):
            return FileState(kind="file", note="unreadable", size=st.st_size, mtime_ns=st.st_mtime_ns)
        return self._content_state(store, path, st, sensitive=sensitive)[0]

    # ---- open / close ---------------------------------------------------------------------------

    async def open(
        self,
        call: ToolCall,
        definition: ToolDefinition,
        preflight: Preflight,
        *,
        session_id: str,
        run_id: str,
        agent_id: str,
        project: Path,
        base_node_seq: int | None,
    ) -> OpenCheckpoint | None:
        kind = self.kind_for(definition)
        if kind is None:
            return None
        session = self.session(session_id)
        opened = OpenCheckpoint(
            checkpoint_id=new_id("ckpt_"),
            kind=kind,
            session=session,
            session_id=session_id,
            run_id=run_id,
            agent_id=agent_id,
            tool_call_id=call.tool_call_id,
            tool_name=call.name,
            base_node_seq=base_node_seq,
            opened_at=time.time(),
        )
        if kind == "files":
            opened.sensitive = preflight.sensitive or any(p.kind == "credential" for p in preflight.protected)
            paths = [os.fspath(p) for p in preflight.target_paths]
            opened.targets = await asyncio.to_thread(
                lambda: {p: self.capture(session.store, p, sensitive=opened.sensitive) for p in paths}
            )
            return opened
        opened.roots = self.roots(project)
        rules = self.rules(resolve_dir(project))
        async with session.lock:
            opened.before, opened.hashes = await asyncio.to_thread(
                self._before_walk, session, opened.roots, rules
            )
        return opened

    async def close(self, opened: OpenCheckpoint) -> str:
        """Records the states after the call; returns the checkpoint id (written to the journal)."""
        session = opened.session
        complete = True
        if opened.kind == "files":
            entries = await asyncio.to_thread(self._file_entries, opened)
        else:
            rules = self.rules(resolve_dir(opened.roots[0]))
            async with session.lock:
                entries, complete = await asyncio.to_thread(self._after_walk, opened, rules)
        record = CheckpointRecord(
            checkpoint_id=opened.checkpoint_id,
            session_id=opened.session_id,
            run_id=opened.run_id,
            agent_id=opened.agent_id,
            tool_call_id=opened.tool_call_id,
            tool_name=opened.tool_name,
            kind=opened.kind,
            base_node_seq=opened.base_node_seq,
            opened_at=opened.opened_at,
            closed_at=time.time(),
            complete=complete,
            entries=entries,
        )
        await asyncio.to_thread(session.store.append, record)
        return opened.checkpoint_id

    def _file_entries(self, opened: OpenCheckpoint) -> list[Entry]:
        entries: list[Entry] = []
        for path, before in opened.targets.items():
            after = self.capture(opened.session.store, path, sensitive=opened.sensitive)
            if not same_state(before, after):
                entries.append(Entry(path=path, before=before, after=after))
        return entries

    # ---- walks ----------------------------------------------------------------------------------

    def _cache(self, session: SessionCheckpoints) -> dict[str, tuple[StatSig, str | None]]:
        if session.cache is None:
            session.cache = session.store.load_stat_cache()
        return session.cache

    def _hash_of(self, session: SessionCheckpoints, path: str, seen: Seen) -> str | None:
        """The stored content hash of a walked file: from the stat cache while its ``stat`` is unchanged,
        else read and stored now (``None``: sensitive, too large, unreadable or the store is full)."""
        cache = self._cache(session)
        assert seen.sig is not None
        known = cache.get(path)
        if (
            known is not None
            and known[0] == seen.sig
            and known[1] is not None
            and session.store.has(known[1])
        ):
            return known[1]
        if seen.sensitive or seen.sig[0] > self._settings.max_file_bytes:
            cache[path] = (seen.sig, None)
            session.dirty = True
            return None
        try:
            st = os.lstat(path)
        except OSError:
            return None
        state, sig = self._content_state(session.store, path, st, sensitive=False)
        cache[path] = (sig, state.sha)
        session.dirty = True
        return state.sha

    def _before_walk(
        self, session: SessionCheckpoints, roots: tuple[Path, ...], rules: WalkRules
    ) -> tuple[WalkResult, dict[str, str | None]]:
        result = walk(roots, rules)
        hashes = {
            path: self._hash_of(session, path, seen)
            for path, seen in result.seen.items()
            if seen.kind == "file"
        }
        cache = self._cache(session)
        for gone in [p for p in cache if p not in result.seen]:
            del cache[gone]
            session.dirty = True
        return result, hashes

    def _state(self, seen: Seen | None, sha: str | None) -> FileState:
        if seen is None:
            return MISSING
        if seen.kind == "dir":
            return FileState(kind="dir", mode=seen.mode)
        if seen.kind == "symlink":
            return FileState(kind="symlink", target=seen.target, mode=seen.mode)
        assert seen.sig is not None
        size, mtime_ns = seen.sig[0], seen.sig[1]
        note = None
        if sha is None:
            note = (
                "sensitive"
                if seen.sensitive
                else "too_large"
                if size > self._settings.max_file_bytes
                else "store_full"
            )
        return FileState(kind="file", sha=sha, size=size, mode=seen.mode, mtime_ns=mtime_ns, note=note)

    def _after_walk(self, opened: OpenCheckpoint, rules: WalkRules) -> tuple[list[Entry], bool]:
        before = opened.before
        assert before is not None
        after = walk(opened.roots, rules)
        entries: list[Entry] = []
        for path in sorted(before.seen.keys() | after.seen.keys()):
            old, new = before.seen.get(path), after.seen.get(path)
            if old is not None and new is not None and old.kind == new.kind:
                if old.kind == "dir" or (old.kind == "symlink" and old.target == new.target):
                    continue
                if old.kind == "file" and old.sig == new.sig:
                    continue
            new_sha = (
                self._hash_of(opened.session, path, new) if new is not None and new.kind == "file" else None
            )
            entry = Entry(
                path=path,
                before=self._state(old, opened.hashes.get(path)),
                after=self._state(new, new_sha),
            )
            if (
                entry.before.kind == "file"
                and entry.after.kind == "file"
                and same_state(entry.before, entry.after)
            ):
                continue  # touched, same content (a build tool rewriting an unchanged file)
            entries.append(entry)
        cache = self._cache(opened.session)
        for gone in [p for p in cache if p not in after.seen]:
            del cache[gone]
            opened.session.dirty = True
        if opened.session.dirty:
            with contextlib.suppress(OSError):
                opened.session.store.save_stat_cache(cache)
                opened.session.dirty = False
        return entries, before.complete and after.complete
