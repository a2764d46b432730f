"""Runs one hook command and interprets its output (docs/hooks-and-mcp.md#running-a-hook).

:func:`run_hook` executes the command through the shared command runner (shell, new process group,
``cwd`` = the hook's working directory, stdin = the ``HookInput`` JSON then closed, timeout with SIGTERM →
SIGKILL). The environment is exactly ``tools.env_allowlist`` names present in the process env, the hook's
own ``env_allowlist`` (required: a missing one fails the hook), plus ``SOONG_AGENT_HOME`` and
``SOONG_AGENT_PROJECT_DIR``.

Interpretation (:class:`HookRun`):

* exit 0, empty stdout → ``allow``; exit 0 with a valid ``HookOutput`` → its decision;
* invalid JSON, unknown fields, a non-object, or stdout above ``tools.stdout_limit_bytes`` → failed
  (``invalid_output``), counts as ``allow``;
* non-zero exit → failed (``exit_code``), counts as ``allow`` unless stdout is a valid ``HookOutput``
  with ``decision = "deny"`` (explicit deny, honoured);
* timeout, cancellation, missing env var or spawn failure → failed, counts as ``allow``.

stderr never affects the decision; a short head/tail summary is kept for events. Nothing here redacts:
the dispatcher redacts event payloads.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from agent_core._hooks.config import HookSpec
from agent_core.config.schema import Settings
from agent_core.errors import AgentCoreError
from agent_core.tools._command import CommandOutcome, build_env, head_tail, run_process
from agent_core.types.base import StrictModel

STDERR_SUMMARY_BYTES = 2048
HOME_ENV_NAME = "SOONG_AGENT_HOME"
PROJECT_ENV_NAME = "SOONG_AGENT_PROJECT_DIR"

FailureKind = Literal["exit_code", "timeout", "invalid_output", "cancelled", "config_error", "spawn_failed"]


class HookOutput(StrictModel):
    """What a hook prints on stdout (docs/hooks-and-mcp.md#running-a-hook). Any other field (e.g. patched
    arguments) is invalid."""

    decision: Literal["allow", "deny"] = "allow"
    reason: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    logs: list[Any] = Field(default_factory=list)


@dataclass(frozen=True, slots=True)
class HookRun:
    """The interpreted outcome of one hook process."""

    decision: Literal["allow", "deny"]
    """Effective decision: a failed hook counts as ``allow`` unless it printed an explicit deny."""
    failure: FailureKind | None = None
    failure_message: str = ""
    exit_code: int | None = None
    reason: str | None = None
    logs: list[Any] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    stderr_summary: str = ""
    duration_ms: int = 0

    @property
    def failed(self) -> bool:
        return self.failure is not None

    def error_payload(self) -> dict[str, Any]:
        """The ``error`` of a ``hook_failed`` event: ``type`` ∈ :data:`FailureKind`, message, exit code."""
        return {"type": self.failure, "message": self.failure_message, "exit_code": self.exit_code}


def hook_env(
    spec: HookSpec, *, settings: Settings, home: Path, project: Path, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The child environment of ``spec`` (see the module docstring); ``config_error`` for a missing name."""
    return build_env(
        settings.tools.env_allowlist,
        required=spec.env_allowlist,
        required_by=f"{spec.label} (hooks.json env_allowlist)",
        extra={HOME_ENV_NAME: str(home), PROJECT_ENV_NAME: str(project)},
        environ=environ,
    )


def parse_output(text: str) -> HookOutput | str:
    """A :class:`HookOutput`, or the reason why ``text`` is not one. Empty output is ``allow``."""
    if not text.strip():
        return HookOutput()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return f"stdout is not valid JSON: {exc.msg}"
    if not isinstance(data, dict):
        return "stdout JSON is not an object"
    try:
        return HookOutput.model_validate(data, strict=True)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}" for e in exc.errors()[:5]
        )
        return f"stdout is not a valid hook output: {problems}"


def _stderr_summary(outcome: CommandOutcome) -> str:
    text, _ = head_tail(outcome.stderr, STDERR_SUMMARY_BYTES)
    return text.strip()


def interpret(outcome: CommandOutcome, *, stdout_limit: int) -> HookRun:
    """Maps a finished process to a :class:`HookRun` (rules in the module docstring)."""
    stderr = _stderr_summary(outcome)
    base: dict[str, Any] = {"stderr_summary": stderr, "duration_ms": outcome.duration_ms}
    if outcome.timed_out:
        return HookRun(decision="allow", failure="timeout", failure_message="hook timed out", **base)
    if outcome.cancelled:
        return HookRun(decision="allow", failure="cancelled", failure_message="run cancelled", **base)
    too_long = outcome.stdout.total_bytes > stdout_limit
    parsed: HookOutput | str = (
        f"stdout exceeds tools.stdout_limit_bytes ({outcome.stdout.total_bytes} > {stdout_limit} bytes)"
        if too_long
        else parse_output(outcome.stdout.text())
    )
    if outcome.exit_code != 0:
        message = f"hook exited with status {outcome.exit_code}"
        if isinstance(parsed, HookOutput) and parsed.decision == "deny":
            return HookRun(
                decision="deny",
                failure="exit_code",
                failure_message=message,
                exit_code=outcome.exit_code,
                reason=parsed.reason,
                logs=parsed.logs,
                metadata=parsed.metadata,
                **base,
            )
        return HookRun(
            decision="allow",
            failure="exit_code",
            failure_message=message,
            exit_code=outcome.exit_code,
            **base,
        )
    if isinstance(parsed, str):
        return HookRun(
            decision="allow", failure="invalid_output", failure_message=parsed, exit_code=0, **base
        )
    return HookRun(
        decision=parsed.decision,
        exit_code=0,
        reason=parsed.reason,
        logs=parsed.logs,
        metadata=parsed.metadata,
        **base,
    )


async def run_hook(
    spec: HookSpec,
    hook_input: Mapping[str, Any],
    *,
    settings: Settings,
    home: Path,
    project: Path,
    cancel_event: asyncio.Event | None = None,
    environ: Mapping[str, str] | None = None,
) -> HookRun:
    """Runs ``spec`` with ``hook_input`` on stdin; never raises for hook problems (they are failures)."""
    started = time.monotonic()

    def elapsed() -> int:
        return int((time.monotonic() - started) * 1000)

    try:
        env = hook_env(spec, settings=settings, home=home, project=project, environ=environ)
    except AgentCoreError as exc:
        return HookRun(
            decision="allow", failure="config_error", failure_message=exc.message, duration_ms=elapsed()
        )
    stdin = json.dumps(hook_input, ensure_ascii=False, default=str).encode("utf-8")
    try:
        outcome = await run_process(
            shell_command=spec.command,
            cwd=spec.working_dir,
            env=env,
            stdin_data=stdin,
            timeout_ms=spec.timeout_ms,
            cancel_event=cancel_event,
        )
    except AgentCoreError as exc:
        return HookRun(
            decision="allow", failure="spawn_failed", failure_message=exc.message, duration_ms=elapsed()
        )
    except OSError as exc:
        message = f"cannot start hook: {exc.strerror or exc}"
        return HookRun(
            decision="allow", failure="spawn_failed", failure_message=message, duration_ms=elapsed()
        )
    return interpret(outcome, stdout_limit=settings.tools.stdout_limit_bytes)
