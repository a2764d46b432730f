"""``code.list_dir`` (docs/tools.md#codelist_dir).

Entries are ``{"path", "type", "size_bytes"}`` relative to the listed directory, sorted by ``path``.
Recursive listings never follow symlinked directories, list but never enter the skip directories, and —
below a target that is not itself sensitive — omit entries whose basename matches a sensitive glob and
do not enter sensitive prefix directories. A walk visits at most :data:`MAX_WALK_ENTRIES` entries
(``truncated`` is then set).
"""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path
from typing import Any

from agent_core.errors import ErrorCode, FileOperationError
from agent_core.tools._builtin.base import (
    Args,
    ToolEnv,
    checked_identity,
    checked_target,
    identities,
    invalid,
    ok,
)
from agent_core.tools._code_definitions import code_tool_definition
from agent_core.tools._paths import SKIP_DIRS, SensitiveMatcher
from agent_core.tools._safe_fs import open_listing, open_subdir
from agent_core.tools.context import ToolContext
from agent_core.tools.preflight import Preflight
from agent_core.types.model import ToolCall
from agent_core.types.tools import ToolDefinition, ToolResult

NAME = "code.list_dir"
DEFAULT_LIMIT = 1000
MAX_WALK_ENTRIES = 200_000


def _scan(directory_fd: int) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(directory_fd) as it:
            return list(it)
    except OSError:
        return []


def _kind_at(entry: os.DirEntry[str], parent_fd: int) -> tuple[str, int | None]:
    """Type and size of one entry of a descriptor scan, never following a symlink."""
    try:
        st = os.stat(entry.name, dir_fd=parent_fd, follow_symlinks=False)
    except OSError:
        return "other", None
    if stat.S_ISLNK(st.st_mode):
        return "symlink", None
    if stat.S_ISDIR(st.st_mode):
        return "dir", None
    if stat.S_ISREG(st.st_mode):
        return "file", st.st_size
    return "other", None


def list_entries(
    root: Path, *, recursive: bool, limit: int, hide: SensitiveMatcher | None, root_fd: int | None = None
) -> tuple[list[dict[str, Any]], bool]:
    """Lists ``root``; ``hide`` (when given) filters sensitive entries below it. Returns (entries, truncated).

    The walk goes by descriptor (``root_fd`` when given, else ``root`` opened without following a symlink)
    and enters subdirectories with ``O_NOFOLLOW``, so a directory swapped for a symlink mid-walk is never
    entered. ``root_fd`` stays open (the caller owns it)."""
    found: list[dict[str, Any]] = []
    walk_cut = False
    own = root_fd is None
    start_fd = open_listing(root, None) if root_fd is None else root_fd
    stack: list[tuple[int, Path, str]] = [(start_fd, root, "")]
    try:
        while stack:
            directory_fd, directory, prefix = stack.pop()
            try:
                for entry in _scan(directory_fd):
                    if hide is not None and hide.name_matches(entry.name):
                        continue
                    kind, size = _kind_at(entry, directory_fd)
                    rel = prefix + entry.name
                    found.append({"path": rel, "type": kind, "size_bytes": size})
                    if len(found) >= MAX_WALK_ENTRIES:
                        walk_cut = True
                        break
                    if not recursive or kind != "dir" or entry.name in SKIP_DIRS:
                        continue
                    if hide is not None and hide.under_prefix(directory / entry.name):
                        continue
                    child = open_subdir(directory_fd, entry.name)
                    if child is not None:
                        stack.append((child, directory / entry.name, rel + "/"))
            finally:
                if directory_fd != start_fd or own:
                    os.close(directory_fd)
            if walk_cut:
                break
    finally:
        for fd, _, _ in stack:
            if fd != start_fd or own:
                os.close(fd)
    found.sort(key=lambda e: e["path"])
    return found[:limit], walk_cut or len(found) > limit


class ListDirTool:
    name = NAME

    def definition(self) -> ToolDefinition:
        return code_tool_definition(NAME)

    def _args(self, arguments: dict[str, Any]) -> tuple[str, bool, int]:
        args = Args(NAME, arguments, ("path", "recursive", "limit"))
        path = args.required_string("path")
        recursive = args.boolean("recursive", False)
        limit = args.integer("limit", DEFAULT_LIMIT, minimum=1)
        assert limit is not None
        return path, recursive, limit

    def preflight(self, args: dict[str, Any], env: ToolEnv) -> Preflight:
        path, _, _ = self._args(args)
        target = env.resolve(path)
        return Preflight(
            target_scope=str(target.resolved),
            target_paths=[target.resolved],
            sensitive=env.is_sensitive(target),
            protected=env.protected(target, write=False),
            identities=identities(target.resolved),
        )

    async def run(self, call: ToolCall, ctx: ToolContext, env: ToolEnv) -> ToolResult:
        raw_path, recursive, limit = self._args(call.arguments)
        target = checked_target(raw_path, env, ctx)
        directory = target.resolved
        try:
            st = os.stat(directory)
        except (FileNotFoundError, NotADirectoryError) as exc:
            raise FileOperationError(
                ErrorCode.file_not_found,
                f"directory not found: {directory}",
                details={"path": str(directory)},
            ) from exc
        if not stat.S_ISDIR(st.st_mode):
            raise invalid(f"{directory} is not a directory", path=str(directory))
        hide = None if env.is_sensitive(target) else env.sensitive
        expect = checked_identity(ctx, directory)

        def walk() -> tuple[list[dict[str, Any]], bool]:
            fd = open_listing(directory, expect)  # the checked directory, reached without a symlink
            try:
                return list_entries(
                    directory, recursive=recursive, limit=limit, hide=hide if recursive else None, root_fd=fd
                )
            finally:
                os.close(fd)

        entries, truncated = await asyncio.to_thread(walk)
        return ok(call, {"entries": entries, "truncated": truncated}, metadata={"path": str(directory)})
