"""The runtime-internal compact fork run and the compaction node it yields
(docs/compaction.md#the-compact-fork).

:func:`run_compact_fork` persists the fork like any agent (an ``agents`` row with ``agent_type="fork"``,
``purpose="compact"``, ``agent_definition_id="default_compact_agent"``; a ``runs`` row with the resolved
compact model), writes ``compact_started`` on the compacted agent's side, and runs one loop through
:meth:`RunManager.execute_agent_run` with role ``compact``: an empty effective tool set, no hooks, the
``default_compact_agent`` body as its ``agent_definition`` block, at most two model turns, the
``compact.model_profile`` model with ``max_output_tokens <= compact.max_summary_tokens`` and the
``agents.default_child_timeout_ms`` timeout. Its first node is a root holding the compact input, so its
nodes never join the compacted agent's tree. The result is a :class:`CompactionDraft` (validated payload
plus the node metadata) or a :class:`CompactFailure`; nothing is written to the compacted agent here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from agent_core._asset_loader import AssetLoader
from agent_core._compact.inputs import CompactInput, RangeFacts, build_input, range_facts
from agent_core._compact.payload import ValidatedSummary, validate_payload
from agent_core._compact.policy import CutPlan
from agent_core._concurrency import TaskOwner
from agent_core._context.prompt import runtime_state_block, static_blocks
from agent_core._context.tokens import TokenCounter
from agent_core._events.stream import EventChannel
from agent_core._frontmatter import split_frontmatter
from agent_core._ids import new_id
from agent_core._jsontext import compact_json
from agent_core._loop.cursor import AgentCursor
from agent_core._loop.outcome import LoopOutcome
from agent_core._loop.spec import Interruption, NoCompaction
from agent_core._runtime import lifecycle
from agent_core._runtime.agent_run import AgentRunSpec
from agent_core._runtime.runs import RunManager
from agent_core._runtime.services import Services
from agent_core._runtime.state import RunState, SessionState
from agent_core.config._profiles import resolve_purpose_model
from agent_core.config.model import ResolvedModelConfig
from agent_core.errors import AgentCoreError, ConfigError, ErrorCode, SchemaError
from agent_core.tools._effective import compute_effective_tools
from agent_core.tools.context import RunScope
from agent_core.types import events as ev
from agent_core.types.base import format_ts
from agent_core.types.content import ErrorPayload, TextBlock, text_of
from agent_core.types.enums import (
    AgentRole,
    AgentStatus,
    AgentType,
    EndReason,
    MessageRole,
    NodeType,
    RunStatus,
)
from agent_core.types.model import SystemBlock
from agent_core.types.runtime import Node
from agent_core.types.storage import AgentRecord

log = logging.getLogger("agent_core._compact")

COMPACT_DEFINITION_ID = "default_compact_agent"
COMPACT_ASSET_ID = "agent.default_compact_agent"
MAX_TURNS = 2
INPUT_MARGIN_TOKENS = 32
"""Headroom below the fork's computed non-system budget (feature dynamic blocks, wrapper overhead)."""

CompactMode = Literal["auto", "recovery"]
FailureReason = Literal["error", "invalid_payload", "timeout", "cancelled"]


@dataclass(kw_only=True, eq=False, slots=True)
class CompactRequest:
    """One compaction of one agent, fixed at trigger time."""

    session: SessionState
    trigger: RunState
    """The run that triggered the compaction (its agent is the compacted agent)."""
    cursor: AgentCursor
    """The compacted agent's active path."""
    root_agent: bool
    plan: CutPlan
    mode: CompactMode
    tokens_before: int
    compact_agent_id: str = field(default_factory=lambda: new_id("agent_"))
    compact_run_id: str = field(default_factory=lambda: new_id("run_"))

    @property
    def target_agent_id(self) -> str:
        return self.trigger.agent_id


