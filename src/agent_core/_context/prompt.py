"""Per-run prompt assembly: static blocks (built once per run), dynamic blocks and the composer call.

Static blocks follow ``STATIC_SYSTEM_BLOCKS`` (docs/context.md#static-blocks): the seven package prompts, then
the generated ``runtime.role`` and ``runtime.tool_catalog`` and the ``instruction_catalog``. Dynamic blocks
come from pluggable sources evaluated at every build (docs/context.md#dynamic-blocks).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from agent_core._asset_loader import STATIC_SYSTEM_BLOCKS, AssetLoader
from agent_core._context.composer import ComposeInput, ComposeLimits, Composition, compose
from agent_core._context.conversation import ComposeMemo
from agent_core._context.prefix import PrefixState
from agent_core._context.render import RenderCache
from agent_core._context.tokens import DEFAULT_COUNTER, TokenCounter
from agent_core._jsontext import compact_json
from agent_core._memo import WireMemo
from agent_core.permissions._modes import mode_prompt_text
from agent_core.tools._normalize import NO_ARTIFACTIZE
from agent_core.types.base import utc_now
from agent_core.types.content import ArtifactRefBlock, ContentBlock, JsonBlock, TextBlock
from agent_core.types.model import SystemBlock
from agent_core.types.permissions import PermissionMode
from agent_core.types.runtime import ArtifactDegradation, Node
from agent_core.types.tools import ToolDefinition

DynamicSource = Callable[[Sequence[Node]], Sequence[SystemBlock]]
"""Returns dynamic blocks for the current active path (evaluated at every build)."""
ArtifactMaker = Callable[[Any, str, str], Awaitable[ArtifactRefBlock]]
"""``(data, filename, summary) -> ArtifactRefBlock`` for prompt-view degradation artifacts."""


class PathView(Protocol):
    """What a prompt reads of an agent's position (:class:`~agent_core._loop.cursor.AgentCursor`)."""

    @property
    def path(self) -> Sequence[Node]:
        """The active path, root to tip."""
        ...

    @property
    def cache(self) -> RenderCache: ...

    @property
    def memo(self) -> ComposeMemo: ...

    @property
    def prefix(self) -> PrefixState: ...


def tool_catalog_text(tools: Sequence[ToolDefinition]) -> str:
    """Effective tool names grouped by namespace with one-line descriptions (no schemas)."""
    groups: dict[str, list[ToolDefinition]] = {}
    for tool in sorted(tools, key=lambda t: t.name):
        groups.setdefault(tool.name.split(".", 1)[0], []).append(tool)
    lines = ["<tool_catalog>"]
    if not tools:
        lines.append("No tools are available in this run; answer directly.")
    for namespace, members in groups.items():
        lines.append(f"[{namespace}]")
        for tool in members:
            first = tool.description.strip().splitlines()[0] if tool.description.strip() else ""
            lines.append(f"- {tool.name} ({tool.permission}): {first}")
    lines.append("</tool_catalog>")
    return "\n".join(lines)


def role_text(*, role: str, mode: str, agent_id: str, hints: Sequence[str] = ()) -> str:
    lines = ["<runtime_role>", f"agent_role: {role}", f"mode: {mode}", f"agent_id: {agent_id}"]
    lines.extend(f"provider_hint: {h}" for h in hints)
    lines.append("</runtime_role>")
    return "\n".join(lines)


_SCHEMA_TOKENS = WireMemo()
"""Tool definition → ``(counter, tokens)`` (definitions are immutable and shared by every run)."""


def tool_schema_tokens(tools: Sequence[ToolDefinition], counter: TokenCounter = DEFAULT_COUNTER) -> int:
    """Estimated prompt cost of the tool definitions a provider receives (name, description, schema)."""
    total = 0
    for t in tools:
        known: tuple[TokenCounter, int] | None = _SCHEMA_TOKENS.get(t)
        if known is None or known[0] is not counter:
            schema = {"name": t.name, "description": t.description, "parameters": t.input_schema}
            known = (counter, counter.text(compact_json(schema)))
            _SCHEMA_TOKENS.put(t, known)
        total += known[1]
    return total


