"""The shape of one built-in ``code.*`` tool: per-call environment, argument access and result shapes.

* :class:`ToolEnv` holds what every call derives from settings + context: resolved ``<project>`` and
  ``${SOONG_AGENT_HOME}``, the write roots and the sensitive-path matcher (``tools.sensitive_paths`` plus
  the built-in credential class of :mod:`agent_core.permissions._protected`).
* :class:`Args` reads already schema-validated arguments again, defensively: unknown keys, wrong types
  and out-of-range values raise ``validation_error`` (the adapter may be called without the registry).
* :func:`ok` / :func:`failure` build the contract result shapes (docs/tools.md#the-code-tools): success is one
  ``JsonBlock`` whose data has exactly the result keys; failure is ``is_error=True`` with a redacted
  ``ErrorPayload`` and a short ``TextBlock`` (plus a partial-result ``JsonBlock`` where the contract says).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from agent_core._redaction import Redactor
from agent_core.config.schema import ToolsSection
from agent_core.errors import (
    AgentCoreError,
    ErrorCode,
    FileOperationError,
    InternalError,
    InvalidArgumentError,
    PermissionDeniedError,
)
from agent_core.permissions._protected import ProtectedPath, credential_entries, protected_targets
from agent_core.tools._paths import (
    ResolvedTarget,
    SensitiveMatcher,
    is_within,
    resolve_dir,
    resolve_target,
    user_home,
    within_roots,
    write_roots,
)
from agent_core.tools._safe_fs import FileIdentity, changed, identity, open_dir
from agent_core.tools.context import ToolContext
from agent_core.tools.files import FileAccess, FileRead, FileWrite
from agent_core.tools.preflight import Preflight
from agent_core.types.content import ContentBlock, JsonBlock, TextBlock
from agent_core.types.model import ToolCall
from agent_core.types.tools import ToolDefinition, ToolResult


def invalid(message: str, **details: Any) -> AgentCoreError:
    return InvalidArgumentError(ErrorCode.validation_error, message, details=details)


@dataclass(frozen=True, slots=True)
class ToolEnv:
    """Facts shared by every step of one call."""

    tools: ToolsSection
    project: Path
    soong_home: Path
    user_home: Path
    roots: tuple[Path, ...]
    sensitive: SensitiveMatcher
    files: FileAccess | None = None
    """The runtime's :class:`~agent_core.tools.files.FileAccess` hook, when the host set one."""

    @classmethod
    def build(cls, tools: ToolsSection, ctx: ToolContext, files: FileAccess | None = None) -> ToolEnv:
        project = resolve_dir(ctx.project_dir)
        soong_home = resolve_dir(ctx.home_dir)
        home = user_home()
        return cls(
            tools=tools,
            project=project,
            soong_home=soong_home,
            user_home=home,
            roots=write_roots(project, tools.allowed_write_roots, allow_tmp=tools.allow_tmp_write),
            sensitive=SensitiveMatcher.from_entries(
                [*tools.sensitive_paths, *credential_entries()],
                soong_home=soong_home,
                project_dir=project,
                home=home,
            ),
            files=files,
        )

    def resolve(self, raw: str) -> ResolvedTarget:
        return resolve_target(raw, base=self.project, home=self.user_home)

    def in_roots(self, path: Path) -> bool:
        return within_roots(path, self.roots)

    def in_project(self, path: Path) -> bool:
        return is_within(path, self.project)

    def is_sensitive(self, target: ResolvedTarget) -> bool:
        return self.sensitive.is_sensitive(target.resolved, target.lexical)

    def protected(self, target: ResolvedTarget, *, write: bool) -> tuple[ProtectedPath, ...]:
        """The protected class of ``target`` (both forms; ``git``/``runtime`` only when ``write``)."""
        return protected_targets(
            [(target.resolved, target.lexical)],
            project=self.project,
            soong_home=self.soong_home,
            home=self.user_home,
            write=write,
        )


