"""Declarative command tools from ``${SOONG_AGENT_HOME}/tools/*.json`` (docs/tools.md#declarative-tools,
docs/permissions.md#target-scopes).

Loading (:func:`load_declarative_tools`, at runtime startup, only when ``tools.declarative_enabled``): one
JSON object per file; the project directory is never read. Any invalid file — bad JSON, unknown field,
schema outside the core subset, reserved namespace (``agent.``, ``internal.``, ``mcp.``), duplicate
name, invalid ``{{...}}`` template, a ``shell`` tool that is neither ``write`` nor ``dangerous`` or that
has a placeholder inside ``command``, ``timeout_ms`` above ``tools.max_timeout_ms``, or a
``working_dir`` outside ``<project>`` and the allowed write roots — raises ``ConfigError(config_error)``
naming the file. :meth:`DeclarativeToolsAdapter.register` turns a name clash with an already registered
tool (e.g. a built-in) into the same ``config_error``.

Execution (:class:`DeclarativeToolsAdapter`):

* templates ``{{args.<field>}}`` render per argv element (strings verbatim, other values compact JSON;
  an element that is exactly one absent/null placeholder is omitted, an embedded one renders ``""``);
  ``exec`` runs ``[command, *args]`` without a shell; ``shell`` runs ``sh -c <command> soong-agent-tool
  <args...>`` so values arrive as ``$1…`` and are never parsed as shell syntax;
* environment: ``tools.env_allowlist`` names that are set plus the tool's ``env_allowlist`` (required —
  a missing one is a ``config_error`` at call time); stdin: ``{tool_name, tool_call_id, arguments,
  session_id, agent_id, run_id, project_dir}``; the command runner applies timeout and cancellation;
* stdout must be a ``ToolResult``-shaped JSON object (``content`` required; ``tool_call_id``/``tool_name``
  must equal the call's when present). Exit 0 with invalid stdout → ``schema_error``; non-zero exit →
  ``internal_error`` with ``type = "command_failed"`` and the stderr summary, keeping parsed content;
  timeout → ``timeout``. A stream above its limit is stored (redacted) as an artifact and inlined as
  head + marker + tail — for stdout that makes it an invalid result (``schema_error``).
* pre-flight scope: ``"<resolved executable or sh> @ <working_dir> #<sha256(argv JSON)[:12]>"``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from agent_core._jsontext import compact_json
from agent_core._redaction import Redactor
from agent_core.config._json_file import read_json_file
from agent_core.config.loader import LoadedConfig
from agent_core.config.schema import Settings, expand_placeholders, format_validation_error
from agent_core.errors import (
    AgentCoreError,
    ConfigError,
    ErrorCode,
    FileOperationError,
    InvalidArgumentError,
    ToolNotAvailableError,
)
from agent_core.tools._command import (
    CommandOutcome,
    StreamCapture,
    build_env,
    env_summary,
    head_tail,
    resolve_executable,
    run_process,
)
from agent_core.tools._executables import trusted_which
from agent_core.tools._normalize import error_result
from agent_core.tools._paths import resolve_dir, resolve_path, within_roots, write_roots
from agent_core.tools._sandbox import sandboxed_command
from agent_core.tools._schema import check_schema
from agent_core.tools.context import ToolContext
from agent_core.tools.preflight import Preflight
from agent_core.tools.registry import CANONICAL_NAME, RESERVED_USER_NAMESPACES, ToolRegistry
from agent_core.types.base import StrictModel
from agent_core.types.content import ContentBlock, ErrorPayload, TextBlock
from agent_core.types.model import ToolCall
from agent_core.types.tools import ToolDefinition, ToolResult

TOOLS_DIRNAME = "tools"
SHELL_ARG0 = "soong-agent-tool"
PLACEHOLDER = re.compile(r"\{\{\s*args\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
ANY_BRACES = re.compile(r"\{\{.*?\}\}", re.DOTALL)
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SUMMARY_BYTES = 2000


class DeclarativeToolFile(StrictModel):
    """The file shape of docs/tools.md#declarative-tools (unknown fields are errors)."""

    name: str
    description: str = Field(min_length=1)
    input_schema: dict[str, Any]
    permission: Literal["readonly", "write"]
    tags: list[str] = Field(default_factory=list)
    command_type: Literal["exec", "shell"] = "exec"
    command: str = Field(min_length=1)
    args: list[str] = Field(default_factory=list)
    working_dir: str | None = Field(default=None, min_length=1)
    env_allowlist: list[str] = Field(default_factory=list)
    timeout_ms: int | None = Field(default=None, ge=1)
    stdout_limit_bytes: int | None = Field(default=None, ge=1)
    stderr_limit_bytes: int | None = Field(default=None, ge=1)