@dataclass(frozen=True, kw_only=True, slots=True)
class CompactionDraft:
    """A validated compaction, ready to be appended (``metadata`` per
    docs/compaction.md#the-compaction-node)."""

    summary: str
    metadata: dict[str, Any]
    summary_tokens: int


@dataclass(frozen=True, kw_only=True, slots=True)
class CompactFailure:
    reason: FailureReason
    error: ErrorPayload


ForkResult = CompactionDraft | CompactFailure


def compact_model(services: Services) -> ResolvedModelConfig:
    """The ``compact.model_profile`` model (main ``[model]`` when absent), output capped at
    ``compact.max_summary_tokens``; ``ConfigError`` for a bad profile or an unregistered provider."""
    model = resolve_purpose_model(services.config, "compact")
    if model.provider not in services.providers:
        raise ConfigError(
            ErrorCode.config_error,
            f"{services.config.config_path}: provider {model.provider!r} for profile compact "
            "(compact.model_profile) is not a registered provider",
        )
    cap = min(model.max_output_tokens, services.settings.compact.max_summary_tokens)
    return model.model_copy(update={"max_output_tokens": cap})


def definition_block(assets: AssetLoader, counter: TokenCounter) -> SystemBlock:
    """The ``agent_definition:default_compact_agent`` dynamic block (the asset body, never overridable)."""
    asset = assets.load(COMPACT_ASSET_ID)
    body = split_frontmatter(asset.text).body.strip()
    return SystemBlock(
        block_id=f"agent_definition:{COMPACT_DEFINITION_ID}",
        source="agent_definition",
        content=body,
        priority=100,
        dynamic=True,
        token_count=counter.text(body),
        metadata={**asset.template_metadata, "agent_definition_id": COMPACT_DEFINITION_ID},
    )


def input_budget(
    services: Services, model: ResolvedModelConfig, definition: SystemBlock, req: CompactRequest
) -> int:
    """Tokens left for the fork's user message: ``W - max(R, max_output) - system tokens``
    (docs/compaction.md#the-compact-fork)."""
    counter = services.counter
    settings = services.settings
    static = static_blocks(
        services.assets,
        role=AgentRole.compact.value,
        mode=req.trigger.mode.value,
        agent_id=req.compact_agent_id,
        tools=[],
        instruction_catalog=None,
        counter=counter,
    )
    static_tokens = sum(b.token_count or 0 for b in static)
    state_block = runtime_state_block(
        project=str(services.config.project),
        mode=req.trigger.mode.value,
        role=AgentRole.compact.value,
        session_id=req.session.session_id,
        agent_id=req.compact_agent_id,
    )
    reserve = max(settings.context.reserve_output_tokens, model.max_output_tokens)
    dynamic = (definition.token_count or 0) + counter.text(state_block.content)
    dynamic = min(dynamic, settings.context.dynamic_system_budget)
    budget = model.context_window - reserve - static_tokens - dynamic
    if settings.context.non_system_budget is not None:
        budget = min(budget, settings.context.non_system_budget)
    return max(0, budget - INPUT_MARGIN_TOKENS)


