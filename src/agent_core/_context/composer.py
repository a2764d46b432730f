"""The prompt composer's budget and trimming (docs/compaction.md#the-conversation,
docs/compaction.md#budget-and-trimming; docs/context.md#static-blocks, docs/context.md#dynamic-blocks,
docs/context.md#messages).

:func:`compose` is pure: given the system blocks, the agent's active path (root → tip) and the limits, it
returns the system blocks and messages of the next request plus the report data. Secondary degradation that
needs I/O (artifactising large blocks, docs/compaction.md#the-conversation step 3.1) is done by the caller,
which passes the substitute blocks back in ``ComposeInput.substitutions`` and composes again.

Output reservation (issue 13): ``reserve_output_tokens`` is a cap. When the static part (system blocks and
tool schemas) leaves room for the full cap the build reserves it; otherwise it is budgeted with the floor
(``min_output_tokens``) and the output gets what the window leaves, at most the cap
(``TokenBudget.reserve_output_tokens`` is that effective figure).
Static blocks and tool descriptions degrade by priority only when they cannot fit next to the floor and the
current user message (``_budget.degrade_static``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_core._context._budget import (
    TRUNCATION_MARKER,
    StaticPlan,
    degrade_static,
    select_dynamic,
    truncate_to,
)
from agent_core._context.conversation import (
    ComposeMemo,
    Conversation,
    ConversationItem,
    block_key,
    build_conversation,
    flatten,
    protect,
)
from agent_core._context.prefix import PrefixState, Settled, board_block, commit, place, settle
from agent_core._context.render import RenderCache
from agent_core._context.tokens import DEFAULT_COUNTER, TokenCounter
from agent_core._context.trim import DegradableBlock, degradable_blocks, shrink_previews
from agent_core.types.content import (
    ContentBlock,
)
from agent_core.types.enums import NodeType
from agent_core.types.model import ModelMessage, SystemBlock
from agent_core.types.runtime import (
    ArtifactDegradation,
    Node,
    SyntheticBlockReport,
    SystemBlockReport,
    TokenBudget,
)
from agent_core.types.tools import ToolDefinition

_COMPACTION = NodeType.compaction.value
_ALWAYS_PROTECTED = frozenset({NodeType.skill_context.value, NodeType.memory_context.value})
__all__ = ["TRUNCATION_MARKER", "ComposeInput", "ComposeLimits", "Composition", "block_key", "compose"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ComposeLimits:
    context_window: int
    reserve_output_tokens: int
    """The cap of the output reservation."""
    dynamic_system_budget: int
    min_output_tokens: int = 512
    """The floor the reservation may shrink to (never above the cap)."""
    non_system_budget: int | None = None
    result_limit_bytes: int = 65536
    result_limit_tokens: int = 8000
    task_board_token_budget: int = 1200


@dataclass(kw_only=True, slots=True)
class ComposeInput:
    static_blocks: list[SystemBlock]
    dynamic_blocks: list[SystemBlock]
    path: Sequence[Node]
    limits: ComposeLimits
    current_run_id: str | None = None
    current_user_node_id: str | None = None
    task_board: str | None = None
    substitutions: dict[str, ContentBlock] = field(default_factory=dict)
    """Replacement blocks keyed by :func:`block_key` (secondary degradation done by the caller)."""
    tool_tokens: int = 0
    """Estimated tokens of the tool schemas sent with the request; counted as static."""
    tool_tokens_short: int | None = None
    """The same with one-line tool descriptions (``None``: the descriptions cannot be shortened)."""
    memo: ComposeMemo | None = None
    """The agent's composition memo: lets a build over a path that only grew reuse the previous one."""
    prefix: PrefixState | None = None
    """The agent's prefix state (the stable-prefix rule, ``prefix.py``); ``None``: a one-off build (the
    dynamic blocks in the system prompt, the task board as the last message)."""
    noted: Sequence[SystemBlock] = ()
    """An inheriting agent's own static blocks (``static_blocks`` are its parent's): noted when they
    differ from what the parent's requests carry (``prefix.settle``)."""


