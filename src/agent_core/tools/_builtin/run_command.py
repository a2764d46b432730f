"""``code.run_command`` (docs/tools.md#coderun_command): an argv list run by the command runner.

Pre-flight resolves the cwd (default ``<project>``; outside the write roots → ``write_outside_allowed_roots``,
never a prompt; inside ``.git`` or ``.soong-agent`` → a protected call), the executable (``argv[0]`` via the
absolute entries of the allowlisted ``PATH`` outside the project, or against the cwd when it contains
``/``; missing → ``file_not_found``; :mod:`agent_core.tools._executables`) and reports
``"<executable> @ <cwd>"`` as the permission scope; the prompt and the audit show the absolute executable. The child environment holds only ``tools.env_allowlist`` names that are set; stdin is
``/dev/null``. Output over ``tools.stdout_limit_bytes`` / ``tools.stderr_limit_bytes`` is inlined as
head + marker + tail and stored in full (redacted) as an artifact.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_core._redaction import Redactor
from agent_core.config.schema import Settings, ToolsSection
from agent_core.errors import (
    AgentCoreError,
    ErrorCode,
    FileOperationError,
    InternalError,
    OperationCancelledError,
    OperationTimeoutError,
)
from agent_core.tools._builtin.base import Args, ToolEnv, failure, invalid, ok
from agent_core.tools._code_definitions import code_tool_definition
from agent_core.tools._command import (
    StreamCapture,
    build_env,
    env_summary,
    head_tail,
    resolve_executable,
    run_process,
)
from agent_core.tools._sandbox import SandboxedCommand, sandboxed_command
from agent_core.tools.context import ToolContext
from agent_core.tools.preflight import Preflight
from agent_core.types.model import ToolCall
from agent_core.types.tools import ToolDefinition, ToolResult

NAME = "code.run_command"
STDERR_SUMMARY_CHARS = 500


@dataclass(frozen=True, slots=True)
class CommandPlan:
    argv: list[str]
    executable: Path
    cwd: Path
    env: dict[str, str]
    timeout_ms: int

    @property
    def scope(self) -> str:
        return f"{self.executable} @ {self.cwd}"


def _argv(value: Any) -> list[str]:
    if isinstance(value, str):
        raise invalid(
            "code.run_command: 'argv' must be a list of strings; shell command strings are not accepted",
            errors=[{"path": "argv", "message": "not an array"}],
        )
    if not isinstance(value, list) or not value:
        raise invalid(
            "code.run_command: 'argv' must be a non-empty list of strings",
            errors=[{"path": "argv", "message": "non-empty array required"}],
        )
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise invalid(
                f"code.run_command: argv[{index}] must be a string",
                errors=[{"path": f"argv[{index}]", "message": "not a string"}],
            )
        if "\x00" in item:
            raise invalid(f"code.run_command: argv[{index}] contains a NUL byte")
    if value[0] == "":
        raise invalid("code.run_command: argv[0] must not be empty")
    return list(value)


def plan_command(arguments: dict[str, Any], env: ToolEnv) -> CommandPlan:
    """Validates arguments and resolves cwd, environment and executable (raises hard errors)."""
    args = Args(NAME, arguments, ("argv", "cwd", "timeout_ms"))
    if not args.has("argv"):
        raise invalid(
            "code.run_command: 'argv' is required", errors=[{"path": "argv", "message": "required"}]
        )
    argv = _argv(args.raw("argv"))
    tools = env.tools
    timeout_ms = args.integer("timeout_ms", tools.default_timeout_ms, minimum=1, maximum=tools.max_timeout_ms)
    assert timeout_ms is not None
    raw_cwd = args.string("cwd")
    cwd = env.resolve(raw_cwd).resolved if raw_cwd is not None else env.project
    if not env.in_roots(cwd):
        raise FileOperationError(
            ErrorCode.write_outside_allowed_roots,
            f"cwd {cwd} is outside <project> and the allowed write roots",
            details={"cwd": str(cwd), "roots": [str(r) for r in env.roots]},
        )
    try:
        st = os.stat(cwd)
    except (FileNotFoundError, NotADirectoryError) as exc:
        raise FileOperationError(
            ErrorCode.file_not_found, f"cwd {cwd} does not exist", details={"cwd": str(cwd)}
        ) from exc
    if not stat.S_ISDIR(st.st_mode):
        raise invalid(f"cwd {cwd} is not a directory", cwd=str(cwd))
    child_env = build_env(tools.env_allowlist)
    executable = resolve_executable(argv[0], cwd=cwd, env=child_env, exclude=(env.project,))
    return CommandPlan(argv=argv, executable=executable, cwd=cwd, env=child_env, timeout_ms=timeout_ms)


def _redacted(capture: StreamCapture, redactor: Redactor) -> StreamCapture:
    head = redactor.bytes(capture.head)
    if not capture.overflowed:
        return StreamCapture(head=head, tail=b"", total_bytes=len(head))
    tail = redactor.bytes(capture.tail)
    return StreamCapture(
        head=head, tail=tail, total_bytes=capture.total_bytes - len(capture.head) + len(head)
    )


class RunCommandTool:
    name = NAME

    def __init__(self, tools: ToolsSection, redactor: Redactor, settings: Settings | None = None) -> None:
        self.tools = tools
        self.redactor = redactor
        self.settings = settings
        """Full settings for ``tools.sandbox`` (network policy); ``None`` means no sandbox."""

    def definition(self) -> ToolDefinition:
        return code_tool_definition(NAME, self.tools)

    def preflight(self, args: dict[str, Any], env: ToolEnv) -> Preflight:
        plan = plan_command(args, env)
        return Preflight(
            target_scope=plan.scope,
            target_paths=[plan.cwd],
            cwd=plan.cwd,
            env_summary=env_summary(env.tools.env_allowlist),
            executable=plan.executable,
            protected=env.protected(env.resolve(str(plan.cwd)), write=True),
        )

    async def _stream(
        self, ctx: ToolContext, capture: StreamCapture, limit: int, name: str, plan: CommandPlan
    ) -> tuple[str, str | None, bool, dict[str, Any]]:
        clean = _redacted(capture, self.redactor)
        text, truncated = head_tail(clean, limit)
        if not truncated:
            return text, None, False, {}
        ref = await ctx.create_artifact(
            clean.head,
            f"{name}.txt",
            "text/plain",
            f"{name} of {plan.executable.name} ({capture.total_bytes} bytes)",
        )
        meta: dict[str, Any] = {f"{name}_bytes": capture.total_bytes}
        if capture.overflowed:
            meta["artifact_truncated"] = True
        return text, ref.artifact_id, True, meta

    async def run(self, call: ToolCall, ctx: ToolContext, env: ToolEnv) -> ToolResult:
        plan = plan_command(call.arguments, env)
        argv = [str(plan.executable), *plan.argv[1:]]
        command = SandboxedCommand(argv)
        if self.settings is not None:  # bwrap when tools.sandbox = "bwrap" (issue 14 item 8)
            command = sandboxed_command(
                argv,
                cwd=plan.cwd,
                settings=self.settings,
                project=env.project,
                soong_home=env.soong_home,
                env=plan.env,
            )
        with command:
            outcome = await run_process(
                command.argv,
                cwd=plan.cwd,
                env=plan.env,
                timeout_ms=plan.timeout_ms,
                cancel_event=ctx.cancel_event,
                tail_keep=max(self.tools.stdout_limit_bytes, self.tools.stderr_limit_bytes),
                pass_fds=command.pass_fds,
            )
        stdout, out_id, out_cut, out_meta = await self._stream(
            ctx, outcome.stdout, self.tools.stdout_limit_bytes, "stdout", plan
        )
        stderr, err_id, err_cut, err_meta = await self._stream(
            ctx, outcome.stderr, self.tools.stderr_limit_bytes, "stderr", plan
        )
        data = {
            "exit_code": outcome.exit_code,
            "stdout": stdout,
            "stderr": stderr,
            "stdout_artifact_id": out_id,
            "stderr_artifact_id": err_id,
            "truncated": out_cut or err_cut,
        }
        meta: dict[str, Any] = {
            "executable": str(plan.executable),
            "cwd": str(plan.cwd),
            "duration_ms": outcome.duration_ms,
            **out_meta,
            **err_meta,
        }
        if out_meta.get("artifact_truncated") or err_meta.get("artifact_truncated"):
            meta["artifact_truncated"] = True
        if outcome.timed_out:
            error: AgentCoreError = OperationTimeoutError(
                ErrorCode.timeout,
                f"command timed out after {plan.timeout_ms} ms and was terminated",
                details={"timeout_ms": plan.timeout_ms},
            )
            return failure(
                call, error, self.redactor, partial=data, metadata={**meta, "partial": outcome.partial}
            )
        if outcome.cancelled:
            error = OperationCancelledError(
                ErrorCode.cancelled, "command cancelled with the run and was terminated"
            )
            abort = {"aborted": True, "partial": outcome.partial, "abort_reason": "run_cancelled"}
            return failure(call, error, self.redactor, partial=data, metadata={**meta, **abort})
        if outcome.exit_code != 0:
            summary = stderr.strip()[-STDERR_SUMMARY_CHARS:] or "(no stderr output)"
            error = InternalError(
                ErrorCode.internal_error,
                f"command exited with status {outcome.exit_code}: {summary}",
                details={"exit_code": outcome.exit_code},
            )
            return failure(call, error, self.redactor, partial=data, metadata=meta)
        return ok(call, data, metadata=meta)