async def _persist_fork(manager: RunManager, req: CompactRequest, model: ResolvedModelConfig) -> RunState:
    storage = manager.services.storage
    trigger = req.trigger
    now = format_ts()
    agent_meta = {
        "name": "compact",
        "purpose": "compact",
        "agent_definition_id": COMPACT_DEFINITION_ID,
        "target_agent_id": req.target_agent_id,
        "mode": req.mode,
    }
    await storage.insert_agent(
        AgentRecord(
            agent_id=req.compact_agent_id,
            session_id=req.session.session_id,
            parent_agent_id=req.target_agent_id,
            agent_type=AgentType.fork,
            created_by_run_id=trigger.run_id,
            fork_from_node_id=req.plan.covered_tip_node_id,
            status=AgentStatus.running,
            metadata_json=compact_json(agent_meta),
            created_at=now,
            updated_at=now,
        )
    )
    run_meta = {
        "mode": trigger.mode.value,
        "model": lifecycle.model_meta(model),
        "agent_type": AgentType.fork.value,
        "purpose": "compact",
        "compact_mode": req.mode,
        "parent_run_id": trigger.run_id,
        "parent_agent_id": req.target_agent_id,
    }
    await lifecycle.insert_run_row(
        storage,
        run_id=req.compact_run_id,
        session_id=req.session.session_id,
        agent_id=req.compact_agent_id,
        status=RunStatus.pending,
        metadata=run_meta,
    )
    state = RunState(
        run_id=req.compact_run_id,
        session_id=req.session.session_id,
        agent_id=req.compact_agent_id,
        mode=trigger.mode,
        role=AgentRole.compact,
        agent_type=AgentType.fork,
        status=RunStatus.pending,
        channel=EventChannel(buffer_before_subscribe=False),
        purpose="compact",
        parent=trigger,
        model=model,
        cursor=AgentCursor(req.compact_agent_id),
    )
    assert state.cursor is not None
    manager.recorder_for(state, state.cursor, root_agent=False)
    return state


async def run_compact_fork(
    manager: RunManager, req: CompactRequest, *, follow_cancel: RunState | None = None
) -> ForkResult:
    """Runs the compact fork for ``req`` and validates its payload.

    ``follow_cancel`` (recovery mode) is the run whose cancellation also cancels the fork; a background
    fork outlives its trigger and is cancelled only by ``runtime.close()``.
    """
    services = manager.services
    try:
        model = compact_model(services)
        definition = definition_block(services.assets, services.counter)
    except AgentCoreError as exc:
        return CompactFailure(reason="error", error=exc.to_payload(services.redactor))
    facts = range_facts(req.plan.summarised, req.plan.previous_compaction)
    budget = input_budget(services, model, definition, req)
    compact_input = build_input(
        req.plan, facts, tokens_before=req.tokens_before, budget_tokens=budget, counter=services.counter
    )
    if not compact_input.fits:
        error = ErrorPayload(
            type="prompt_too_long",
            code=ErrorCode.validation_error,
            message="the compact input does not fit the compact model's context window",
            details={"budget": budget, "estimated_tokens": services.counter.text(compact_input.text)},
        )
        return CompactFailure(reason="error", error=error)
    state = await _persist_fork(manager, req, model)
    if req.mode == "auto":
        state.task = asyncio.current_task()
    await req.trigger.recorder.emit(
        ev.CompactStarted(
            mode=req.mode,
            child_run_id=req.compact_run_id,
            compact_agent_id=req.compact_agent_id,
            target_agent_id=req.target_agent_id,
            covered_tip_node_id=req.plan.covered_tip_node_id,
            first_kept_node_id=req.plan.first_kept_node_id,
            tokens_before=req.tokens_before,
            split_turn=req.plan.split_turn,
        ),
    )
    outcome, timed_out = await _execute(manager, req, state, model, definition, compact_input, follow_cancel)
    assert state.cursor is not None
    return _result(req, outcome, timed_out, state.cursor.path, facts, compact_input, services.counter)