class _ToolOutput(StrictModel):
    """What the command prints on stdout (a ``ToolResult`` without required ids)."""

    content: list[ContentBlock]
    is_error: bool = False
    error: ErrorPayload | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    tool_call_id: str | None = None
    tool_name: str | None = None


@dataclass(frozen=True, slots=True)
class DeclarativeTool:
    """One loaded tool: its definition plus everything needed to run it."""

    definition: ToolDefinition
    source: Path
    command_type: Literal["exec", "shell"]
    command: str
    args: tuple[str, ...]
    working_dir: Path
    env_allowlist: tuple[str, ...]
    timeout_ms: int
    stdout_limit: int
    stderr_limit: int

    @property
    def name(self) -> str:
        return self.definition.name


@dataclass(frozen=True, slots=True)
class CommandPlan:
    """A rendered call: argv, cwd, environment and the permission scope."""

    argv: list[str]
    cwd: Path
    env: dict[str, str]

    @property
    def scope(self) -> str:
        digest = hashlib.sha256(_compact(self.argv).encode("utf-8")).hexdigest()[:12]
        return f"{self.argv[0]} @ {self.cwd} #{digest}"


def _compact(value: Any) -> str:
    return compact_json(value)


# ---------------------------------------------------------------------------------------------------
# Templates


def _render_value(value: Any) -> str:
    return value if isinstance(value, str) else _compact(value)


def render_arg(template: str, arguments: dict[str, Any]) -> str | None:
    """Renders one argv template; ``None`` = omit the element (a lone absent/null placeholder)."""
    whole = PLACEHOLDER.fullmatch(template)
    if whole is not None:
        value = arguments.get(whole.group(1))
        return None if value is None else _render_value(value)

    def sub(match: re.Match[str]) -> str:
        value = arguments.get(match.group(1))
        return "" if value is None else _render_value(value)

    return PLACEHOLDER.sub(sub, template)


def render_args(templates: tuple[str, ...], arguments: dict[str, Any]) -> list[str]:
    rendered = [r for t in templates if (r := render_arg(t, arguments)) is not None]
    for index, value in enumerate(rendered):
        if "\x00" in value:
            raise InvalidArgumentError(
                ErrorCode.validation_error, f"rendered argument {index} contains a NUL byte"
            )
    return rendered


def _template_fields(text: str) -> list[str] | str:
    """Placeholder fields used in ``text``, or an error string for any other ``{{...}}``."""
    fields = [m.group(1) for m in PLACEHOLDER.finditer(text)]
    rest = PLACEHOLDER.sub("", text)
    bad = ANY_BRACES.search(rest)
    if bad is not None:
        return f"invalid template {bad.group(0)!r} (only {{{{args.<field>}}}} is allowed)"
    if "{{" in rest:
        return "unterminated '{{' in template"
    return fields


# ---------------------------------------------------------------------------------------------------
# Loading


def _error(path: Path, message: str, **details: Any) -> ConfigError:
    return ConfigError(
        ErrorCode.config_error,
        f"invalid declarative tool file {path}: {message}",
        details={"path": str(path), **details},
    )