@dataclass(kw_only=True, slots=True)
class Composition:
    system: list[SystemBlock]
    messages: list[ModelMessage]
    fits: bool
    static_overflow: bool
    total_tokens: int
    budget: TokenBudget
    included_node_ids: list[str]
    excluded_node_ids: list[str]
    excluded_reasons: dict[str, str]
    compaction_node_id: str | None
    system_reports: list[SystemBlockReport]
    synthetic_reports: list[SyntheticBlockReport]
    degradations: list[ArtifactDegradation]
    unpaired_tool_call_ids: list[str]
    degradable: list[DegradableBlock]
    """Protected blocks large enough for step 3.1 (largest first); empty when the prompt fits."""
    covered_node_ids: list[str] = field(default_factory=list)
    task_board_text: str | None = None
    short_tool_descriptions: bool = False
    """The tool definitions must be sent with one-line descriptions (``_budget.short_tools``)."""
    min_prompt_tokens: int = 0
    """The smallest prompt this build could be degraded to (static at its deepest + the user message)."""
    prefix_restart: str | None = None
    """Why this build started a new prompt-prefix epoch (``prefix.py``), if it did."""
    tools: list[ToolDefinition] | None = None
    """The tool definitions to send instead of the run's own (a child sends its parent's)."""
    estimate_factor: float = 1.0
    """Real tokens per estimated token of the model (the budget figures are estimates)."""
    reasoning_dropped: dict[str, str] = field(default_factory=dict)
    """Included node id → why its reasoning blocks were left out (another provider or model made them)."""
    has_media: bool = False
    """The conversation may carry images or documents (the request then needs their bytes)."""

    def report_fields(self) -> dict[str, Any]:
        return {
            "estimate_factor": self.estimate_factor,
            "reasoning_dropped": self.reasoning_dropped,
            "token_budget": self.budget,
            "included_node_ids": self.included_node_ids,
            "excluded_node_ids": self.excluded_node_ids,
            "excluded_reasons": self.excluded_reasons,
            "compaction_node_id": self.compaction_node_id,
            "system_blocks": self.system_reports,
            "synthetic_blocks": self.synthetic_reports,
            "artifact_degradations": self.degradations,
            "unpaired_tool_call_ids": self.unpaired_tool_call_ids,
        }


def compose(inp: ComposeInput, cache: RenderCache, counter: TokenCounter = DEFAULT_COUNTER) -> Composition:
    lim = inp.limits
    window, cap = lim.context_window, lim.reserve_output_tokens
    floor = min(lim.min_output_tokens, cap)
    conversation = build_conversation(
        inp.path, cache, counter, substitutions=inp.substitutions, memo=inp.memo
    )
    user_tokens = _user_tokens(conversation.groups, inp.current_user_node_id)
    plan = degrade_static(
        inp.static_blocks,
        tool_tokens=inp.tool_tokens,
        tool_tokens_short=inp.tool_tokens if inp.tool_tokens_short is None else inp.tool_tokens_short,
        room=window - floor - user_tokens,
        counter=counter,
    )
    # The full cap whenever the static part leaves room for it (a long conversation then goes through
    # trimming, degradation and recovery compaction as before); the floor only when the system prompt and
    # tool schemas themselves crowd the window.
    reserve = cap if plan.tokens + cap <= window else floor
    return _finish(_budgeted(inp, cache, counter, conversation, plan, reserve), plan, user_tokens, cap)


def _leading_drop(items: Sequence[ConversationItem]) -> int:
    """How many leading items are not user messages (a prompt starts with a user message)."""
    drop = 0
    while drop < len(items) and items[drop].message.role != "user":
        drop += 1
    return drop


def _non_system(lim: ComposeLimits, room: int) -> int:
    non_system = max(0, room)
    if lim.non_system_budget is not None:
        non_system = min(non_system, lim.non_system_budget)
    return non_system


def _report_notes(reports: list[SystemBlockReport], settled: Settled) -> None:
    """Marks the dynamic blocks this build sends in a tail note (``reason = "tail_note"``)."""
    noted = {note.key for note in settled.new_notes}
    if not noted:
        return
    for index, report in enumerate(reports):
        if report.dynamic and report.block_id in noted:
            reports[index] = report.model_copy(update={"reason": "tail_note"})


def _user_tokens(groups: list[list[ConversationItem]], user_node_id: str | None) -> int:
    """Tokens of the current user message (searched from the end: it is among the latest nodes)."""
    if user_node_id is None:
        return 0
    for group in reversed(groups):
        for it in group:
            if it.node.node_id == user_node_id:
                return it.tokens
    return 0


def _finish(comp: Composition, plan: StaticPlan, user_tokens: int, cap: int) -> Composition:
    comp.short_tool_descriptions = plan.short_tool_descriptions
    comp.min_prompt_tokens = plan.min_tokens + user_tokens
    if comp.fits:
        reserve = min(cap, comp.budget.context_window - comp.total_tokens)
        comp.budget = comp.budget.model_copy(update={"reserve_output_tokens": reserve})
    return comp