class Args:
    """Typed, defensive access to one call's arguments (JSON ``null`` behaves like omission)."""

    def __init__(self, tool: str, arguments: dict[str, Any], allowed: Iterable[str]) -> None:
        if not isinstance(arguments, dict):
            raise invalid(f"{tool}: arguments must be an object")
        allowed_set = set(allowed)
        unknown = sorted(k for k in arguments if k not in allowed_set)
        if unknown:
            raise invalid(
                f"{tool}: unknown argument(s) {', '.join(unknown)}",
                errors=[{"path": k, "message": "additional property not allowed"} for k in unknown],
            )
        self.tool = tool
        self.values = {k: v for k, v in arguments.items() if v is not None}

    def has(self, key: str) -> bool:
        return key in self.values

    def string(self, key: str, *, default: str | None = None, required: bool = False) -> str | None:
        if key not in self.values:
            if required:
                raise invalid(
                    f"{self.tool}: '{key}' is required", errors=[{"path": key, "message": "required"}]
                )
            return default
        value = self.values[key]
        if not isinstance(value, str):
            raise invalid(
                f"{self.tool}: '{key}' must be a string", errors=[{"path": key, "message": "not a string"}]
            )
        return value

    def required_string(self, key: str) -> str:
        value = self.string(key, required=True)
        assert value is not None
        return value

    def integer(
        self, key: str, default: int | None, *, minimum: int | None = None, maximum: int | None = None
    ) -> int | None:
        if key not in self.values:
            return default
        value = self.values[key]
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise invalid(
                f"{self.tool}: '{key}' must be an integer",
                errors=[{"path": key, "message": "not an integer"}],
            )
        if minimum is not None and value < minimum:
            raise invalid(
                f"{self.tool}: '{key}' must be >= {minimum}, got {value}",
                errors=[{"path": key, "message": f"minimum {minimum}"}],
            )
        if maximum is not None and value > maximum:
            raise invalid(
                f"{self.tool}: '{key}' must be <= {maximum}, got {value}",
                errors=[{"path": key, "message": f"maximum {maximum}"}],
            )
        return value

    def boolean(self, key: str, default: bool) -> bool:
        if key not in self.values:
            return default
        value = self.values[key]
        if not isinstance(value, bool):
            raise invalid(
                f"{self.tool}: '{key}' must be a boolean", errors=[{"path": key, "message": "not a boolean"}]
            )
        return value

    def raw(self, key: str) -> Any:
        return self.values.get(key)


def ok(call: ToolCall, data: dict[str, Any], *, metadata: dict[str, Any] | None = None) -> ToolResult:
    return ToolResult(
        tool_call_id=call.tool_call_id,
        tool_name=call.name,
        content=[JsonBlock(data=data)],
        metadata=dict(metadata or {}),
    )


def failure(
    call: ToolCall,
    error: AgentCoreError,
    redactor: Redactor,
    *,
    partial: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
) -> ToolResult:
    payload = error.to_payload(redactor)
    content: list[ContentBlock] = [TextBlock(text=payload.message)]
    if partial is not None:
        content.append(JsonBlock(data=partial))
    return ToolResult(
        tool_call_id=call.tool_call_id,
        tool_name=call.name,
        content=content,
        is_error=True,
        error=payload,
        metadata=dict(metadata or {}),
    )


class CodeTool(Protocol):
    """One built-in tool: its definition, a pure pre-flight and its execution."""

    name: str

    def definition(self) -> ToolDefinition: ...

    def preflight(self, args: dict[str, Any], env: ToolEnv) -> Preflight:
        """Validates arguments and gathers target facts; raises hard errors (docs/tools.md#execution-pipeline
        step 3)."""
        ...

    async def run(self, call: ToolCall, ctx: ToolContext, env: ToolEnv) -> ToolResult:
        """Executes an already validated and authorised call; raises :class:`AgentCoreError` on failure."""
        ...


def identities(*paths: Path) -> dict[Path, FileIdentity]:
    """The pre-flight identities of those ``paths`` that exist (see :attr:`Preflight.identities`)."""
    found: dict[Path, FileIdentity] = {}
    for path in paths:
        ident = identity(path)
        if ident is not None:
            found[path] = ident
    return found