def _read(path: Path) -> Any:
    return read_json_file(path, "declarative tool file", required=True)


def _check_name(path: Path, name: str) -> None:
    if not CANONICAL_NAME.fullmatch(name):
        raise _error(
            path, f"name {name!r} is not a canonical tool name (segments of [A-Za-z0-9_-])", key="name"
        )
    if name.startswith(RESERVED_USER_NAMESPACES):
        raise _error(path, f"name {name!r} uses a reserved namespace", key="name")


def _check_templates(path: Path, entry: DeclarativeToolFile) -> None:
    properties = entry.input_schema.get("properties") or {}
    if entry.command_type == "shell" and (PLACEHOLDER.search(entry.command) or "{{" in entry.command):
        raise _error(path, "command: placeholders are not allowed in a shell command; use args ($1, $2, ...)")
    for index, template in enumerate(entry.args):
        fields = _template_fields(template)
        if isinstance(fields, str):
            raise _error(path, f"args[{index}]: {fields}", key=f"args[{index}]")
        unknown = [f for f in fields if f not in properties]
        if unknown:
            raise _error(
                path,
                f"args[{index}]: {unknown!r} is not a top-level property of input_schema",
                key=f"args[{index}]",
            )


def _working_dir(path: Path, raw: str | None, settings: Settings, home: Path, project: Path) -> Path:
    if raw is None:
        return project
    try:
        resolved = resolve_path(expand_placeholders(raw, home, project), base=project)
    except AgentCoreError as exc:
        raise _error(path, f"working_dir: {exc.message}", key="working_dir") from exc
    tools = settings.tools
    roots = write_roots(project, tools.allowed_write_roots, allow_tmp=tools.allow_tmp_write)
    if not within_roots(resolved, roots):
        raise _error(
            path,
            f"working_dir: {resolved} is outside <project> and the allowed write roots",
            key="working_dir",
        )
    return resolved


def load_tool_file(path: Path, *, settings: Settings, home: Path, project: Path) -> DeclarativeTool:
    """Parses and validates one tool file (see the module docstring)."""
    data = _read(path)
    try:
        entry = DeclarativeToolFile.model_validate(data, strict=True)
    except ValidationError as exc:
        message, items = format_validation_error(exc, str(path))
        raise ConfigError(
            ErrorCode.config_error,
            message.replace("invalid config", "invalid declarative tool file", 1),
            details={"path": str(path), "errors": items},
            cause=exc,
        ) from exc
    _check_name(path, entry.name)
    try:
        check_schema(entry.input_schema, where=f"{entry.name} input_schema")
    except AgentCoreError as exc:
        raise _error(path, f"input_schema: {exc.message}", key="input_schema") from exc
    _check_templates(path, entry)
    tags = list(dict.fromkeys([*entry.tags, "declarative"]))
    bad_tags = [t for t in tags if not t or t != t.lower()]
    if bad_tags:
        raise _error(path, f"tags must be non-empty lowercase strings, got {bad_tags!r}", key="tags")
    if entry.command_type == "shell" and entry.permission != "write" and "dangerous" not in tags:
        raise _error(path, "a shell tool needs permission 'write' or the 'dangerous' tag", key="permission")
    max_timeout = settings.tools.max_timeout_ms
    if entry.timeout_ms is not None and entry.timeout_ms > max_timeout:
        raise _error(
            path,
            f"timeout_ms {entry.timeout_ms} exceeds tools.max_timeout_ms ({max_timeout})",
            key="timeout_ms",
        )
    bad_env = [n for n in entry.env_allowlist if not ENV_NAME.match(n)]
    if bad_env:
        raise _error(path, f"env_allowlist: invalid variable name(s) {bad_env!r}", key="env_allowlist")
    serial = entry.permission == "write" or "dangerous" in tags
    definition = ToolDefinition(
        name=entry.name,
        description=entry.description,
        input_schema=entry.input_schema,
        permission=entry.permission,
        tags=tags,
        metadata={
            "source": "declarative",
            "concurrency": "serial" if serial else "parallel",
            "declarative_file": str(path),
            "command_type": entry.command_type,
        },
    )
    return DeclarativeTool(
        definition=definition,
        source=path,
        command_type=entry.command_type,
        command=entry.command,
        args=tuple(entry.args),
        working_dir=_working_dir(path, entry.working_dir, settings, home, project),
        env_allowlist=tuple(dict.fromkeys(entry.env_allowlist)),
        timeout_ms=entry.timeout_ms or settings.tools.default_timeout_ms,
        stdout_limit=entry.stdout_limit_bytes or settings.tools.stdout_limit_bytes,
        stderr_limit=entry.stderr_limit_bytes or settings.tools.stderr_limit_bytes,
    )