async def _execute(
    manager: RunManager,
    req: CompactRequest,
    state: RunState,
    model: ResolvedModelConfig,
    definition: SystemBlock,
    compact_input: CompactInput,
    follow_cancel: RunState | None,
) -> tuple[LoopOutcome, bool]:
    services = manager.services
    rec = state.recorder
    timeout_ms = services.settings.agents.default_child_timeout_ms
    timed_out = False

    def on_timeout() -> None:
        nonlocal timed_out
        if not state.terminal and not state.cancel_event.is_set():
            timed_out = True
            state.cancel_reason = "timeout"
            state.cancel_event.set()

    def interruption() -> Interruption:
        if timed_out:
            error = ErrorPayload(
                code=ErrorCode.timeout, message=f"the compact fork timed out after {timeout_ms} ms"
            )
            return Interruption(status=RunStatus.aborted, reason="timeout", error=error)
        return Interruption(reason=state.cancel_reason or "cancel_requested")

    async def follow(parent: RunState) -> None:
        await parent.cancel_event.wait()
        if not state.cancel_event.is_set():
            state.cancel_reason = parent.cancel_reason or "cancel_requested"
            state.cancel_event.set()

    first_id = new_id("node_")

    async def first_nodes(_scope: RunScope) -> None:
        await rec.write_node(
            node_id=first_id,
            parent_id=None,
            role=MessageRole.user,
            node_type=NodeType.message,
            content=[TextBlock(text=compact_input.text)],
            metadata={
                "synthetic": True,
                "source": "compact_input",
                "target_agent_id": req.target_agent_id,
                "first_kept_node_id": req.plan.first_kept_node_id,
                "covered_tip_node_id": req.plan.covered_tip_node_id,
                "truncated_input": compact_input.truncated,
            },
            events=[(ev.MessageCreated(text_preview=compact_input.text[:200]), None)],
            run_update={"start_node_id": first_id},
        )

    assert state.cursor is not None
    spec = AgentRunSpec(
        state=state,
        session=req.session,
        cursor=state.cursor,
        model=model,
        effective=compute_effective_tools(services.tools.definitions(), services.settings, AgentRole.compact),
        role=AgentRole.compact,
        root_agent=False,
        dynamic_sources=[lambda _path: [definition]],
        current_user_node_id=first_id,
        max_turns=MAX_TURNS,
        parent_agent_id=req.target_agent_id,
        parent_run_id=req.trigger.run_id,
        compaction=NoCompaction(),
        purpose="compact",
        agent_type=AgentType.fork,
        interruption=interruption,
    )
    manager.runs[state.run_id] = state
    req.session.live_runs[state.run_id] = state
    handle = asyncio.get_running_loop().call_later(timeout_ms / 1000, on_timeout)
    async with TaskOwner() as watchers:  # the parent's cancel request reaches the fork; gone at its end
        if follow_cancel is not None:
            watchers.spawn(follow(follow_cancel))
        try:
            if manager.closing:
                state.cancel_reason = "runtime_closed"
                state.cancel_event.set()
            outcome = await manager.execute_agent_run(spec, first_nodes)
        except Exception as exc:
            await lifecycle.fail_before_loop(services, state, exc)
            outcome = LoopOutcome(state.status, state.end_reason, error=state.error)
        finally:
            handle.cancel()
            lifecycle.ended_unexpectedly(state)
            req.session.live_runs.pop(state.run_id, None)
            manager.runs.pop(state.run_id, None)
    status = {
        RunStatus.completed: AgentStatus.completed,
        RunStatus.cancelled: AgentStatus.cancelled,
    }.get(outcome.status, AgentStatus.failed)
    with contextlib.suppress(Exception):
        await services.storage.update_agent(state.agent_id, status=status)
    return outcome, timed_out


def _answers(path: Sequence[Node]) -> list[tuple[str, bool]]:
    """Candidate payload texts of the fork's final answer, newest first, with "stopped at max_tokens"."""
    chain: list[Node] = []
    for node in reversed(path):
        if node.role != "assistant" or node.metadata.get("partial") or node.metadata.get("failed"):
            if chain:
                break
            continue
        if chain and _stop_reason(node) != "max_tokens":
            break
        chain.append(node)
    if not chain:
        return []
    texts = [(text_of(n.content), _stop_reason(n) == "max_tokens") for n in chain]
    candidates = [texts[0]]
    if len(chain) > 1:
        joined = "".join(t for t, _ in reversed(texts))
        candidates.append((joined, any(flag for _, flag in texts)))
        candidates.extend(texts[1:])
    return [(t, flag) for t, flag in candidates if t.strip()]


