"""The six built-in ``code.*`` tools as one :class:`~agent_core.tools.adapter.ToolAdapter`.

``CodeToolsAdapter(settings)`` serves ``code.read_file``, ``code.list_dir``, ``code.search``,
``code.write_file``, ``code.edit_file`` and ``code.run_command`` (docs/tools.md#the-code-tools):

* :meth:`~CodeToolsAdapter.definitions` — exact names, permissions and tags; schemas with
  ``additionalProperties: false``; ``metadata.concurrency`` (``parallel`` reads, ``serial`` writes).
* :meth:`~CodeToolsAdapter.preflight` — validates arguments and returns a
  :class:`~agent_core.tools.adapter.Preflight` (``target_scope`` per docs/permissions.md#target-scopes,
  ``target_paths``, ``sensitive``, ``outside_write_roots``, ``outside_project_search``, ``cwd``,
  ``env_summary``). Hard errors raise :class:`AgentCoreError`: ``validation_error``, ``path_conflict``
  (``code.write_file``), ``patch_path_mismatch`` (``code.edit_file`` diff headers),
  ``write_outside_allowed_roots`` and ``file_not_found`` (``code.run_command`` cwd / executable).
* :meth:`~CodeToolsAdapter.execute` — runs a call and always returns a :class:`ToolResult` (tool errors
  become ``is_error=True`` results with a redacted ``ErrorPayload``).

Writes outside the write roots: pre-flight reports ``outside_write_roots=True``; after an explicit
permission allow the pipeline sets ``ToolContext.allowed_outside_roots = True`` for that call. Without
it, ``execute`` re-resolves the target and refuses with ``write_outside_allowed_roots``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from agent_core._redaction import Redactor, default_redactor
from agent_core.config.schema import Settings
from agent_core.errors import AgentCoreError, ErrorCode, InternalError, ToolNotAvailableError
from agent_core.tools._builtin.base import CodeTool, ToolEnv, failure
from agent_core.tools._builtin.edit_file import EditFileTool
from agent_core.tools._builtin.list_dir import ListDirTool
from agent_core.tools._builtin.read_file import ReadFileTool
from agent_core.tools._builtin.run_command import RunCommandTool
from agent_core.tools._builtin.search import SearchTool, find_ripgrep
from agent_core.tools._builtin.write_file import WriteFileTool
from agent_core.tools._code_definitions import CODE_TOOL_NAMES
from agent_core.tools.context import ToolContext
from agent_core.tools.files import FileAccess
from agent_core.tools.preflight import Preflight
from agent_core.types.model import ToolCall
from agent_core.types.tools import ToolDefinition, ToolResult

__all__ = ["CODE_TOOL_NAMES", "CodeToolsAdapter"]

_AUTO = "auto"


class CodeToolsAdapter:
    """Adapter for the built-in code tools (see module docstring).

    ``redactor`` redacts error messages, command output and artifacts (default: the process redactor);
    ``rg_executable`` forces a ripgrep binary, or ``None`` for the pure-Python search (default: look it up);
    ``file_access`` is the host's :class:`~agent_core.tools.files.FileAccess` hook for text reads and writes.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        redactor: Redactor | None = None,
        rg_executable: str | None = _AUTO,
        file_access: FileAccess | None = None,
    ) -> None:
        self.settings = settings
        self.file_access = file_access
        self.redactor = redactor or default_redactor
        self._envs: dict[tuple[Path, Path, str], ToolEnv] = {}
        rg = find_ripgrep() if rg_executable == _AUTO else rg_executable
        tools: list[CodeTool] = [
            ReadFileTool(),
            ListDirTool(),
            SearchTool(rg),
            WriteFileTool(),
            EditFileTool(),
            RunCommandTool(settings.tools, self.redactor, settings),
        ]
        self._tools: dict[str, CodeTool] = {tool.name: tool for tool in tools}

    def definitions(self) -> list[ToolDefinition]:
        return [self._tools[name].definition() for name in CODE_TOOL_NAMES]

    def _tool(self, call: ToolCall) -> CodeTool:
        tool = self._tools.get(call.name)
        if tool is None:
            raise ToolNotAvailableError(
                ErrorCode.tool_not_available, f"tool '{call.name}' is not served by the code tools adapter"
            )
        return tool

    def _env(self, ctx: ToolContext) -> ToolEnv:
        """The call's :class:`ToolEnv`, reused while project, home and the user's home stay the same.

        The project and home are resolved once at runtime startup (docs/configuration.md#home-and-project);
        targets are still resolved on every call.
        """
        key = (ctx.project_dir, ctx.home_dir, os.environ.get("HOME", ""))
        env = self._envs.get(key)
        if env is None:
            env = ToolEnv.build(self.settings.tools, ctx, self.file_access)
            self._envs[key] = env
        return env

    def _arguments(self, call: ToolCall) -> dict[str, Any]:
        return {k: v for k, v in call.arguments.items() if v is not None}

    async def preflight(self, call: ToolCall, ctx: ToolContext) -> Preflight:
        """Facts for hooks and permissions; raises :class:`AgentCoreError` for hard errors."""
        return self.preflight_now(call, ctx)

    def preflight_now(self, call: ToolCall, ctx: ToolContext) -> Preflight:
        """:meth:`preflight` without a coroutine (it never waits: the tool pipeline calls it directly)."""
        tool = self._tool(call)
        return tool.preflight(self._arguments(call), self._env(ctx))

    def _quiet_preflight(self, call: ToolCall, ctx: ToolContext) -> Preflight | None:
        try:
            return self._tool(call).preflight(self._arguments(call), self._env(ctx))
        except AgentCoreError:
            return None

    def target_scope(self, call: ToolCall, ctx: ToolContext) -> str | None:
        """The permission scope (docs/permissions.md#target-scopes), ``None`` when the call is invalid."""
        pre = self._quiet_preflight(call, ctx)
        return pre.target_scope if pre is not None else None

    def target_paths(self, call: ToolCall, ctx: ToolContext) -> list[Path]:
        """Resolved paths the call touches, ``[]`` when the call is invalid."""
        pre = self._quiet_preflight(call, ctx)
        return list(pre.target_paths) if pre is not None else []

    async def execute(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        try:
            tool = self._tool(call)
            return await tool.run(call, ctx, self._env(ctx))
        except AgentCoreError as exc:
            return failure(call, exc, self.redactor)
        except OSError as exc:
            error = InternalError(ErrorCode.internal_error, f"{call.name}: {exc.strerror or exc}", cause=exc)
            return failure(call, error, self.redactor)

    async def close(self) -> None:
        """Nothing to release (no pooled processes); idempotent."""
        return None
