"""``code.read_file`` (docs/tools.md#coderead_file, docs/context.md#loading).

Line-window reads of UTF-8 text; never artifactises. With the runtime's file access hook
(:mod:`agent_core.tools.files`) a text file's content comes from the hook when it supplies it. Reading an instruction file additionally buffers an
``instruction_context`` node (full file body) unless the same hash is already loaded on the active path.
"""

from __future__ import annotations

import asyncio
import hashlib
import mimetypes
import os
import stat
from pathlib import Path
from typing import Any

from agent_core._frontmatter import split_frontmatter
from agent_core._media import PDF_TYPE, MediaError, prepare_media, sniff
from agent_core.errors import ErrorCode, FileOperationError
from agent_core.tools._builtin.base import (
    Args,
    ToolEnv,
    checked_identity,
    checked_target,
    hooked_read,
    identities,
    invalid,
    ok,
)
from agent_core.tools._builtin.fileio import (
    LINE_CAP_BYTES,
    LineWindow,
    is_binary_bytes,
    looks_like_text,
    read_line_window,
    text_line_window,
)
from agent_core.tools._code_definitions import (
    READ_FILE_DEFAULT_MAX_LINES,
    READ_FILE_MAX_LINES_LIMIT,
    code_tool_definition,
)
from agent_core.tools._instruction_files import InstructionFileRef, match_instruction_file
from agent_core.tools._safe_fs import open_file
from agent_core.tools.context import ContextNodeDraft, ToolContext
from agent_core.tools.preflight import Preflight
from agent_core.types.content import DocumentBlock, ImageBlock, TextBlock
from agent_core.types.enums import MessageRole, NodeType
from agent_core.types.model import ToolCall
from agent_core.types.tools import ToolDefinition, ToolResult

NAME = "code.read_file"
MAX_LINES_LIMIT = READ_FILE_MAX_LINES_LIMIT
DEFAULT_MAX_LINES = READ_FILE_DEFAULT_MAX_LINES


def existing_regular_file(path: Path) -> os.stat_result:
    """``stat`` of an existing regular file; missing → ``file_not_found``, directory/other → validation."""
    try:
        st = os.stat(path)
    except FileNotFoundError as exc:
        raise FileOperationError(
            ErrorCode.file_not_found, f"file not found: {path}", details={"path": str(path)}
        ) from exc
    except NotADirectoryError as exc:
        raise FileOperationError(
            ErrorCode.file_not_found, f"file not found: {path}", details={"path": str(path)}
        ) from exc
    except OSError as exc:
        raise invalid(f"cannot access {path}: {exc.strerror}", path=str(path)) from exc
    if stat.S_ISDIR(st.st_mode):
        raise invalid(f"{path} is a directory (use code.list_dir)", path=str(path))
    if not stat.S_ISREG(st.st_mode):
        raise invalid(f"{path} is not a regular file", path=str(path))
    return st


class ReadFileTool:
    name = NAME

    def definition(self) -> ToolDefinition:
        return code_tool_definition(NAME)

    def _args(self, arguments: dict[str, Any]) -> tuple[str, int, int]:
        args = Args(NAME, arguments, ("path", "start_line", "max_lines"))
        path = args.required_string("path")
        start = args.integer("start_line", 1, minimum=1)
        count = args.integer("max_lines", DEFAULT_MAX_LINES, minimum=1, maximum=MAX_LINES_LIMIT)
        assert start is not None and count is not None
        return path, start, count

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
        raw_path, start, count = self._args(call.arguments)
        target = checked_target(raw_path, env, ctx).resolved
        existing_regular_file(target)
        expect = checked_identity(ctx, target)

        def read() -> tuple[LineWindow, bytes | None]:
            fd = open_file(target, expect)  # no symlink anywhere, same inode as checked
            with open(fd, "rb", closefd=True) as fh:
                window = read_line_window(fh, start, count, LINE_CAP_BYTES)
                whole: bytes | None = None
                if not window.binary and ref is not None:
                    fh.seek(0)
                    whole = fh.read()
            return window, whole

        def sniff() -> bool:
            with open(open_file(target, expect), "rb", closefd=True) as fh:
                return looks_like_text(fh)

        ref = match_instruction_file(target, project_dir=env.project, home_dir=env.soong_home)
        hooked: str | None = None
        if env.files is not None and await asyncio.to_thread(sniff):
            hooked = await hooked_read(env, ctx, target)
        if hooked is not None:  # the host's view of the checked file (an unsaved editor buffer)
            window = text_line_window(hooked, start, count, LINE_CAP_BYTES)
            whole = hooked.encode("utf-8", "surrogatepass") if ref is not None else None
        else:
            window, whole = await asyncio.to_thread(read)
        if window.binary:
            return await _binary_result(call, ctx, target, expect, window.size_bytes)
        remaining = window.total_lines >= start + count
        data = _result(
            target,
            "\n".join(window.lines),
            truncated=remaining or bool(window.cut_lines),
            next_line=start + count if remaining else None,
            cut=window.cut_lines,
            binary=False,
            loaded=None,
        )
        if ref is not None and whole is not None:
            data["already_loaded"] = await _register_instruction(ref, whole, ctx)
        return ok(call, data, metadata={"total_lines": window.total_lines})