def _stop_reason(node: Node) -> str | None:
    stop = node.metadata.get("stop_reason")
    return stop.get("reason") if isinstance(stop, dict) else None


_ACCEPTABLE_FAILURES = (EndReason.max_turns, EndReason.max_output_tokens_recovery)


def _result(
    req: CompactRequest,
    outcome: LoopOutcome,
    timed_out: bool,
    path: Sequence[Node],
    facts: RangeFacts,
    compact_input: CompactInput,
    counter: TokenCounter,
) -> ForkResult:
    if timed_out:
        error = outcome.error or ErrorPayload(code=ErrorCode.timeout, message="the compact fork timed out")
        return CompactFailure(reason="timeout", error=error)
    if outcome.status == RunStatus.cancelled:
        message = "the compact fork was cancelled"
        return CompactFailure(
            reason="cancelled", error=ErrorPayload(code=ErrorCode.cancelled, message=message)
        )
    usable = outcome.status == RunStatus.completed or (
        outcome.status == RunStatus.failed and outcome.end_reason in _ACCEPTABLE_FAILURES
    )
    if not usable:
        error = outcome.error or ErrorPayload(
            code=ErrorCode.internal_error,
            message=f"the compact fork ended {outcome.status.value} ({outcome.end_reason})",
        )
        return CompactFailure(reason="error", error=error)
    first_error: SchemaError | None = None
    for text, stopped_at_limit in _answers(path):
        try:
            validated = validate_payload(
                text,
                expected_first_kept=req.plan.first_kept_node_id,
                tokens_before=req.tokens_before,
                split_turn=req.plan.split_turn,
            )
        except SchemaError as exc:
            first_error = first_error or exc
            continue
        truncated = stopped_at_limit or outcome.status != RunStatus.completed
        return _draft(req, validated, truncated, facts, compact_input, counter)
    if first_error is None:
        first_error = SchemaError(ErrorCode.schema_error, "the compact fork gave no final answer")
    return CompactFailure(reason="invalid_payload", error=first_error.to_payload())


def _draft(
    req: CompactRequest,
    validated: ValidatedSummary,
    truncated_summary: bool,
    facts: RangeFacts,
    compact_input: CompactInput,
    counter: TokenCounter,
) -> CompactionDraft:
    plan = req.plan
    summary = validated.summary
    summary_tokens = counter.text(summary)
    core: dict[str, Any] = {
        "mode": req.mode,
        "covered_tip_node_id": plan.covered_tip_node_id,
        "range_start_node_id": plan.range_start_node_id,
        "split_turn": plan.split_turn,
        "turn_start_node_id": plan.turn_start_node_id,
        "files_read": facts.files_read,
        "files_modified": facts.files_modified,
        "artifact_ids": facts.artifact_ids,
        "previous_compaction_node_id": plan.previous_compaction_node_id,
        "compact_agent_id": req.compact_agent_id,
        "compact_run_id": req.compact_run_id,
        "summary_tokens": summary_tokens,
        "truncated_input": compact_input.truncated,
        "normalized_sections": validated.normalized_sections,
    }
    if validated.reported_tokens_before != req.tokens_before:
        core["reported_tokens_before"] = validated.reported_tokens_before
    if truncated_summary:
        core["truncated_summary"] = True
    details = {**validated.model_details, **core}
    metadata = {
        "first_kept_node_id": plan.first_kept_node_id,
        "tokens_before": req.tokens_before,
        "details": details,
        "mode": req.mode,
        "covered_tip_node_id": plan.covered_tip_node_id,
        "previous_compaction_node_id": plan.previous_compaction_node_id,
        "compact_agent_id": req.compact_agent_id,
        "compact_run_id": req.compact_run_id,
    }
    return CompactionDraft(summary=summary, metadata=metadata, summary_tokens=summary_tokens)