def runtime_state_block(*, project: str, mode: str, role: str, session_id: str, agent_id: str) -> SystemBlock:
    """The ``runtime_state`` block: what stays true for the agent, and the UTC date. No run id: a value
    that changes per run would change the prompt prefix at every user turn (``prefix.py``)."""
    now = utc_now()
    body = "\n".join(
        [
            "<runtime_state>",
            f"project_dir: {project}",
            f"mode: {mode}",
            f"agent_role: {role}",
            f"session_id: {session_id}",
            f"agent_id: {agent_id}",
            f"current_date_utc: {now:%Y-%m-%d}",
            "</runtime_state>",
        ]
    )
    return SystemBlock(
        block_id="runtime_state", source="runtime_state", content=body, priority=140, dynamic=True
    )


def permission_mode_block(mode: PermissionMode) -> SystemBlock:
    """The run's permission mode and what it means (a small dynamic block after ``runtime_state``: a
    mode switched between runs changes only this block; see ``agent_core.permissions._modes``)."""
    return SystemBlock(
        block_id="permission_mode",
        source="permission_mode",
        content=mode_prompt_text(mode),
        priority=141,
        dynamic=True,
    )


def static_blocks(
    assets: AssetLoader,
    *,
    role: str,
    mode: str,
    agent_id: str,
    tools: Sequence[ToolDefinition],
    instruction_catalog: SystemBlock | None,
    counter: TokenCounter = DEFAULT_COUNTER,
) -> list[SystemBlock]:
    out: list[SystemBlock] = []
    for spec in STATIC_SYSTEM_BLOCKS:
        metadata: dict[str, Any] = {}
        if spec.asset_id is not None:
            asset = assets.load(spec.asset_id)
            content = asset.text
            metadata = dict(asset.template_metadata)
        elif spec.block_id == "runtime.role":
            content = role_text(role=role, mode=mode, agent_id=agent_id)
        elif spec.block_id == "runtime.tool_catalog":
            content = tool_catalog_text(tools)
        else:
            if instruction_catalog is None:
                continue
            content = instruction_catalog.content
            metadata = dict(instruction_catalog.metadata)
        out.append(
            SystemBlock(
                block_id=spec.block_id,
                source=spec.source,
                content=content,
                priority=spec.priority,
                dynamic=False,
                token_count=counter.text(content),
                metadata=metadata,
            )
        )
    return out