MEDIA_READ_LIMIT = 64 * 1024 * 1024
"""The largest image file read to be downscaled (beyond it, the file is reported as binary)."""


async def _binary_result(
    call: ToolCall, ctx: ToolContext, target: Path, expect: Any, size: int
) -> ToolResult:
    """A binary file: the image or PDF itself when the run's model reads it (``[model] input_modalities``,
    ``_media.py``): the usual result, a line describing it and an :class:`ImageBlock` / :class:`DocumentBlock`
    on an artifact; else the result with ``binary: true`` and why the model does not see it."""
    data = _result(target, "", truncated=False, next_line=None, cut=[], binary=True, loaded=None)
    guessed, _ = mimetypes.guess_type(target.name)
    metadata: dict[str, Any] = {"size_bytes": size, "mime_type": guessed}
    policy = ctx.scope.media

    def head_and_body() -> tuple[bytes, bytes | None]:
        fd = open_file(target, expect)
        with open(fd, "rb", closefd=True) as fh:
            head = fh.read(16)
            kind = sniff(head)
            if policy is None or not policy.takes(kind) or size > MEDIA_READ_LIMIT:
                return head, None
            fh.seek(0)
            return head, fh.read()

    head, body = await asyncio.to_thread(head_and_body)
    kind = sniff(head)
    if kind is None:
        return ok(call, data, metadata=metadata)
    metadata["mime_type"] = kind
    if body is None:
        note = (
            f"{target.name} is {'a PDF' if kind == PDF_TYPE else 'an image'} ({kind}); this model does not "
            f'read it: [model] input_modalities lacks "{"pdf" if kind == PDF_TYPE else "image"}"'
        )
        result = ok(call, data, metadata=metadata)
        return result.model_copy(update={"content": [*result.content, TextBlock(text=note)]})
    assert policy is not None
    try:
        prepared = await asyncio.to_thread(prepare_media, body, policy.limits, name=target.name)
    except MediaError as exc:
        raise invalid(str(exc), path=str(target)) from exc
    ref = await ctx.create_artifact(prepared.data, target.name, prepared.mime_type, prepared.describe())
    block: ImageBlock | DocumentBlock
    if prepared.kind == "pdf":
        block = DocumentBlock(artifact_id=ref.artifact_id, mime_type=prepared.mime_type)
    else:
        block = ImageBlock(artifact_id=ref.artifact_id, mime_type=prepared.mime_type)
    metadata.update(artifact_id=ref.artifact_id, width=prepared.width, height=prepared.height)
    result = ok(call, data, metadata=metadata)
    text = TextBlock(text=f"{target.name}: {prepared.describe()}; its content follows")
    return result.model_copy(update={"content": [*result.content, text, block]})


def _result(
    path: Path,
    content: str,
    *,
    truncated: bool,
    next_line: int | None,
    cut: list[int],
    binary: bool,
    loaded: bool | None,
) -> dict[str, Any]:
    return {
        "path": str(path),
        "content": content,
        "truncated": truncated,
        "next_start_line": next_line,
        "truncated_lines": list(cut),
        "binary": binary,
        "already_loaded": loaded,
    }


async def _register_instruction(ref: InstructionFileRef, raw: bytes, ctx: ToolContext) -> bool | None:
    """Buffers an ``instruction_context`` node (body ``raw``, read from the checked descriptor) unless
    this hash is already loaded; ``None`` if binary."""
    st = os.stat(ref.path)
    if is_binary_bytes(raw):
        return None
    text = raw.decode("utf-8")
    digest = hashlib.sha256(raw).hexdigest()
    if ctx.sink.loaded_instruction_hash(str(ref.path)) == digest:
        return True
    front = split_frontmatter(text)
    metadata: dict[str, Any] = {
        "path": str(ref.path),
        "scope": ref.scope,
        "relative_path": ref.relative_path,
        "hash": digest,
        "mtime_ns": st.st_mtime_ns,
        "mtime": st.st_mtime,
        "size_bytes": len(raw),
        "frontmatter": front.data,
        "loaded_by_tool_call_id": ctx.tool_call_id,
    }
    if front.error:
        metadata["frontmatter_error"] = True
    ctx.add_context_node(
        ContextNodeDraft(
            node_type=NodeType.instruction_context,
            role=MessageRole.system,
            content=[TextBlock(text=text)],
            metadata=metadata,
        )
    )
    return False