def _budgeted(
    inp: ComposeInput,
    cache: RenderCache,
    counter: TokenCounter,
    conversation: Conversation,
    plan: StaticPlan,
    reserve: int,
) -> Composition:
    lim = inp.limits
    window = lim.context_window
    system_reports: list[SystemBlockReport] = list(plan.reports)
    static = plan.blocks
    static_tokens = plan.tokens
    static_overflow = static_tokens + reserve > window

    dyn_budget = max(0, min(lim.dynamic_system_budget, window - static_tokens - reserve))
    dynamic, _ = select_dynamic(inp.dynamic_blocks, dyn_budget, counter, system_reports)

    groups, excluded = conversation.groups, conversation.excluded

    board_text = inp.task_board
    board: SystemBlock | None = None
    if board_text:
        board_text = truncate_to(board_text, lim.task_board_token_budget, counter)
        board = board_block(board_text, counter)

    degradations: list[ArtifactDegradation] = []

    memo = inp.memo
    base = memo.flat if memo is not None and conversation.reused else None
    flat = flatten(groups, base, conversation.reused)

    # the stable-prefix rule (prefix.py): the epoch's system blocks, and tail notes for what changed since
    state = inp.prefix if inp.prefix is not None else PrefixState()
    epoch = conversation.compaction_id

    def settled_for(included: list[str], rebuild: bool) -> Settled:
        settled = settle(
            state,
            epoch=epoch,
            blocks=dynamic,
            board=board,
            included=included,
            counter=counter,
            rebuild=rebuild,
            noted=inp.noted,
        )
        if settled.system_tokens > dyn_budget and not rebuild:  # the window shrank: render them again
            settled = settle(
                state,
                epoch=epoch,
                blocks=dynamic,
                board=board,
                included=included,
                counter=counter,
                rebuild=True,
            )
        return settled

    settled = settled_for(flat.node_ids[_leading_drop(flat.items) :], bool(inp.substitutions))
    dyn_used = settled.system_tokens
    non_system = _non_system(lim, window - reserve - static_tokens - dyn_used)
    note_tokens = settled.note_tokens
    if memo is not None:
        if flat.tokens + note_tokens <= non_system and not inp.substitutions and groups:
            memo.remember(inp.path, conversation, flat, cache)
        else:
            memo.forget()
    if flat.tokens + note_tokens > non_system:
        if not settled.restart or settled.notes:  # the conversation is rebuilt: a new epoch
            settled = settled_for([], True)
            dyn_used = settled.system_tokens
            non_system = _non_system(lim, window - reserve - static_tokens - dyn_used)
            note_tokens = settled.note_tokens
        protect(groups, user_node_id=inp.current_user_node_id, run_id=inp.current_run_id)
        shrink_previews(groups, counter, degradations, protected=False)
        current = sum([it.tokens for g in groups for it in g]) + note_tokens
        while current > non_system:
            victim = next((g for g in groups if not any(it.protected for it in g)), None)
            if victim is None:
                break
            groups.remove(victim)
            for it in victim:
                excluded[it.node.node_id] = "budget"
                current -= it.tokens
        if current > non_system:
            shrink_previews(groups, counter, degradations, protected=True)
        flat = flatten(groups)

    items, messages, included = flat.items, flat.messages, flat.node_ids
    synthetic, tokens = flat.synthetic, flat.tokens
    drop = _leading_drop(items)
    for it in items[:drop]:
        excluded[it.node.node_id] = "budget"
        tokens -= it.tokens
    if drop:
        dropped = {it.node.node_id for it in items[:drop]}
        synthetic = [r for r in synthetic if r.source_node_id not in dropped]
    # fresh lists: the flat lists are kept by the memo and must never change
    items, messages, included = items[drop:], messages[drop:], included[drop:]
    synthetic = list(synthetic)
    messages = place(messages, included, settled.notes)
    commit(state, settled)
    _report_notes(system_reports, settled)
    non_system_tokens = tokens + note_tokens
    fits = not static_overflow and non_system_tokens <= non_system
    degradable: list[DegradableBlock] = []
    if not fits:
        degradable = degradable_blocks(
            items,
            non_system,
            counter,
            substitutions=inp.substitutions,
            limit_tokens=lim.result_limit_tokens,
            limit_bytes=lim.result_limit_bytes,
        )

    budget = TokenBudget(
        context_window=window,
        reserve_output_tokens=reserve,
        static_system_tokens=static_tokens,
        dynamic_system_budget=dyn_budget,
        dynamic_system_tokens=dyn_used,
        non_system_budget=non_system,
        non_system_tokens=non_system_tokens,
        total_tokens=static_tokens + dyn_used + non_system_tokens,
    )
    return Composition(
        system=static + settled.system,
        messages=messages,
        fits=fits,
        static_overflow=static_overflow,
        total_tokens=budget.total_tokens,
        budget=budget,
        included_node_ids=included,
        excluded_node_ids=list(excluded),
        excluded_reasons=excluded,
        compaction_node_id=conversation.compaction_id,
        system_reports=system_reports,
        synthetic_reports=synthetic,
        degradations=degradations,
        unpaired_tool_call_ids=conversation.unpaired,
        degradable=degradable,
        covered_node_ids=conversation.covered,
        task_board_text=board_text,
        prefix_restart=settled.cause,
    )
