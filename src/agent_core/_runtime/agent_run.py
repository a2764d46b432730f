"""One agent run through the loop driver: scope, prompt assembly and the driver call
(docs/runs.md#the-agent-loop).

:func:`execute_agent_run` is shared by root, child, worker and compact runs; :class:`AgentRunSpec` holds
everything that differs between them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_core._context._budget import short_tools
from agent_core._context.composer import ComposeLimits
from agent_core._context.prompt import (
    DynamicSource,
    InheritedPrefix,
    RunPrompt,
    permission_mode_block,
    runtime_state_block,
    static_blocks,
    tool_schema_tokens,
)
from agent_core._hooks.base import NO_HOOKS
from agent_core._loop._limits import Budget, LimitConfig, RunLimits
from agent_core._loop._output import output_policy
from agent_core._loop.cursor import AgentCursor
from agent_core._loop.outcome import LoopOutcome
from agent_core._loop.spec import CompactionHooks, Fallback, Interruption, LoopSpec
from agent_core._media import MediaPolicy
from agent_core._runtime import lifecycle
from agent_core._runtime.features import RunFeatures
from agent_core._runtime.services import Services
from agent_core._runtime.state import RunState, SessionState
from agent_core.config._pricing import Prices
from agent_core.config._profiles import resolve_model
from agent_core.config.model import ResolvedModelConfig
from agent_core.config.schema import Settings
from agent_core.errors import AgentCoreError
from agent_core.permissions._modes import plan_tools
from agent_core.tools._effective import EffectiveTools
from agent_core.tools.context import RunScope, WorkerTaskScope
from agent_core.types.content import ArtifactRefBlock
from agent_core.types.enums import AgentRole, AgentType, RunStatus
from agent_core.types.model import SystemBlock

if TYPE_CHECKING:
    from agent_core._hooks.callbacks import CallbackHooks
    from agent_core._storage.protocol import SessionStore


@dataclass(kw_only=True, eq=False, slots=True)
class AgentRunSpec:
    """Everything that differs between agent runs; consumed by :func:`execute_agent_run`."""

    state: RunState
    session: SessionState
    cursor: AgentCursor
    model: ResolvedModelConfig
    effective: EffectiveTools
    role: AgentRole
    root_agent: bool
    dynamic_sources: list[DynamicSource] = field(default_factory=list)
    task_board: Callable[[], str | None] | None = None
    current_user_node_id: str | None = None
    max_turns: int | None = None
    parent_agent_id: str | None = None
    parent_run_id: str | None = None
    task_scope: WorkerTaskScope | None = None
    task_session_id: str | None = None
    """The session whose Task board the run's Task tools use, when not its own."""
    workdir: Path | None = None
    """Project directory, cwd and write root of the run instead of the project (worker worktrees)."""
    compaction: CompactionHooks | None = None
    purpose: str | None = None
    agent_type: AgentType = AgentType.main
    interruption: Callable[[], Interruption] | None = None
    inherit_from: AgentCursor | None = None
    """A child's parent: the child's requests start with the parent's last request — its tools and
    system prompt, and for a fork its conversation — and add the child's own instructions after it, so a
    provider's prompt cache serves the shared part (``_context/prefix.py``). ``None``: its own prompt."""


def prompt_cache_key(session_id: str, agent_id: str) -> str:
    """A stable, opaque key per agent of a session (OpenAI's ``prompt_cache_key``): the provider routes
    requests with one key to where their common prefix is cached. Ids are hashed, not sent."""
    digest = hashlib.sha256(f"{session_id}/{agent_id}".encode()).hexdigest()
    return f"soong-{digest[:32]}"


def run_limits(
    state: RunState, model: ResolvedModelConfig, settings: Settings, *, enforce: bool
) -> RunLimits:
    """The run's limits: a root run opens the tree's :class:`Budget` (or spends the one set on it before:
    a teammate's root run spends its lead's); a child run shares its root's."""
    ancestor = state.parent
    while ancestor is not None and ancestor.budget is None:
        ancestor = ancestor.parent
    if ancestor is not None and ancestor.budget is not None:
        budget = ancestor.budget
    elif state.parent is None and state.budget is not None:  # a teammate's run: its lead's budget
        budget = state.budget
    else:
        budget = Budget(LimitConfig.from_section(settings.limits))
    state.budget = budget
    prices = Prices.for_model(model)
    return RunLimits(budget=budget, prices=prices, enforce=enforce)


async def execute_agent_run(
    services: Services,
    features: RunFeatures,
    spec: AgentRunSpec,
    first_nodes: Callable[[RunScope], Awaitable[None]] | None = None,
) -> LoopOutcome:
    """Runs one agent loop: ``loop_started``, the first nodes, the turns and the terminal events."""
    loop = await prepare_agent_loop(services, features, spec, first_nodes)
    prices = loop.limits.prices if loop.limits is not None else None
    return await lifecycle.run_agent_loop(spec.state, loop, prices)


