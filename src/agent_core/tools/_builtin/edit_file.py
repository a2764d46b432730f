"""``code.edit_file`` (docs/tools.md#codeedit_file): exact edits or a strict single-file diff.

Edits/hunks apply to an in-memory copy; only a fully successful result is written (atomically, to the
resolved target). Any error leaves the file untouched. ``create_if_missing`` treats a missing file as
empty and creates its missing parent directories. With the runtime's file access hook
(:mod:`agent_core.tools.files`) the current text comes from the hook when it supplies it, and the result is
offered to the hook before it is written to disk.
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
from agent_core.tools._builtin.patch import FilePatch, apply_patch, check_paths, parse_unified_diff
from agent_core.tools._builtin.preview import edit_preview
from agent_core.tools._builtin.write_file import encode_utf8
from agent_core.tools._code_definitions import code_tool_definition
from agent_core.tools._paths import ResolvedTarget
from agent_core.tools._safe_fs import FileIdentity, open_file
from agent_core.tools.context import ToolContext
from agent_core.tools.preflight import Preflight
from agent_core.types.model import ToolCall
from agent_core.types.tools import ToolDefinition, ToolResult

NAME = "code.edit_file"
_EDIT_KEYS = ("old", "new", "replace_all")


class Edit:
    __slots__ = ("new", "old", "replace_all")

    def __init__(self, old: str, new: str, replace_all: bool) -> None:
        self.old, self.new, self.replace_all = old, new, replace_all


class EditRequest:
    """Validated arguments: exactly one of ``edits`` / ``patch``."""

    def __init__(self, path: str, edits: list[Edit] | None, patch: FilePatch | None, create: bool) -> None:
        self.path, self.edits, self.patch, self.create = path, edits, patch, create

    def apply(self, text: str) -> str:
        """The edited text (raises ``AgentCoreError`` like the tool when the edit cannot apply)."""
        if self.patch is not None:
            return apply_patch(text, self.patch)
        return apply_edits(text, self.edits or [])


def _parse_edits(raw: Any) -> list[Edit]:
    if not isinstance(raw, list) or not raw:
        raise invalid(
            "code.edit_file: 'edits' must be a non-empty list",
            errors=[{"path": "edits", "message": "non-empty array required"}],
        )
    edits: list[Edit] = []
    for index, item in enumerate(raw):
        where = f"edits[{index}]"
        if not isinstance(item, dict):
            raise invalid(
                f"code.edit_file: {where} must be an object",
                errors=[{"path": where, "message": "not an object"}],
            )
        unknown = sorted(k for k in item if k not in _EDIT_KEYS)
        if unknown:
            raise invalid(f"code.edit_file: unknown key(s) in {where}: {', '.join(unknown)}")
        old, new, replace_all = item.get("old"), item.get("new"), item.get("replace_all")
        if not isinstance(old, str) or not isinstance(new, str):
            raise invalid(
                f"code.edit_file: {where} needs string 'old' and 'new'",
                errors=[{"path": where, "message": "old/new must be strings"}],
            )
        if replace_all is None:
            replace_all = False
        if not isinstance(replace_all, bool):
            raise invalid(f"code.edit_file: {where}.replace_all must be a boolean")
        encode_utf8(old, f"{where}.old")
        encode_utf8(new, f"{where}.new")
        edits.append(Edit(old, new, replace_all))
    return edits


def apply_edits(text: str, edits: list[Edit]) -> str:
    """Sequential exact replacements (see docs/tools.md#codeedit_file decisions)."""
    for index, edit in enumerate(edits):
        details = {"edit_index": index}
        if edit.old == "":
            if text != "":
                raise invalid("an empty 'old' is only allowed when the file is empty", **details)
            text = edit.new
            continue
        first = text.find(edit.old)
        if first < 0:
            raise FileOperationError(
                ErrorCode.text_not_found, f"edit {index + 1}: 'old' text not found", details=details
            )
        if edit.replace_all:
            text = text.replace(edit.old, edit.new)
            continue
        if text.find(edit.old, first + 1) >= 0:
            raise FileOperationError(
                ErrorCode.ambiguous_edit,
                f"edit {index + 1}: 'old' occurs more than once; add context or set replace_all=true",
                details={**details, "occurrences": text.count(edit.old)},
            )
        text = text[:first] + edit.new + text[first + len(edit.old) :]
    return text


class EditFileTool:
    name = NAME

    def definition(self) -> ToolDefinition:
        return code_tool_definition(NAME)

    def _request(self, arguments: dict[str, Any], env: ToolEnv) -> tuple[EditRequest, ResolvedTarget]:
        args = Args(NAME, arguments, ("path", "edits", "unified_diff", "create_if_missing"))
        path = args.required_string("path")
        create = args.boolean("create_if_missing", False)
        has_edits, has_diff = args.has("edits"), args.has("unified_diff")
        if has_edits == has_diff:
            raise invalid("code.edit_file: provide exactly one of 'edits' and 'unified_diff'")
        target = env.resolve(path)
        if has_edits:
            return EditRequest(path, _parse_edits(args.raw("edits")), None, create), target
        diff = args.string("unified_diff")
        assert diff is not None
        patch = parse_unified_diff(diff)
        check_paths(patch, target.resolved, lambda p: env.resolve(p).resolved)
        return EditRequest(path, None, patch, create), target

    def preflight(self, args: dict[str, Any], env: ToolEnv) -> Preflight:
        request, target = self._request(args, env)
        return Preflight(
            change_preview=lambda: edit_preview(target.resolved, request.apply, request.create),
            target_scope=str(target.resolved),
            target_paths=[target.resolved],
            sensitive=env.is_sensitive(target),
            protected=env.protected(target, write=True),
            outside_write_roots=not env.in_roots(target.resolved),
            identities=identities(target.resolved, target.resolved.parent),
        )

    async def run(self, call: ToolCall, ctx: ToolContext, env: ToolEnv) -> ToolResult:
        request, _ = self._request(call.arguments, env)
        target = checked_target(request.path, env, ctx).resolved
        ensure_write_allowed(target, env, ctx)
        expect = checked_identity(ctx, target)
        current, existed = await asyncio.to_thread(_current_text, target, request.create, expect)
        if existed:  # the host's view of the checked text file (an unsaved editor buffer), if it has one
            hooked = await hooked_read(env, ctx, target)
            current = current if hooked is None else hooked
        if request.patch is not None:
            if request.patch.creates and existed:
                raise invalid(
                    "unified_diff: '--- /dev/null' only applies to a missing file", path=str(target)
                )
            if request.patch.creates and not request.create:
                raise invalid(
                    "unified_diff: '--- /dev/null' requires create_if_missing=true", path=str(target)
                )
            new_text = apply_patch(current, request.patch)
            applied = len(request.patch.hunks)
        else:
            assert request.edits is not None
            new_text = apply_edits(current, request.edits)
            applied = len(request.edits)
        data = encode_utf8(new_text, "result")
        prepare_parent(target, create=not existed, expect=checked_identity(ctx, target.parent))
        if await hooked_write(env, ctx, target, new_text, current if existed else None):
            return ok(call, {"path": str(target), "edits_applied": applied, "bytes_written": len(data)})
        try:
            await asyncio.to_thread(atomic_write, target, data, exclusive=not existed)
        except FileExistsError as exc:
            raise FileOperationError(
                ErrorCode.path_conflict,
                f"{target} appeared while editing; nothing written",
                details={"path": str(target)},
            ) from exc
        return ok(call, {"path": str(target), "edits_applied": applied, "bytes_written": len(data)})


def _current_text(target: Path, create: bool, expect: FileIdentity | None) -> tuple[str, bool]:
    try:
        st = os.stat(target)
    except (FileNotFoundError, NotADirectoryError) as exc:
        if create:
            return "", False
        raise FileOperationError(
            ErrorCode.file_not_found,
            f"file not found: {target} (set create_if_missing=true to create it)",
            details={"path": str(target)},
        ) from exc
    if stat.S_ISDIR(st.st_mode):
        raise invalid(f"{target} is a directory", path=str(target))
    if not stat.S_ISREG(st.st_mode):
        raise invalid(f"{target} is not a regular file", path=str(target))
    fd = open_file(target, expect)  # the checked file: no symlink on the way, same inode
    with open(fd, "rb", closefd=True) as fh:
        raw = fh.read()
    text = None if is_binary_bytes(raw) else raw.decode("utf-8")
    if text is None:
        raise invalid(f"{target} is a binary file and cannot be edited", path=str(target))
    return text, True
