"""``code.search`` (docs/tools.md#codesearch): literal, case-sensitive search with ``rg``.

Semantics (identical for ``rg`` and the pure-Python fallback used when ``rg`` is not installed):

* the root (default ``<project>``) is a directory walked without following symlinks, hidden files
  included, ignore files not honoured, skip directories not entered; or a single file searched directly
  (``glob`` does not apply to it);
* ``glob`` filters like ``rg --glob`` from the root (see :mod:`~agent_core.tools._builtin.globs`);
* lines are split on ``\\n``; a match is a line containing the query bytes; binary files (NUL in the
  first 8192 bytes or invalid UTF-8) and non-UTF-8 paths are skipped;
* below a root that is not itself sensitive, paths with a component matching a sensitive glob or lying
  under a sensitive prefix are omitted;
* matches are ``{"path", "line", "text"}`` (text capped at 4096 bytes), ordered by path then line.

The walk visits files in depth-first name order (``rg --sort path``) and stops after
:data:`MAX_CANDIDATES` candidate lines (``truncated`` is then set), so memory stays bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import stat
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_core._concurrency import TaskOwner
from agent_core.errors import (
    AgentCoreError,
    ErrorCode,
    FileOperationError,
    InternalError,
    OperationCancelledError,
    OperationTimeoutError,
)
from agent_core.tools._builtin.base import (
    Args,
    ToolEnv,
    checked_identity,
    checked_target,
    identities,
    invalid,
    ok,
)
from agent_core.tools._builtin.fileio import cap_line, iter_raw_lines, probe_binary
from agent_core.tools._builtin.globs import GlobFilter
from agent_core.tools._code_definitions import code_tool_definition
from agent_core.tools._command import run_process
from agent_core.tools._executables import trusted_which
from agent_core.tools._paths import SKIP_DIRS, SensitiveMatcher
from agent_core.tools._safe_fs import FileIdentity, changed, open_file, open_listing
from agent_core.tools.context import ToolContext
from agent_core.tools.preflight import Preflight
from agent_core.types.model import ToolCall
from agent_core.types.tools import ToolDefinition, ToolResult

NAME = "code.search"
DEFAULT_LIMIT = 100
MAX_CANDIDATES = 10_000
TEXT_CAP_BYTES = 4096


def _pin_root(root: Path, is_dir: bool, expect: FileIdentity | None) -> int:
    return open_listing(root, expect) if is_dir else open_file(root, expect)


def _verify_pinned(root: Path, is_dir: bool, pinned: int) -> None:
    """``root`` still leads (without a symlink) to the object held open by ``pinned``."""
    held = FileIdentity.of(os.fstat(pinned))
    try:
        again = _pin_root(root, is_dir, held)
    except AgentCoreError as exc:
        raise changed(root, "it was replaced while searching") from exc
    os.close(again)


def find_ripgrep() -> str | None:
    """``rg`` in an absolute ``PATH`` entry, else the one installed next to this interpreter (the
    ``ripgrep`` dependency); one inside the project is not used (the search falls back to Python)."""
    found = trusted_which("rg")
    if found:
        return found
    scripts = sysconfig.get_path("scripts")
    candidate = os.path.join(scripts, "rg") if scripts else ""
    if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
        return candidate
    return None


@dataclass(slots=True)
class _Collector:
    """Candidate matches in walk order, sensitive-filtered, capped."""

    root: Path
    root_is_file: bool
    hide: SensitiveMatcher | None
    cap: int
    items: list[tuple[str, int, bytes]] = field(default_factory=list)
    full: bool = False

    def hidden(self, path: Path) -> bool:
        if self.hide is None or self.root_is_file:
            return False
        try:
            rel = path.relative_to(self.root)
        except ValueError:
            return True
        if any(self.hide.name_matches(part) for part in rel.parts):
            return True
        return self.hide.under_prefix(path)

    def offer(self, path: Path, line: int, raw: bytes) -> None:
        if self.full:
            return
        if self.hidden(path):
            return
        self.items.append((os.fspath(path), line, raw[: TEXT_CAP_BYTES + 4]))
        if len(self.items) >= self.cap:
            self.full = True


def finish_matches(collector: _Collector, limit: int) -> tuple[list[dict[str, Any]], bool]:
    """Drops binary files, orders by (path, line) and cuts to ``limit`` (runs in a worker thread)."""
    binary: dict[str, bool] = {}
    kept: list[tuple[str, int, bytes]] = []
    for path, line, raw in collector.items:
        if path not in binary:
            try:
                binary[path] = probe_binary(Path(path))
            except OSError:
                binary[path] = True
        if not binary[path]:
            kept.append((path, line, raw))
    kept.sort(key=lambda item: (item[0], item[1]))
    matches = [{"path": p, "line": n, "text": cap_line(raw, TEXT_CAP_BYTES)[0]} for p, n, raw in kept[:limit]]
    return matches, collector.full or len(kept) > limit


def _utf8_name(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _sorted_entries(directory: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as it:
            return sorted(it, key=lambda e: e.name)
    except OSError:
        return []


def python_search(collector: _Collector, query: bytes, glob: GlobFilter | None) -> None:
    """The fallback walk (depth-first, name order); fills ``collector`` like ``rg --sort path`` would."""
    if collector.root_is_file:
        _search_file(collector, collector.root, query)
        return
    stack = [(iter(_sorted_entries(collector.root)), "")]
    while stack and not collector.full:
        entries, prefix = stack[-1]
        entry = next(entries, None)
        if entry is None:
            stack.pop()
            continue
        if not _utf8_name(entry.name):
            continue
        rel = prefix + entry.name
        try:
            if entry.is_symlink():
                continue
            if entry.is_dir(follow_symlinks=False):
                if entry.name not in SKIP_DIRS and (glob is None or glob.allows_dir(rel)):
                    stack.append((iter(_sorted_entries(Path(entry.path))), rel + "/"))
                continue
            if not entry.is_file(follow_symlinks=False):
                continue
        except OSError:
            continue
        if glob is None or glob.allows_file(rel):
            _search_file(collector, Path(entry.path), query)


def _search_file(collector: _Collector, path: Path, query: bytes) -> None:
    if collector.hidden(path):
        return
    with contextlib.suppress(OSError):
        for number, raw in iter_raw_lines(path):
            if query in raw:
                collector.offer(path, number, raw)
                if collector.full:
                    return


def rg_argv(rg: str, query: str, glob: str | None, target: str) -> list[str]:
    argv = [
        rg,
        "--json",
        "--sort",
        "path",
        "--fixed-strings",
        "--case-sensitive",
        "--hidden",
        "--no-ignore",
        "--no-config",
        "--no-messages",
        "--text",
        "--encoding",
        "none",
    ]
    if glob is not None:
        argv += ["--glob", glob]
    for name in sorted(SKIP_DIRS):
        argv += ["--glob", f"!{name}/"]
    return [*argv, "--", query, target]


async def rg_search(
    rg: str, collector: _Collector, query: str, glob: str | None, *, timeout_ms: int, cancel: asyncio.Event
) -> None:
    """Runs ``rg`` from the root (so globs anchor there) and feeds its JSON matches to ``collector``."""
    root = collector.root
    cwd, target = (root.parent, root.name) if collector.root_is_file else (root, ".")
    stop = asyncio.Event()
    bad_output: list[str] = []

    def on_line(line: bytes) -> None:
        if collector.full:
            stop.set()
            return
        try:
            message = json.loads(line)
        except ValueError:
            bad_output.append(line[:200].decode("utf-8", errors="replace"))
            return
        if message.get("type") != "match":
            return
        data = message.get("data") or {}
        path_text = (data.get("path") or {}).get("text")
        lines = data.get("lines") or {}
        number = data.get("line_number")
        if not isinstance(path_text, str) or not isinstance(number, int):
            return  # non-UTF-8 path: skipped like the fallback does
        text = lines.get("text")
        if not isinstance(text, str):
            return  # invalid UTF-8 line: a binary file, dropped
        raw = text.encode("utf-8")
        if raw.endswith(b"\n"):
            raw = raw[:-1]
        collector.offer(Path(os.path.normpath(os.path.join(cwd, path_text))), number, raw)
        if collector.full:
            stop.set()

    async def relay_cancel() -> None:
        await cancel.wait()
        stop.set()

    async with TaskOwner() as relays:  # the relay is cancelled when the search ends
        relays.spawn(relay_cancel())
        outcome = await run_process(
            rg_argv(rg, query, glob, target),
            cwd=cwd,
            env={},
            timeout_ms=timeout_ms,
            cancel_event=stop,
            on_stdout_line=on_line,
            tree=False,  # ripgrep is a trusted helper that spawns nothing: no launcher on the hot path
        )
    if outcome.timed_out:
        raise OperationTimeoutError(
            ErrorCode.timeout, f"search timed out after {timeout_ms} ms", details={"timeout_ms": timeout_ms}
        )
    if outcome.cancelled and cancel.is_set():
        raise OperationCancelledError(ErrorCode.cancelled, "search cancelled")
    if outcome.exit_code not in (0, 1, None) and not collector.items:
        summary = outcome.stderr.text().strip()[-500:]
        raise InternalError(
            ErrorCode.internal_error,
            f"rg failed with status {outcome.exit_code}: {summary or '(no stderr)'}",
            details={"exit_code": outcome.exit_code},
        )
    if bad_output:
        raise InternalError(
            ErrorCode.internal_error, "rg produced unreadable output", details={"sample": bad_output[:3]}
        )


class SearchTool:
    name = NAME

    def __init__(self, rg_executable: str | None) -> None:
        self.rg = rg_executable

    def definition(self) -> ToolDefinition:
        return code_tool_definition(NAME)

    def _args(self, arguments: dict[str, Any]) -> tuple[str, str | None, str | None, int]:
        args = Args(NAME, arguments, ("query", "path", "glob", "limit"))
        query = args.required_string("query")
        if query == "":
            raise invalid("code.search: 'query' must not be empty")
        if "\n" in query or "\x00" in query:
            raise invalid("code.search: 'query' must be a single line without NUL bytes")
        glob = args.string("glob")
        if glob is not None:
            GlobFilter.compile(glob)
        limit = args.integer("limit", DEFAULT_LIMIT, minimum=1)
        assert limit is not None
        return query, args.string("path"), glob, limit

    def preflight(self, args: dict[str, Any], env: ToolEnv) -> Preflight:
        _, path, _, _ = self._args(args)
        target = env.resolve(path if path is not None else str(env.project))
        return Preflight(
            target_scope=str(target.resolved),
            target_paths=[target.resolved],
            sensitive=env.is_sensitive(target),
            protected=env.protected(target, write=False),
            outside_project_search=not env.in_project(target.resolved),
            identities=identities(target.resolved),
        )

    async def run(self, call: ToolCall, ctx: ToolContext, env: ToolEnv) -> ToolResult:
        query, path, glob, limit = self._args(call.arguments)
        target = checked_target(path if path is not None else str(env.project), env, ctx)
        root = target.resolved
        try:
            st = os.stat(root)
        except (FileNotFoundError, NotADirectoryError) as exc:
            raise FileOperationError(
                ErrorCode.file_not_found, f"search path not found: {root}", details={"path": str(root)}
            ) from exc
        if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
            raise invalid(f"{root} is neither a directory nor a regular file", path=str(root))
        hide = None if env.is_sensitive(target) else env.sensitive
        # the root as checked (no symlink on the way, same inode), held open for the whole search and
        # verified again afterwards: a root swapped for a link while the engine ran discards the matches
        pinned = await asyncio.to_thread(
            _pin_root, root, stat.S_ISDIR(st.st_mode), checked_identity(ctx, root)
        )
        try:
            result = await self._search(call, ctx, env, root, st, hide, query, glob, limit)
            await asyncio.to_thread(_verify_pinned, root, stat.S_ISDIR(st.st_mode), pinned)
        finally:
            os.close(pinned)
        return result

    async def _search(
        self,
        call: ToolCall,
        ctx: ToolContext,
        env: ToolEnv,
        root: Path,
        st: os.stat_result,
        hide: SensitiveMatcher | None,
        query: str,
        glob: str | None,
        limit: int,
    ) -> ToolResult:
        collector = _Collector(root, stat.S_ISREG(st.st_mode), hide, max(MAX_CANDIDATES, limit + 1))
        if self.rg is not None and not env.in_project(Path(self.rg)):  # never a binary the project ships
            await rg_search(
                self.rg,
                collector,
                query,
                glob,
                timeout_ms=env.tools.default_timeout_ms,
                cancel=ctx.cancel_event,
            )
            engine = "rg"
        else:
            matcher = GlobFilter.compile(glob) if glob is not None else None
            await asyncio.to_thread(python_search, collector, query.encode("utf-8"), matcher)
            engine = "python"
        matches, truncated = await asyncio.to_thread(finish_matches, collector, limit)
        return ok(
            call, {"matches": matches, "truncated": truncated}, metadata={"engine": engine, "root": str(root)}
        )