def scaled_limits(limits: ComposeLimits, factor: float) -> ComposeLimits:
    """``limits`` in estimated tokens for a model whose real token count is ``factor`` times the estimate
    (every token limit divided by it; tool-result and task-board limits stay as configured)."""
    if factor == 1.0:
        return limits

    def scale(value: int) -> int:
        return max(1, int(value / factor))

    return replace(
        limits,
        context_window=scale(limits.context_window),
        reserve_output_tokens=scale(limits.reserve_output_tokens),
        dynamic_system_budget=scale(limits.dynamic_system_budget),
        min_output_tokens=scale(limits.min_output_tokens),
        non_system_budget=None if limits.non_system_budget is None else scale(limits.non_system_budget),
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class InheritedPrefix:
    """The parent's last request a child's requests start with: its tool definitions and system blocks
    (a fork's inherited conversation and tail notes come with its prefix state, ``prefix.py``)."""

    tools: list[ToolDefinition]
    system: list[SystemBlock]
    tool_tokens: int


@dataclass(kw_only=True, eq=False, slots=True)
class RunPrompt:
    """The :class:`~agent_core._loop.driver.PromptSource` of one run."""

    cursor: PathView
    static: list[SystemBlock]
    limits: ComposeLimits
    dynamic_sources: list[DynamicSource] = field(default_factory=list)
    task_board: Callable[[], str | None] | None = None
    current_run_id: str | None = None
    current_user_node_id: str | None = None
    make_artifact: ArtifactMaker | None = None
    counter: TokenCounter = DEFAULT_COUNTER
    tool_tokens: int = 0
    tool_tokens_short: int | None = None
    inherited: InheritedPrefix | None = None
    """A child's parent's last request: its requests start with it while ``cursor.prefix.inherited``."""
    model: tuple[str, str] | None = None
    """``(provider, model)`` the prompt is for: reasoning blocks of other models are left out."""
    estimate_factor: Callable[[], float] | None = None
    """The model's learned correction of the token estimate (real tokens per estimated token): the limits
    are divided by it, so the estimate is compared with the window the model really has."""
    _degraded: dict[str, ArtifactDegradation] = field(default_factory=dict)

    def compose(self, *, turn: int, substitutions: dict[str, ContentBlock]) -> Composition:
        cache = self.cursor.cache
        if self.model is not None and cache.use_model(self.model):
            self.cursor.memo.forget()
        factor = self.estimate_factor() if self.estimate_factor is not None else 1.0
        result = self._compose(substitutions, scaled_limits(self.limits, factor))
        result.estimate_factor = factor
        result.has_media = bool(cache.media)
        if cache.reasoning_dropped:
            included = set(result.included_node_ids)
            result.reasoning_dropped = {k: v for k, v in cache.reasoning_dropped.items() if k in included}
        return result

    def _compose(self, substitutions: dict[str, ContentBlock], limits: ComposeLimits) -> Composition:
        path = self.cursor.path
        dynamic: list[SystemBlock] = []
        for source in self.dynamic_sources:
            dynamic.extend(source(path))
        board = self.task_board() if self.task_board is not None else None
        inp = ComposeInput(
            static_blocks=self.static,
            dynamic_blocks=dynamic,
            path=path,
            limits=limits,
            current_run_id=self.current_run_id,
            current_user_node_id=self.current_user_node_id,
            task_board=board,
            substitutions=substitutions,
            tool_tokens=self.tool_tokens,
            tool_tokens_short=self.tool_tokens_short,
            memo=self.cursor.memo,
            prefix=self.cursor.prefix,
        )
        inherited = self.inherited if self.cursor.prefix.inherited else None
        if inherited is not None:
            shared = replace(
                inp,
                static_blocks=inherited.system,
                noted=self.static,
                tool_tokens=inherited.tool_tokens,
                tool_tokens_short=None,
            )
            result = compose(shared, self.cursor.cache, self.counter)
            if result.prefix_restart is None and not result.short_tool_descriptions:
                result.tools = list(inherited.tools)
                result.degradations.extend(self._degraded[k] for k in substitutions if k in self._degraded)
                return result
            # the context was rebuilt, or the parent's prompt does not fit: the agent's own prompt from here
            self.cursor.prefix.inherited = False
        result = compose(inp, self.cursor.cache, self.counter)
        result.degradations.extend(self._degraded[k] for k in substitutions if k in self._degraded)
        return result

    async def degrade(self, composition: Composition) -> dict[str, ContentBlock]:
        """Artifactises the degradable blocks (largest first) until the estimate would fit."""
        if self.make_artifact is None or not composition.degradable:
            return {}
        over = composition.budget.non_system_tokens - composition.budget.non_system_budget
        subs: dict[str, ContentBlock] = {}
        for item in composition.degradable:
            if over <= 0:
                break
            block = item.block
            if isinstance(block, TextBlock):
                data: Any = block.text
                filename = "output.txt"
                preview = block.text[:200]
            elif isinstance(block, JsonBlock):
                data = block.data
                filename = "data.json"
                preview = compact_json(block.data)[:200]
            else:
                continue
            if item.tool_name in NO_ARTIFACTIZE:
                # the file is the durable copy (docs/tools.md#output-limits): shorten the view, create no
                # artifact
                note = (
                    f"[{item.tool_name} output shortened for this prompt ({item.tokens} tokens); re-read the "
                    f"file with start_line/max_lines for the rest] {preview}..."
                )
                subs[item.key] = TextBlock(text=note)
                over -= item.tokens - self.counter.text(note) - 8
                continue
            summary = f"{preview}... (full content in artifact; {item.tokens} tokens)"
            ref = await self.make_artifact(data, filename, summary)
            subs[item.key] = TextBlock(text=f"[artifact {ref.artifact_id}: {summary}]")
            self._degraded[item.key] = ArtifactDegradation(
                node_id=item.node_id, artifact_id=ref.artifact_id, action="artifact_ref"
            )
            over -= item.tokens - self.counter.text(summary) - 8
        return subs