async def prepare_agent_loop(
    services: Services,
    features: RunFeatures,
    spec: AgentRunSpec,
    first_nodes: Callable[[RunScope], Awaitable[None]] | None = None,
    *,
    started: bool = False,
) -> LoopSpec:
    """Builds the run's :class:`LoopSpec` and, unless ``started`` (an engine continuing a run whose
    ``loop_started`` and first nodes are already stored), writes ``loop_started`` and the first nodes."""
    state = spec.state
    rec = state.recorder
    settings = services.settings
    effective = spec.effective
    if state.permission_mode == "plan":  # plan mode offers the read-only tools only
        offered = plan_tools(effective.definitions)
        effective = EffectiveTools(names=frozenset(d.name for d in offered), definitions=tuple(offered))
    scope = RunScope(
        session_id=state.session_id,
        agent_id=state.agent_id,
        run_id=state.run_id,
        agent_role=spec.role,
        project_dir=spec.workdir or services.config.project,
        home_dir=services.config.home,
        cwd=spec.workdir or services.config.project,
        cancel_event=state.cancel_event,
        effective_tools=effective.names,
        parent_agent_id=spec.parent_agent_id,
        parent_run_id=spec.parent_run_id,
        debug=services.debug,
        mode=state.mode,
        purpose=spec.purpose,
        task_scope=spec.task_scope,
        task_session_id=spec.task_session_id,
        permission_mode=state.permission_mode,
        media=MediaPolicy.of(spec.model),
    )
    max_turns = spec.max_turns or settings.limits.max_turns or settings.runtime.max_turns
    limits = run_limits(state, spec.model, settings, enforce=spec.role != AgentRole.compact)
    if started:
        state.status = RunStatus.running
    else:
        await lifecycle.start_loop(state, agent_type=spec.agent_type, max_turns=max_turns)
        if first_nodes is not None:
            await first_nodes(scope)
    tools = list(effective.definitions)
    catalog = features.instruction_catalog(spec.role)
    static = static_blocks(
        services.assets,
        role=spec.role.value,
        mode=state.mode.value,
        agent_id=state.agent_id,
        tools=tools,
        instruction_catalog=catalog,
        counter=services.counter,
    )
    project = str(spec.workdir or services.config.project)

    def runtime_state(_path: Sequence[Any]) -> list[SystemBlock]:
        return [
            runtime_state_block(
                project=project,
                mode=state.mode.value,
                role=spec.role.value,
                session_id=state.session_id,
                agent_id=state.agent_id,
            )
        ]

    mode_block = permission_mode_block(state.permission_mode)

    def permission_mode(_path: Sequence[Any]) -> list[SystemBlock]:
        return [mode_block]

    sources: list[DynamicSource] = list(spec.dynamic_sources)
    sources.extend(features.dynamic_sources(state, spec.role, effective))
    sources.append(runtime_state)
    if spec.role != AgentRole.compact:
        sources.append(permission_mode)

    async def make_artifact(data: Any, filename: str, summary: str) -> ArtifactRefBlock:
        return await services.artifacts.create(
            data,
            filename=filename,
            summary=summary,
            kind="context_degradation",
            session_id=state.session_id,
            agent_id=state.agent_id,
            run_id=state.run_id,
        )

    async def save_debug_artifact(
        kind: str, data: Any, filename: str, metadata: dict[str, Any] | None = None
    ) -> str | None:
        ref = await services.artifacts.create(
            data,
            filename=filename,
            kind=kind,
            session_id=state.session_id,
            agent_id=state.agent_id,
            run_id=state.run_id,
            metadata=metadata,
        )
        return ref.artifact_id

    await _account_for_deleted_artifacts(services.storage, spec.cursor)
    compose_limits = ComposeLimits(
        context_window=spec.model.context_window,
        reserve_output_tokens=settings.context.reserve_output_tokens,
        min_output_tokens=settings.context.min_output_tokens,
        dynamic_system_budget=settings.context.dynamic_system_budget,
        non_system_budget=settings.context.non_system_budget,
        result_limit_bytes=settings.tools.result_limit_bytes,
        result_limit_tokens=settings.tools.result_limit_tokens,
        task_board_token_budget=settings.context.task_board_token_budget,
    )
    prefix_owner = state.agent_id
    inherited: InheritedPrefix | None = None
    parent = spec.inherit_from
    if parent is not None and parent.cache_watch.tools is not None and not spec.cursor.prefix.started:
        sent_tools = parent.cache_watch.tools
        inherited = InheritedPrefix(
            tools=sent_tools,
            system=parent.cache_watch.system_blocks,
            tool_tokens=tool_schema_tokens(sent_tools, services.counter),
        )
        spec.cursor.prefix.inherit(parent.prefix, inherited.system, conversation=spec.role == AgentRole.fork)
        prefix_owner = parent.agent_id
    prompt = RunPrompt(
        cursor=spec.cursor,
        static=static,
        limits=compose_limits,
        dynamic_sources=sources,
        task_board=spec.task_board,
        current_run_id=state.run_id,
        current_user_node_id=spec.current_user_node_id,
        make_artifact=make_artifact,
        counter=services.counter,
        tool_tokens=tool_schema_tokens(tools, services.counter),
        tool_tokens_short=tool_schema_tokens(short_tools(tools), services.counter),
        inherited=inherited,
        model=(spec.model.provider, spec.model.name),
        estimate_factor=_factor_of(services, spec.model),
    )

    def use_model(config: ResolvedModelConfig) -> None:
        """After a fallback: the prompt follows the new model's window and reasoning."""
        prompt.model = (config.provider, config.name)
        prompt.estimate_factor = _factor_of(services, config)
        prompt.limits = replace(compose_limits, context_window=config.context_window)
        scope.media = MediaPolicy.of(config)

    metadata: dict[str, Any] = {
        "session_id": state.session_id,
        "agent_id": state.agent_id,
        "run_id": state.run_id,
        "agent_type": spec.agent_type.value,
        "prompt_cache_key": prompt_cache_key(state.session_id, prefix_owner),
    }
    if spec.purpose:
        metadata["purpose"] = spec.purpose
    adapter = services.adapter_for(spec.model)
    return LoopSpec(
        recorder=rec,
        adapter=adapter,
        provider=spec.model.provider,
        model=spec.model.name,
        temperature=spec.model.temperature,
        max_output_tokens=spec.model.max_output_tokens,
        scope=scope,
        tools=tools,
        executor=services.executor,
        hooks=NO_HOOKS if spec.role == AgentRole.compact else services.hooks,
        prompt=prompt,
        redactor=services.redactor,
        max_turns=max_turns,
        request_metadata=metadata,
        compaction=spec.compaction or features.compaction_for(state, spec.cursor, spec.role),
        debug=services.debug,
        save_debug_artifact=save_debug_artifact,
        output=output_policy(state.output_schema, state.output_retries, adapter.provider_key)
        if spec.root_agent
        else None,
        interruption=spec.interruption
        or (lambda: Interruption(reason=state.cancel_reason or "cancel_requested")),
        limits=limits,
        guardrails=_guardrails(services, spec),
        cache_watch=spec.cursor.cache_watch,
        calibration=services.calibration,
        load_attachments=_attachment_loader(services),
        fallbacks=fallbacks_of(services, spec.model),
        use_model=use_model,
        inbox=features.inbox.hook_for(state, spec.effective) if features.inbox is not None else None,
    )