def load_declarative_tools(
    config: LoadedConfig, *, redactor: Redactor | None = None
) -> DeclarativeToolsAdapter | None:
    """Loads ``${SOONG_AGENT_HOME}/tools/*.json`` (sorted by file name); ``None`` when disabled, when the
    directory is missing or when it holds no ``*.json`` file."""
    settings = config.settings
    if not settings.tools.declarative_enabled:
        return None
    folder = config.home / TOOLS_DIRNAME
    if not folder.exists():
        return None
    if not folder.is_dir():
        raise ConfigError(
            ErrorCode.config_error, f"{folder} is not a directory", details={"path": str(folder)}
        )
    tools: list[DeclarativeTool] = []
    seen: dict[str, Path] = {}
    for path in sorted(folder.glob("*.json")):
        tool = load_tool_file(path, settings=settings, home=config.home, project=config.project)
        if tool.name in seen:
            raise _error(
                path, f"duplicate tool name {tool.name!r} (also declared in {seen[tool.name]})", key="name"
            )
        seen[tool.name] = path
        tools.append(tool)
    if not tools:
        return None
    return DeclarativeToolsAdapter(tools, settings, redactor=redactor)


# ---------------------------------------------------------------------------------------------------
# Execution


def _redacted(capture: StreamCapture, redactor: Redactor) -> StreamCapture:
    head = redactor.bytes(capture.head)
    if not capture.overflowed:
        return StreamCapture(head=head, tail=b"", total_bytes=len(head))
    tail = redactor.bytes(capture.tail)
    return StreamCapture(
        head=head, tail=tail, total_bytes=capture.total_bytes - len(capture.head) + len(head)
    )


