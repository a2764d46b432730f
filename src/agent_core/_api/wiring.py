"""Assembles an open runtime from its parts and tears it down again
(docs/architecture.md#assembling-an-open-runtime)."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agent_core._agents.feature import Agents
from agent_core._agents.feature import install as install_agents
from agent_core._artifacts.manager import ArtifactManager
from agent_core._asset_loader import AssetLoader
from agent_core._compact.service import CompactionService
from agent_core._compact.service import install as install_compaction
from agent_core._context.instructions import (
    catalog_block,
    instruction_blocks,
    scan_instruction_catalog,
)
from agent_core._context.prompt import DynamicSource
from agent_core._hooks.base import NO_HOOKS, HookDispatcher
from agent_core._inbox.service import Inbox
from agent_core._orchestrator.feature import TaskFeature
from agent_core._orchestrator.feature import install as install_tasks
from agent_core._questions.definition import ask_user_definition
from agent_core._questions.service import QuestionCallback, QuestionService
from agent_core._redaction import Redactor, dsn_secrets
from agent_core._runtime.features import RunFeatures
from agent_core._runtime.runs import RunManager
from agent_core._runtime.services import Services
from agent_core._runtime.state import RunState
from agent_core._skills.catalog import SkillCatalog
from agent_core._skills.tool_definition import load_skill_definition
from agent_core._storage.backend import session_store
from agent_core.config.loader import LoadedConfig
from agent_core.config.model import ModelProfile
from agent_core.config.schema import Settings
from agent_core.permissions._deferred import PermissionDeferral
from agent_core.permissions._gate import PermissionGate
from agent_core.providers.registry import ProviderRegistry
from agent_core.tools._code_definitions import code_tool_definitions
from agent_core.tools._effective import EffectiveTools
from agent_core.tools._lazy import LazyToolAdapter
from agent_core.tools._pipeline import ToolExecutor
from agent_core.tools._web_fetch.definition import web_fetch_definition
from agent_core.tools.adapter import ToolAdapter
from agent_core.tools.registry import ToolRegistry
from agent_core.types.enums import AgentRole
from agent_core.types.model import SystemBlock
from agent_core.types.permissions import PermissionDecision, PermissionRequest
from agent_core.types.runtime import AgentDefinition, Node

if TYPE_CHECKING:
    from agent_core._agents.team import Team
    from agent_core._memory import MemoryService
    from agent_core.jobs import JobManager
    from agent_core.tools.files import FileAccess
    from agent_core.types.hooks import Hook

log = logging.getLogger("agent_core._runtime")
PermissionCallback = Callable[[PermissionRequest], Awaitable[PermissionDecision | PermissionDeferral]]


@dataclass(frozen=True, eq=False, kw_only=True, slots=True)
class OpenRuntime:
    """One open runtime: its run manager and its features, typed (what ``AgentRuntime`` reaches)."""

    manager: RunManager
    agents: Agents
    tasks: TaskFeature
    compaction: CompactionService
    memory: MemoryService | None
    jobs: JobManager | None
    inbox: Inbox
    team: Team | None


def secret_env_names(config: LoadedConfig) -> set[str]:
    """Every env var named by an ``api_key_env`` or ``storage.postgres.dsn_env`` (write-time redaction)."""
    settings = config.settings
    names = {settings.model.api_key_env, settings.storage.postgres.dsn_env or ""}
    profiles: list[Any] = list(settings.model_overrides.values())
    profiles += [settings.compact.model_profile, settings.memory.extract_model_profile]
    profiles.append(settings.memory.recall_model_profile)
    for profile in profiles:
        if isinstance(profile, ModelProfile) and profile.api_key_env:
            names.add(profile.api_key_env)
    return {n for n in names if n}


def config_secrets(config: LoadedConfig, environ: Mapping[str, str] | None = None) -> list[str]:
    """Secret values the configuration leads to beyond whole environment values: the password inside the
    ``storage.postgres.dsn_env`` DSN (a command printing the DSN in another form still cannot show it)."""
    env = os.environ if environ is None else environ
    dsn_env = config.settings.storage.postgres.dsn_env
    dsn = env.get(dsn_env) if dsn_env else None
    return dsn_secrets(dsn) if dsn else []


async def open_services(
    config: LoadedConfig,
    *,
    providers: ProviderRegistry,
    tools: ToolRegistry,
    permission_callback: PermissionCallback | None,
    debug: bool,
    code_definitions: Sequence[AgentDefinition],
    hooks: Sequence[Hook] = (),
    question_callback: QuestionCallback | None = None,
    file_access: FileAccess | None = None,
) -> OpenRuntime:
    """Opens storage, verifies assets and wires every registry; releases everything on failure."""
    redactor = Redactor(secret_env_names(config))
    for secret in config_secrets(config):
        redactor.add_secret(secret)
    storage = session_store(config, redactor)
    caller_adapters = {id(a) for a in tools.adapters()}
    await storage.open()
    try:
        assets = AssetLoader()
        assets.verify_all()
        assets.template(config.settings.plan.template_name, config_path=config.config_path)
        providers.ensure_builtins()
        settings = config.settings
        # static definitions; the implementations are imported on the first call (cold start)
        tools.register_adapter(
            LazyToolAdapter(
                code_tool_definitions(settings.tools), lambda: _code_tools(settings, redactor, file_access)
            ),
            internal=True,
        )
        tools.register_adapter(
            LazyToolAdapter([web_fetch_definition()], lambda: _web_fetch_tool(settings, redactor)),
            internal=True,
        )
        skills = SkillCatalog(config.home)
        tools.register_adapter(
            LazyToolAdapter([load_skill_definition()], lambda: _skill_tool(skills)), internal=True
        )
        gate = PermissionGate(permission_callback, settings, redactor=redactor)
        questions = QuestionService(question_callback)
        tools.register_adapter(
            LazyToolAdapter([ask_user_definition()], lambda: _ask_user_tool(questions, redactor)),
            internal=True,
        )
        # optional user-level sources are imported only when their files exist (CLI cold start)
        hooks_dispatcher: HookDispatcher = NO_HOOKS
        if settings.hooks.enabled and (config.home / "hooks.json").exists():
            from agent_core._hooks.dispatcher import load_hooks

            hooks_dispatcher = load_hooks(config, redactor=redactor)
        callbacks = None
        if hooks:  # AgentRuntime(hooks=[...]): in front of hooks.json's
            from agent_core._hooks.callbacks import CallbackHooks, HookChain

            callbacks = CallbackHooks(
                hooks,
                redactor=redactor,
                timeout_ms=settings.hooks.default_timeout_ms,
                project_dir=config.project,
                home_dir=config.home,
            )
            hooks_dispatcher = HookChain(callbacks, hooks_dispatcher)
        if settings.tools.declarative_enabled and (config.home / "tools").exists():
            from agent_core.tools._declarative import load_declarative_tools

            declarative = load_declarative_tools(config, redactor=redactor)
            if declarative is not None:
                declarative.register(tools)
        mcp = None
        if (config.home / "mcp.json").exists():
            from agent_core._mcp import McpManager, load_mcp_catalog

            mcp = McpManager(
                load_mcp_catalog(config), settings, registry=tools, redactor=redactor, roots=[config.project]
            )
        executor = ToolExecutor(
            tools, settings=settings, gate=gate, hooks=hooks_dispatcher, redactor=redactor
        )
        services = Services(
            config=config,
            redactor=redactor,
            storage=storage,
            artifacts=ArtifactManager(config.home, storage, redactor),
            assets=assets,
            providers=providers,
            tools=tools,
            executor=executor,
            gate=gate,
            hooks=hooks_dispatcher,
            debug=debug,
            mcp=mcp,
            hook_callbacks=callbacks,
            questions=questions,
        )
        manager = RunManager(services)
        if mcp is not None:  # servers' sampling and elicitation requests run on the calling run
            from agent_core._mcp.host import RuntimeMcpHost

            mcp.attach_host(RuntimeMcpHost(manager))
        inbox = Inbox(manager)  # the one delivery path of teammates, background jobs and schedules
        # the install order is this code: the agents before the orchestrator that dispatches workers
        agents = install_agents(manager, code_definitions)
        tasks = install_tasks(manager, agents)
        team = None
        if settings.agents.max_teammates_per_session > 0:  # teams (docs/teams.md): off by default
            from agent_core._agents.team_tools import install as install_team

            team = install_team(manager, inbox, agents, tasks)
        memory = None
        if settings.memory.enabled:
            from agent_core._memory import install as install_memory

            memory = install_memory(manager)
        compaction = await install_compaction(manager)
        jobs = None
        # background jobs (docs/jobs-and-schedules.md#background-jobs): off by default
        if settings.tools.offload_after_ms > 0:
            from agent_core.jobs import install as install_jobs

            jobs = install_jobs(manager, inbox)
        engine = None
        if settings.engine.kind == "temporal":  # temporalio is imported only with this engine
            from agent_core.engine.temporal._client import install as install_temporal

            engine = install_temporal(manager)
        telemetry = None
        if settings.telemetry.enabled:  # OpenTelemetry is imported only when traces are on
            from agent_core.telemetry import install as install_telemetry

            telemetry = install_telemetry(manager)
        manager.features = RunFeatures(
            context=InstructionSources(config, skills),
            children=agents,
            tasks=tasks,
            compaction=compaction,
            memory=memory,
            jobs=jobs,
            telemetry=telemetry,
            engine=engine,
            inbox=inbox,
            team=team,
        )
        return OpenRuntime(
            manager=manager,
            agents=agents,
            tasks=tasks,
            compaction=compaction,
            memory=memory,
            jobs=jobs,
            inbox=inbox,
            team=team,
        )
    except BaseException:
        # a later call retries opening: drop what this attempt registered in the caller's registry
        for adapter in tools.adapters():
            if id(adapter) not in caller_adapters:
                tools.unregister_adapter(adapter)
                with contextlib.suppress(Exception):
                    await adapter.close()
        with contextlib.suppress(Exception):
            await storage.close()
        raise


def _code_tools(settings: Settings, redactor: Redactor, file_access: FileAccess | None) -> ToolAdapter:
    from agent_core.tools._builtin import CodeToolsAdapter

    return CodeToolsAdapter(settings, redactor=redactor, file_access=file_access)


def _ask_user_tool(questions: QuestionService, redactor: Redactor) -> ToolAdapter:
    from agent_core._questions.tool import AskUserTool

    return AskUserTool(questions, redactor)


def _web_fetch_tool(settings: Settings, redactor: Redactor) -> ToolAdapter:
    from agent_core.tools._web_fetch.tool import WebFetchAdapter

    return WebFetchAdapter(settings, redactor=redactor)


def _skill_tool(skills: SkillCatalog) -> ToolAdapter:
    from agent_core._skills.tool import SkillToolAdapter

    return SkillToolAdapter(skills)


class InstructionSources:
    """``RunFeatures.context``: the instruction catalog and the per-run instruction and skill blocks."""

    def __init__(self, config: LoadedConfig, skills: SkillCatalog) -> None:
        self._config = config
        self._skills = skills

    def instruction_catalog(self) -> SystemBlock | None:
        return catalog_block(scan_instruction_catalog(self._config.home, self._config.project))

    def dynamic_sources(
        self, state: RunState, role: AgentRole, effective: EffectiveTools
    ) -> list[DynamicSource]:
        index = state.recorder.cursor.instructions  # scanned incrementally across the agent's runs

        def instructions(path: Sequence[Node]) -> list[SystemBlock]:
            blocks, _notes = instruction_blocks(path, index)
            return blocks

        sources: list[DynamicSource] = [instructions]
        if "internal.load_skill" in effective.names:
            skills = self._skills
            skills.refresh()

            def skill_catalog(_path: Sequence[Node]) -> list[SystemBlock]:
                block = skills.block()
                return [block] if block is not None else []

            sources.append(skill_catalog)
        return sources


async def close_services(opened: OpenRuntime) -> None:
    manager = opened.manager
    services = manager.services
    await manager.close()
    await services.close_adapters()
    with contextlib.suppress(Exception):
        await services.hooks.close()
    mcp = services.mcp
    if mcp is not None:
        with contextlib.suppress(Exception):
            await mcp.close()
    with contextlib.suppress(Exception):
        await services.tools.close()
    await services.storage.close()