def _factor_of(services: Services, config: ResolvedModelConfig) -> Callable[[], float]:
    calibration, provider, name = services.calibration, config.provider, config.name
    return lambda: calibration.factor(provider, name)


def fallbacks_of(services: Services, model: ResolvedModelConfig) -> list[Fallback]:
    """The run's ``[model] fallback_profiles`` models (resolved for the run's purpose)."""
    out: list[Fallback] = []
    for name in model.fallback_profiles:
        config = resolve_model(
            services.config, purpose=model.purpose, profile=name, source_key="model.fallback_profiles"
        )
        config = config.model_copy(update={"fallback_profiles": ()})
        out.append(Fallback(profile=name, config=config, adapter=partial(services.adapter_for, config)))
    return out


ATTACHMENT_CACHE = 16
"""Attachments a run keeps in memory (re-sent with every request of the run)."""


def _attachment_loader(services: Services) -> Callable[[list[str]], Awaitable[dict[str, bytes]]]:
    """Reads the bytes of image/document artifacts, keeping the most recent in memory for the run."""
    kept: dict[str, bytes] = {}

    async def load(ids: list[str]) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        for artifact_id in ids:
            data = kept.get(artifact_id)
            if data is None:
                try:
                    data = await services.artifacts.read_bytes(artifact_id)
                except AgentCoreError:
                    continue  # deleted meanwhile: the adapter refuses the request, naming it
                kept[artifact_id] = data
                while len(kept) > ATTACHMENT_CACHE:
                    del kept[next(iter(kept))]
            out[artifact_id] = data
        return out

    return load


def _guardrails(services: Services, spec: AgentRunSpec) -> CallbackHooks | None:
    """The output guardrails of a root run (they judge the answer the caller gets), else ``None``."""
    callbacks = services.hook_callbacks
    if callbacks is None or not callbacks.has_guardrails or not spec.root_agent or spec.purpose:
        return None
    return callbacks if spec.role in (AgentRole.main, AgentRole.orchestrator) else None


async def _account_for_deleted_artifacts(storage: SessionStore, cursor: AgentCursor) -> None:
    """Blocks of the path that reference a deleted artifact render as ``[artifact <id> (deleted)]``
    (docs/storage.md#deleting-and-cleaning-up): the ids without a registry row are handed to the cursor's
    render cache (one read per run, only when the path references artifacts)."""
    referenced = sorted(cursor.cache.referenced(cursor.path))
    deleted: set[str] = set()
    for start in range(0, len(referenced), 500):  # SQLite's bound-parameter limit
        chunk = referenced[start : start + 500]
        marks = ", ".join("?" * len(chunk))
        rows = await storage.query(f"SELECT artifact_id FROM artifacts WHERE artifact_id IN ({marks})", chunk)
        deleted.update(set(chunk) - {str(row[0]) for row in rows})
    if cursor.cache.set_deleted(frozenset(deleted)):
        cursor.memo.forget()