class DeclarativeToolsAdapter:
    """The :class:`ToolAdapter` serving every loaded declarative tool (see the module docstring)."""

    def __init__(
        self, tools: list[DeclarativeTool], settings: Settings, *, redactor: Redactor | None = None
    ) -> None:
        self._tools = {t.name: t for t in tools}
        self._settings = settings
        self._redactor = redactor or Redactor()
        for tool in tools:
            for name in tool.env_allowlist:
                self._redactor.add_secret_env(name)

    def definitions(self) -> list[ToolDefinition]:
        return [t.definition for t in self._tools.values()]

    def tool(self, name: str) -> DeclarativeTool:
        found = self._tools.get(name)
        if found is None:
            raise ToolNotAvailableError(
                ErrorCode.tool_not_available, f"tool '{name}' is not a declarative tool"
            )
        return found

    def register(self, registry: ToolRegistry) -> None:
        """Registers through the user path; a name clash becomes ``config_error`` naming the file."""
        try:
            registry.register_adapter(self, internal=False)
        except AgentCoreError as exc:
            name = exc.details.get("tool")
            source = self._tools[name].source if isinstance(name, str) and name in self._tools else None
            where = f" ({source})" if source is not None else ""
            raise ConfigError(
                ErrorCode.config_error,
                f"cannot register declarative tool{where}: {exc.message}",
                details={"path": str(source) if source else None, **exc.details},
                cause=exc,
            ) from exc

    def plan(
        self, tool: DeclarativeTool, arguments: dict[str, Any], project: Path | None = None
    ) -> CommandPlan:
        """Renders the call and resolves executable and environment (raises hard errors). A bare command
        name is looked up in the absolute ``PATH`` entries outside ``project`` only."""
        exclude = (resolve_dir(project),) if project is not None else ()
        env = build_env(
            self._settings.tools.env_allowlist,
            required=tool.env_allowlist,
            required_by=f"declarative tool {tool.name} ({tool.source}, env_allowlist)",
        )
        if not tool.working_dir.is_dir():
            raise FileOperationError(
                ErrorCode.file_not_found,
                f"working_dir {tool.working_dir} of {tool.name} does not exist",
                details={"working_dir": str(tool.working_dir)},
            )
        rendered = render_args(tool.args, arguments)
        if tool.command_type == "exec":
            executable = resolve_executable(tool.command, cwd=tool.working_dir, env=env, exclude=exclude)
            return CommandPlan(argv=[str(executable), *rendered], cwd=tool.working_dir, env=env)
        found = trusted_which("sh", path_value=env.get("PATH", os.defpath), exclude=exclude)
        shell = found or "/bin/sh"
        return CommandPlan(
            argv=[shell, "-c", tool.command, SHELL_ARG0, *rendered], cwd=tool.working_dir, env=env
        )

    def _env_names(self, tool: DeclarativeTool) -> list[str]:
        return list(dict.fromkeys([*self._settings.tools.env_allowlist, *tool.env_allowlist]))

    async def preflight(self, call: ToolCall, ctx: ToolContext) -> Preflight:
        tool = self.tool(call.name)
        plan = self.plan(tool, call.arguments, ctx.project_dir)
        return Preflight(
            target_scope=plan.scope,
            cwd=plan.cwd,
            env_summary=env_summary(self._env_names(tool)),
            executable=Path(plan.argv[0]),
        )

    async def execute(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        tool = self.tool(call.name)
        plan = self.plan(tool, call.arguments, ctx.project_dir)
        request = {
            "tool_name": call.name,
            "tool_call_id": call.tool_call_id,
            "arguments": call.arguments,
            "session_id": ctx.session_id,
            "agent_id": ctx.agent_id,
            "run_id": ctx.run_id,
            "project_dir": str(ctx.project_dir),
        }
        with sandboxed_command(  # bwrap when tools.sandbox = "bwrap" (issue 14 item 8)
            plan.argv,
            cwd=plan.cwd,
            settings=self._settings,
            project=resolve_dir(ctx.project_dir),
            soong_home=resolve_dir(ctx.home_dir),
            env=plan.env,
        ) as command:
            outcome = await run_process(
                command.argv,
                cwd=plan.cwd,
                env=plan.env,
                stdin_data=_compact(request).encode("utf-8"),
                timeout_ms=tool.timeout_ms,
                cancel_event=ctx.cancel_event,
                tail_keep=max(tool.stdout_limit, tool.stderr_limit),
                pass_fds=command.pass_fds,
            )
        return await self._result(tool, call, ctx, outcome)

    async def _stream(
        self, ctx: ToolContext, capture: StreamCapture, limit: int, name: str, tool: DeclarativeTool
    ) -> tuple[str, str | None]:
        clean = _redacted(capture, self._redactor)
        text, truncated = head_tail(clean, limit)
        if not truncated:
            return text, None
        ref = await ctx.create_artifact(
            clean.head, f"{name}.txt", "text/plain", f"{name} of {tool.name} ({capture.total_bytes} bytes)"
        )
        return text, ref.artifact_id

    async def _result(
        self, tool: DeclarativeTool, call: ToolCall, ctx: ToolContext, outcome: CommandOutcome
    ) -> ToolResult:
        stdout, stdout_artifact = await self._stream(ctx, outcome.stdout, tool.stdout_limit, "stdout", tool)
        stderr, stderr_artifact = await self._stream(ctx, outcome.stderr, tool.stderr_limit, "stderr", tool)
        stderr_summary, _ = head_tail(_redacted(outcome.stderr, self._redactor), SUMMARY_BYTES)
        stderr_summary = stderr_summary.strip()
        metadata: dict[str, Any] = {"exit_code": outcome.exit_code}
        if stderr:
            metadata["stderr"] = stderr
        for key, value in (("stdout_artifact_id", stdout_artifact), ("stderr_artifact_id", stderr_artifact)):
            if value is not None:
                metadata[key] = value
        if outcome.timed_out or outcome.cancelled:
            code = ErrorCode.timeout if outcome.timed_out else ErrorCode.cancelled
            what = f"timed out after {tool.timeout_ms} ms" if outcome.timed_out else "was cancelled"
            partial: list[ContentBlock] = [TextBlock(text=stdout)] if stdout else []
            return error_result(
                call.tool_call_id,
                call.name,
                code,
                f"{tool.name} {what}",
                metadata=metadata,
                extra_content=partial,
            )
        parsed = self._parse(stdout if stdout_artifact is None else None, call)
        if outcome.exit_code != 0:
            message = f"command exited with status {outcome.exit_code}" + (
                f": {stderr_summary}" if stderr_summary else ""
            )
            details = {"exit_code": outcome.exit_code, "stderr_summary": stderr_summary}
            error = ErrorPayload(
                type="command_failed", code=ErrorCode.internal_error, message=message, details=details
            )
            if isinstance(parsed, ToolResult):
                merged = {**parsed.metadata, **metadata}
                return parsed.model_copy(update={"is_error": True, "error": error, "metadata": merged})
            content: list[ContentBlock] = [TextBlock(text=message)]
            if stdout.strip():
                content.append(TextBlock(text=stdout))
            return ToolResult(
                tool_call_id=call.tool_call_id,
                tool_name=call.name,
                content=content,
                is_error=True,
                error=error,
                metadata=metadata,
            )
        if isinstance(parsed, str):
            head, _ = head_tail(_redacted(outcome.stdout, self._redactor), SUMMARY_BYTES)
            invalid: dict[str, Any] = {"reason": parsed, "stdout_summary": head}
            if stdout_artifact is not None:
                invalid["stdout_artifact_id"] = stdout_artifact
            return error_result(
                call.tool_call_id,
                call.name,
                ErrorCode.schema_error,
                f"{tool.name} printed an invalid result: {parsed}",
                details=invalid,
                metadata=metadata,
            )
        return parsed.model_copy(update={"metadata": {**parsed.metadata, **metadata}})

    @staticmethod
    def _parse(stdout: str | None, call: ToolCall) -> ToolResult | str:
        """The stdout ``ToolResult`` or the reason it is invalid."""
        if stdout is None:
            return "stdout exceeded the output limit (stored as an artifact)"
        if not stdout.strip():
            return "stdout is empty"
        try:
            data = json.loads(stdout)
        except json.JSONDecodeError as exc:
            return f"stdout is not valid JSON: {exc.msg}"
        if not isinstance(data, dict):
            return "stdout JSON is not an object"
        try:
            out = _ToolOutput.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}" for e in exc.errors()[:5]
            )
            return f"not a ToolResult: {problems}"
        for key, expected in (("tool_call_id", call.tool_call_id), ("tool_name", call.name)):
            value = getattr(out, key)
            if value is not None and value != expected:
                return f"{key} {value!r} does not match the call ({expected!r})"
        error = out.error
        if out.is_error and error is None:
            first = next(
                (b.text for b in out.content if isinstance(b, TextBlock)),
                "declarative tool reported an error",
            )
            error = ErrorPayload(type="tool_error", code=ErrorCode.internal_error, message=first)
        return ToolResult(
            tool_call_id=call.tool_call_id,
            tool_name=call.name,
            content=out.content,
            is_error=out.is_error,
            error=error if out.is_error else None,
            metadata=out.metadata,
        )

    async def close(self) -> None:
        return None
