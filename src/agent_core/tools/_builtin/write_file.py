"""``code.write_file`` (docs/tools.md#codewrite_file).

The conflict check (existing target without ``overwrite``; any directory target) runs in pre-flight and
again just before writing. The write is atomic (temp file + rename in the target directory) to the
*resolved* target, so a symlink inside the roots is written through and the link stays; a write outside
the roots is refused unless ``ctx.allowed_outside_roots`` is set. With the runtime's file access hook
(:mod:`agent_core.tools.files`) the write is offered to the hook first, with the text it replaces.
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
    ensure_write_allowed,
    hooked_read,
    hooked_write,
    identities,
    invalid,
    ok,
    prepare_parent,
)
from agent_core.tools._builtin.fileio import atomic_write, is_binary_bytes
from agent_core.tools._builtin.preview import write_preview
from agent_core.tools._code_definitions import code_tool_definition
from agent_core.tools._safe_fs import FileIdentity, changed, identity, open_file
from agent_core.tools.context import ToolContext
from agent_core.tools.preflight import Preflight
from agent_core.types.model import ToolCall
from agent_core.types.tools import ToolDefinition, ToolResult

NAME = "code.write_file"


def conflict_check(path: Path, overwrite: bool) -> bool:
    """Returns whether ``path`` exists as a file; raises ``path_conflict`` for a directory, or for an
    existing target when ``overwrite`` is false."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    if stat.S_ISDIR(st.st_mode):
        raise FileOperationError(
            ErrorCode.path_conflict, f"{path} is a directory", details={"path": str(path)}
        )
    if not overwrite:
        raise FileOperationError(
            ErrorCode.path_conflict,
            f"{path} already exists; pass overwrite=true to replace it",
            details={"path": str(path)},
        )
    if not stat.S_ISREG(st.st_mode):
        raise FileOperationError(
            ErrorCode.path_conflict, f"{path} is not a regular file", details={"path": str(path)}
        )
    return True


def _disk_text(target: Path, expect: FileIdentity | None) -> tuple[str, bool]:
    """The checked file's current content (a binary file's decoded with replacement characters) and
    whether it is text."""
    with open(open_file(target, expect), "rb", closefd=True) as fh:
        raw = fh.read()
    return raw.decode("utf-8", errors="replace"), not is_binary_bytes(raw)


def encode_utf8(text: str, key: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise invalid(f"'{key}' is not valid Unicode text (lone surrogates)") from exc


class WriteFileTool:
    name = NAME

    def definition(self) -> ToolDefinition:
        return code_tool_definition(NAME)

    def _args(self, arguments: dict[str, Any]) -> tuple[str, str, bool, bool]:
        args = Args(NAME, arguments, ("path", "content", "create_dirs", "overwrite"))
        return (
            args.required_string("path"),
            args.required_string("content"),
            args.boolean("create_dirs", True),
            args.boolean("overwrite", False),
        )

    def preflight(self, args: dict[str, Any], env: ToolEnv) -> Preflight:
        path, content, _, overwrite = self._args(args)
        encode_utf8(content, "content")
        target = env.resolve(path)
        conflict_check(target.resolved, overwrite)
        return Preflight(
            change_preview=lambda: write_preview(target.resolved, content),
            target_scope=str(target.resolved),
            target_paths=[target.resolved],
            sensitive=env.is_sensitive(target),
            protected=env.protected(target, write=True),
            outside_write_roots=not env.in_roots(target.resolved),
            identities=identities(target.resolved, target.resolved.parent),
        )

    async def run(self, call: ToolCall, ctx: ToolContext, env: ToolEnv) -> ToolResult:
        path, content, create_dirs, overwrite = self._args(call.arguments)
        data = encode_utf8(content, "content")
        target = checked_target(path, env, ctx).resolved
        ensure_write_allowed(target, env, ctx)
        conflict_check(target, overwrite)
        prepare_parent(target, create=create_dirs, expect=checked_identity(ctx, target.parent))
        existed = conflict_check(target, overwrite)
        expect = checked_identity(ctx, target)
        if existed and expect is not None and identity(target) != expect:
            raise changed(target, "it was replaced by another file")
        if env.files is not None:
            previous: str | None = None
            if existed:
                previous, text_file = await asyncio.to_thread(_disk_text, target, expect)
                hooked = await hooked_read(env, ctx, target) if text_file else None
                previous = previous if hooked is None else hooked
            if await hooked_write(env, ctx, target, content, previous):
                return ok(
                    call,
                    {
                        "path": str(target),
                        "bytes_written": len(data),
                        "created": not existed,
                        "overwritten": existed,
                    },
                )
        try:
            await asyncio.to_thread(atomic_write, target, data, exclusive=not existed)
        except FileExistsError as exc:
            raise FileOperationError(
                ErrorCode.path_conflict,
                f"{target} appeared while writing; nothing written",
                details={"path": str(target)},
            ) from exc
        return ok(
            call,
            {"path": str(target), "bytes_written": len(data), "created": not existed, "overwritten": existed},
        )