def checked_target(raw: str, env: ToolEnv, ctx: ToolContext) -> ResolvedTarget:
    """Resolves ``raw`` again at execution time and re-runs the boundary checks on the path actually used.

    The result must equal what the pre-flight (and so the permission decision) saw: a different resolved
    target is a ``path_conflict`` (a component was swapped for a symlink meanwhile); a target that is now
    sensitive although the decision was made on a non-sensitive one is ``permission_denied``. Write roots
    are re-checked by :func:`ensure_write_allowed`."""
    target = env.resolve(raw)
    pre = ctx.preflight
    if pre is None or not pre.target_paths:
        return target
    checked = pre.target_paths[0]
    if target.resolved != checked:
        raise FileOperationError(
            ErrorCode.path_conflict,
            f"{raw!r} resolved to {checked} when it was checked but now resolves to {target.resolved} "
            "(a path component was replaced by a symlink); nothing was done",
            details={"path": str(checked), "now": str(target.resolved)},
        )
    if env.is_sensitive(target) and not pre.sensitive:
        raise PermissionDeniedError(
            ErrorCode.permission_denied,
            f"{target.resolved} is a sensitive path now; it was not when permission was decided",
            details={"path": str(target.resolved)},
        )
    return target


def checked_identity(ctx: ToolContext, path: Path) -> FileIdentity | None:
    """The identity ``path`` had at pre-flight, ``None`` when unknown (no pre-flight, or it did not exist)."""
    pre = ctx.preflight
    return pre.identities.get(path) if pre is not None else None


def ensure_write_allowed(path: Path, env: ToolEnv, ctx: ToolContext) -> None:
    """Refuses a write outside the write roots unless the pipeline set ``ctx.allowed_outside_roots``
    after an explicit permission decision (docs/tools.md#write-roots)."""
    if env.in_roots(path) or ctx.allowed_outside_roots:
        return
    raise FileOperationError(
        ErrorCode.write_outside_allowed_roots,
        f"{path} is outside the allowed write roots",
        details={"path": str(path), "roots": [str(r) for r in env.roots]},
    )


def prepare_parent(target: Path, *, create: bool, expect: FileIdentity | None = None) -> None:
    """Makes sure ``target``'s parent directory exists (creating it when ``create``) and is reached from
    ``/`` without following any symlink, i.e. no component was swapped for a link since ``target`` was
    resolved (``path_conflict``; nothing is created through a link). ``expect`` is the parent's identity
    at pre-flight, when it existed then."""
    parent = target.parent
    try:
        fd = open_dir(parent, create=create)
    except AgentCoreError as exc:
        if exc.code == ErrorCode.file_not_found:
            raise FileOperationError(
                ErrorCode.file_not_found,
                f"parent directory {parent} does not exist",
                details={"path": str(target)},
            ) from exc
        raise
    try:
        if expect is not None and FileIdentity.of(os.fstat(fd)) != expect:
            raise changed(parent, "the directory was replaced")
    finally:
        os.close(fd)


def _hook_failed(exc: Exception, path: Path) -> AgentCoreError:
    if isinstance(exc, AgentCoreError):
        return exc
    return InternalError(
        ErrorCode.internal_error,
        f"the file access hook failed for {path}: {type(exc).__name__}: {exc}",
        details={"path": str(path)},
    )


async def hooked_read(env: ToolEnv, ctx: ToolContext, path: Path) -> str | None:
    """The text of the checked ``path`` from the runtime's file access hook, ``None`` without a hook or
    when the hook leaves the read to the disk (:mod:`agent_core.tools.files`)."""
    if env.files is None:
        return None
    read = FileRead(
        path=path,
        session_id=ctx.session_id,
        run_id=ctx.run_id,
        agent_id=ctx.agent_id,
        tool_call_id=ctx.tool_call_id,
        tool_name=ctx.tool_name,
    )
    try:
        text = await env.files.read_text(read)
    except Exception as exc:
        raise _hook_failed(exc, path) from exc
    if text is not None and not isinstance(text, str):
        raise InternalError(
            ErrorCode.internal_error,
            f"the file access hook returned {type(text).__name__} for {path}, not text",
            details={"path": str(path)},
        )
    return text


async def hooked_write(
    env: ToolEnv, ctx: ToolContext, path: Path, text: str, previous_text: str | None
) -> bool:
    """Offers the write to the runtime's file access hook; ``True`` when the hook stored the text (the
    caller writes nothing), ``False`` without a hook or when the hook leaves the write to the disk."""
    if env.files is None:
        return False
    write = FileWrite(
        path=path,
        text=text,
        previous_text=previous_text,
        session_id=ctx.session_id,
        run_id=ctx.run_id,
        agent_id=ctx.agent_id,
        tool_call_id=ctx.tool_call_id,
        tool_name=ctx.tool_name,
    )
    try:
        return bool(await env.files.write_text(write))
    except Exception as exc:
        raise _hook_failed(exc, path) from exc
