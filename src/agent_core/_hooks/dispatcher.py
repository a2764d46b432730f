"""The user-hook dispatcher (docs/hooks-and-mcp.md#hooks) and :func:`load_hooks`.

:class:`HooksDispatcher` implements :class:`~agent_core._hooks.base.HookDispatcher` for one runtime:

* selects the rules of a phase whose matcher matches (tool name, tag, target path prefix) and runs their
  hooks serially in configuration order; within one run at most one hook process runs at a time (a
  per-run lock), so a parallel batch's PreToolUse hooks keep the pipeline's model order;
* emits ``hook_started`` / ``hook_completed`` / ``hook_failed`` through ``sink.emit`` (payloads redacted,
  ``tool_call_id`` set for tool hooks). The caller emits ``hook_denied`` / ``tool_denied`` /
  ``stop_hook_prevented``;
* blocking phases (PreToolUse, Stop) stop at the first deny and return ``decision="deny"``; observe-only
  phases (SessionStart, UserPromptSubmit, PostToolUse) run every matched hook and never return a deny (an
  ignored deny is reported in ``hook_completed`` and ``HookOutcome.metadata["ignored_denies"]``);
* a failing hook (non-zero exit, timeout, invalid output, missing env var) writes ``hook_failed`` and
  counts as ``allow`` unless it printed an explicit deny;
* no hooks run for the compact fork (role ``compact``) or scopes whose ``purpose`` names an
  internal job (``compact``, ``memory_extraction``, ``memory_recall``).

``HookOutcome.reasons`` holds the reasons of the hooks whose decision equals the aggregated decision;
``hook_count`` counts the hooks that ran. PostToolUse input: the committed (already size-limited) result;
artifact references carry ``artifact_id`` and the absolute artifact file path.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from agent_core._hooks.base import (
    INTERNAL_PURPOSES,
    NO_HOOKS,
    NO_OUTCOME,
    HookDispatcher,
    HookOutcome,
    SessionSource,
)
from agent_core._hooks.config import HookRule, HooksConfig, HookSpec, load_hooks_config
from agent_core._hooks.runner import HookRun, run_hook
from agent_core._redaction import Redactor
from agent_core.config.loader import LoadedConfig
from agent_core.config.schema import Settings
from agent_core.tools.context import RunScope, ToolRunSink
from agent_core.tools.preflight import Preflight
from agent_core.types import events as ev
from agent_core.types.base import format_ts
from agent_core.types.content import ArtifactRefBlock, JsonBlock, TextBlock
from agent_core.types.enums import AgentRole, HookPhase
from agent_core.types.model import ToolCall
from agent_core.types.tools import ToolDefinition, ToolResult

logger = logging.getLogger(__name__)

LAST_TEXT_LIMIT = 4096
BLOCKING_PHASES = frozenset({HookPhase.PreToolUse, HookPhase.Stop})

ArtifactPathResolver = Callable[[str, str], Path | None]
"""``(session_id, artifact_id) -> absolute artifact file path`` (or ``None`` if unknown)."""


def default_artifact_path(home: Path) -> ArtifactPathResolver:
    """Finds the artifact file under ``<home>/sessions/<session_id>/artifacts/<artifact_id>/``
    (docs/storage.md#artifacts)."""

    def resolve(session_id: str, artifact_id: str) -> Path | None:
        folder = home / "sessions" / session_id / "artifacts" / artifact_id
        try:
            files = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
        except OSError:
            return None
        return files[0] if files else None

    return resolve


def _mode(scope: RunScope) -> str:
    if scope.mode is not None:
        return scope.mode.value
    return "orchestrator" if scope.agent_role in (AgentRole.orchestrator, AgentRole.worker) else "normal"


class HooksDispatcher:
    """Runs user hooks from one validated ``hooks.json`` (see the module docstring)."""

    def __init__(
        self,
        config: HooksConfig,
        settings: Settings,
        home: Path,
        project: Path,
        redactor: Redactor | None = None,
        *,
        artifact_path: ArtifactPathResolver | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self._config = config
        self._settings = settings
        self._home = home
        self._project = project
        self._redactor = redactor or Redactor()
        for name in config.env_names:
            self._redactor.add_secret_env(name)
        self._artifact_path = artifact_path or default_artifact_path(home)
        self._environ = environ
        self._locks: weakref.WeakKeyDictionary[RunScope, asyncio.Lock] = weakref.WeakKeyDictionary()
        self._pre: weakref.WeakKeyDictionary[RunScope, dict[str, tuple[Preflight, float]]] = (
            weakref.WeakKeyDictionary()
        )
        self._closed = False

    @property
    def config(self) -> HooksConfig:
        return self._config

    def handles(self, phase: HookPhase) -> bool:
        """Whether ``hooks.json`` has a rule for ``phase`` (False: the phase runs no hook, emits nothing)."""
        return bool(self._config.rules_for(phase))

    # -- phases -------------------------------------------------------------------------------------

    async def session_start(
        self, *, scope: RunScope, sink: ToolRunSink, source: SessionSource = "new"
    ) -> HookOutcome:
        return await self._dispatch(HookPhase.SessionStart, scope, sink, {"source": source})

    async def user_prompt_submit(
        self, *, scope: RunScope, sink: ToolRunSink, prompt: str, message: dict[str, Any] | None = None
    ) -> HookOutcome:
        msg = (
            message
            if message is not None
            else {"role": "user", "content": [{"type": "text", "text": prompt}]}
        )
        return await self._dispatch(
            HookPhase.UserPromptSubmit, scope, sink, {"prompt": prompt, "message": msg}
        )

    async def pre_tool_use(
        self,
        *,
        scope: RunScope,
        sink: ToolRunSink,
        tool: ToolDefinition,
        call: ToolCall,
        preflight: Preflight,
    ) -> HookOutcome:
        self._pre.setdefault(scope, {})[call.tool_call_id] = (preflight, time.monotonic())
        fields = self._tool_fields(tool, call, preflight)
        return await self._dispatch(
            HookPhase.PreToolUse,
            scope,
            sink,
            fields,
            tool=tool,
            preflight=preflight,
            tool_call_id=call.tool_call_id,
        )

    async def post_tool_use(
        self,
        *,
        scope: RunScope,
        sink: ToolRunSink,
        tool: ToolDefinition,
        call: ToolCall,
        result: ToolResult,
        preflight: Preflight | None = None,
        duration_ms: int | None = None,
    ) -> HookOutcome:
        remembered = self._pre.get(scope, {}).pop(call.tool_call_id, None)
        if preflight is None:
            preflight = remembered[0] if remembered is not None else Preflight()
        if duration_ms is None:
            duration_ms = int((time.monotonic() - remembered[1]) * 1000) if remembered is not None else 0
        fields = self._tool_fields(tool, call, preflight)
        fields["tool_result"] = self._result_input(scope, result)
        fields["duration_ms"] = duration_ms
        return await self._dispatch(
            HookPhase.PostToolUse,
            scope,
            sink,
            fields,
            tool=tool,
            preflight=preflight,
            tool_call_id=call.tool_call_id,
        )

    async def stop(
        self,
        *,
        scope: RunScope,
        sink: ToolRunSink,
        final_text: str,
        turn_count: int = 0,
        stop_hook_active: bool = False,
    ) -> HookOutcome:
        fields = {
            "end_reason": "completed",
            "last_assistant_text": final_text[:LAST_TEXT_LIMIT],
            "stop_hook_active": stop_hook_active,
            "turn_count": turn_count,
        }
        return await self._dispatch(HookPhase.Stop, scope, sink, fields)

    async def close(self) -> None:
        """Idempotent; hook processes never outlive their call, so there is nothing left to stop."""
        self._closed = True
        self._pre.clear()

    # -- inputs -------------------------------------------------------------------------------------

    def _common(self, phase: HookPhase, scope: RunScope) -> dict[str, Any]:
        return {
            "hook_event": phase.value,
            "session_id": scope.session_id,
            "run_id": scope.run_id,
            "agent_id": scope.agent_id,
            "agent_role": scope.agent_role.value,
            "parent_agent_id": scope.parent_agent_id,
            "parent_run_id": scope.parent_run_id,
            "mode": _mode(scope),
            "project_dir": str(self._project),
            "home_dir": str(self._home),
            "created_at": format_ts(),
        }

    @staticmethod
    def _tool_fields(tool: ToolDefinition, call: ToolCall, preflight: Preflight) -> dict[str, Any]:
        return {
            "tool_name": tool.name,
            "tool_call_id": call.tool_call_id,
            "arguments": call.arguments,
            "permission": tool.permission,
            "tags": list(tool.tags),
            "target_paths": [str(p) for p in preflight.target_paths],
            "target_scope": preflight.target_scope,
        }

    def _artifact_ref(self, scope: RunScope, artifact_id: str) -> dict[str, Any]:
        path = self._artifact_path(scope.session_id, artifact_id)
        return {"artifact_id": artifact_id, "path": str(path) if path is not None else None}

    def _result_input(self, scope: RunScope, result: ToolResult) -> dict[str, Any]:
        """Small results in full; artifactised parts as summary + ``artifact_ref``
        (docs/hooks-and-mcp.md#running-a-hook)."""
        content: list[dict[str, Any]] = []
        for block in result.content:
            item = block.model_dump(mode="json")
            ref_id = block.artifact_id if isinstance(block, ArtifactRefBlock | JsonBlock) else None
            if ref_id:
                item["artifact_ref"] = self._artifact_ref(scope, ref_id)
            elif not isinstance(block, TextBlock | JsonBlock):
                item = {"type": item.get("type")}
            content.append(item)
        return {
            "is_error": result.is_error,
            "error": result.error.model_dump(mode="json") if result.error is not None else None,
            "content": content,
        }

    # -- running ------------------------------------------------------------------------------------

    def _skipped(self, scope: RunScope) -> bool:
        return self._closed or scope.agent_role == AgentRole.compact or scope.purpose in INTERNAL_PURPOSES

    def _matched(
        self, phase: HookPhase, tool: ToolDefinition | None, preflight: Preflight | None
    ) -> list[HookSpec]:
        specs: list[HookSpec] = []
        rules: tuple[HookRule, ...] = self._config.rules_for(phase)
        for rule in rules:
            if rule.matcher is not None and not rule.matcher.matches(
                tool_name=tool.name if tool is not None else None,
                tags=tool.tags if tool is not None else (),
                target_paths=preflight.target_paths if preflight is not None else (),
            ):
                continue
            specs.extend(rule.hooks)
        return specs

    async def _dispatch(
        self,
        phase: HookPhase,
        scope: RunScope,
        sink: ToolRunSink,
        fields: dict[str, Any],
        *,
        tool: ToolDefinition | None = None,
        preflight: Preflight | None = None,
        tool_call_id: str | None = None,
    ) -> HookOutcome:
        if self._skipped(scope):
            return NO_OUTCOME
        specs = self._matched(phase, tool, preflight)
        if not specs:
            return NO_OUTCOME
        hook_input = {**self._common(phase, scope), **fields}
        blocking = phase in BLOCKING_PHASES
        runs: list[HookRun] = []
        lock = self._locks.setdefault(scope, asyncio.Lock())
        async with lock:
            for spec in specs:
                run = await self._run_one(spec, hook_input, scope, sink, tool_call_id, blocking)
                runs.append(run)
                if blocking and run.decision == "deny":
                    break
        return self._aggregate(runs, blocking)

    async def _run_one(
        self,
        spec: HookSpec,
        hook_input: dict[str, Any],
        scope: RunScope,
        sink: ToolRunSink,
        tool_call_id: str | None,
        blocking: bool,
    ) -> HookRun:
        phase = spec.phase.value
        started = ev.HookStarted(phase, spec.hook_index, spec.rule_index, command=spec.summary())
        await self._emit(sink, started, tool_call_id)
        run = await run_hook(
            spec,
            hook_input,
            settings=self._settings,
            home=self._home,
            project=self._project,
            cancel_event=scope.cancel_event,
            environ=self._environ,
        )
        if run.failed:
            logger.debug("%s failed: %s", spec.label, run.failure_message)
            failed = ev.HookFailed(
                phase,
                spec.hook_index,
                spec.rule_index,
                error=run.error_payload(),
                stderr_summary=run.stderr_summary,
                duration_ms=run.duration_ms,
                decision=run.decision,
                reason=run.reason,
            )
            await self._emit(sink, failed, tool_call_id)
        else:
            completed = ev.HookCompleted(
                phase,
                spec.hook_index,
                spec.rule_index,
                decision=run.decision,
                duration_ms=run.duration_ms,
                reason=run.reason,
                logs=run.logs,
                stderr_summary=run.stderr_summary,
                ignored=True if not blocking and run.decision == "deny" else ev.ABSENT,
            )
            await self._emit(sink, completed, tool_call_id)
        return run

    async def _emit(self, sink: ToolRunSink, event: ev.EventPayload, tool_call_id: str | None) -> None:
        await sink.emit(event.redacted(self._redactor), tool_call_id=tool_call_id)

    @staticmethod
    def _aggregate(runs: list[HookRun], blocking: bool) -> HookOutcome:
        denies = [r for r in runs if r.decision == "deny"]
        decision: Literal["allow", "deny"] = "deny" if blocking and denies else "allow"
        chosen = denies if decision == "deny" else [r for r in runs if r.decision == "allow"]
        metadata: dict[str, Any] = {"failed_hooks": sum(1 for r in runs if r.failed)}
        if not blocking and denies:
            metadata["ignored_denies"] = [r.reason for r in denies]
        return HookOutcome(
            decision=decision,
            reasons=[r.reason for r in chosen if r.reason],
            hook_count=len(runs),
            metadata=metadata,
        )


def load_hooks(
    config: LoadedConfig,
    *,
    redactor: Redactor | None = None,
    artifact_path: ArtifactPathResolver | None = None,
) -> HookDispatcher:
    """The runtime's dispatcher: :data:`NO_HOOKS` when ``[hooks] enabled = false`` (the file is then not
    read) or ``${SOONG_AGENT_HOME}/hooks.json`` is missing; otherwise a :class:`HooksDispatcher`. An
    invalid/unreadable file raises ``ConfigError(config_error)`` naming it."""
    settings = config.settings
    if not settings.hooks.enabled:
        return NO_HOOKS
    hooks = load_hooks_config(settings=settings, home=config.home, project=config.project)
    if hooks is None:
        return NO_HOOKS
    return HooksDispatcher(
        hooks, settings, config.home, config.project, redactor, artifact_path=artifact_path
    )
