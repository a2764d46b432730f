"""The compact fork's input message and the core-computed range facts (docs/compaction.md#the-compact-fork).

The fork never replays the conversation as chat turns: its single user message carries the previous
summary, the nodes to summarise serialised as text lines, the split-turn prefix, the file operations and
artifacts of the range, and the exact ``first_kept_node_id`` / ``tokens_before``. When that message exceeds
the fork's budget, the oldest ``<conversation>`` entries are replaced by an omission marker; the previous
summary is always kept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from agent_core._compact.policy import CutPlan
from agent_core._context.render import SYNTHETIC_TYPES, wrap_synthetic
from agent_core._context.tokens import DEFAULT_COUNTER, MESSAGE_OVERHEAD, TokenCounter
from agent_core._jsontext import compact_json
from agent_core.providers._tool_mapping import render_tool_result
from agent_core.types.content import (
    ArtifactRefBlock,
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    JsonBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    text_of,
)
from agent_core.types.runtime import Node

TOOL_RESULT_CHARS = 2000
READ_TOOLS = frozenset({"code.read_file"})
WRITE_TOOLS = frozenset({"code.write_file", "code.edit_file"})
INSTRUCTION = (
    "Write the compaction summary for the conversation above. Answer with exactly one JSON object "
    '{"summary": str, "first_kept_node_id": str, "tokens_before": int, "details": object} and nothing '
    "else. Copy first_kept_node_id and tokens_before exactly from the values given. The summary uses the "
    "sections ## Goal, ## Constraints & Preferences, ## Progress (### Done, ### In Progress, ### Blocked), "
    "## Key Decisions, ## Next Steps, ## Critical Context, ## Files & Artifacts, ## Tool & Runtime Notes"
)


@dataclass(frozen=True, kw_only=True, slots=True)
class RangeFacts:
    """File operations and artifacts of the summarised range (merged file lists, range-only artifacts)."""

    files_read: list[str] = field(default_factory=list)
    files_modified: list[str] = field(default_factory=list)
    artifacts: dict[str, str] = field(default_factory=dict)
    """``artifact_id -> summary`` for every artifact referenced in the range."""

    @property
    def artifact_ids(self) -> list[str]:
        return list(self.artifacts)


def _unique(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(v for v in values if v))


def _previous_list(previous: Node | None, key: str) -> list[str]:
    if previous is None:
        return []
    details = previous.metadata.get("details")
    values = details.get(key) if isinstance(details, dict) else None
    return [str(v) for v in values] if isinstance(values, list) else []


def _artifacts_in(blocks: Sequence[ContentBlock], out: dict[str, str]) -> None:
    for block in blocks:
        if isinstance(block, ArtifactRefBlock | JsonBlock) and block.artifact_id:
            out.setdefault(block.artifact_id, block.summary or "")
        elif isinstance(block, ToolResultBlock):
            _artifacts_in(block.content, out)


def range_facts(nodes: Sequence[Node], previous: Node | None) -> RangeFacts:
    """Paths of successful ``code.read_file`` / ``code.write_file`` / ``code.edit_file`` calls in ``nodes``
    (merged after the previous compaction's lists) and the artifacts the range references."""
    calls: dict[str, ToolCallBlock] = {}
    read: list[str] = []
    modified: list[str] = []
    artifacts: dict[str, str] = {}
    for node in nodes:
        _artifacts_in(node.content, artifacts)
        for block in node.content:
            if isinstance(block, ToolCallBlock):
                calls[block.tool_call_id] = block
            elif isinstance(block, ToolResultBlock) and not block.is_error:
                call = calls.get(block.tool_call_id)
                path = call.arguments.get("path") if call is not None else None
                if call is None or not isinstance(path, str):
                    continue
                if call.name in READ_TOOLS:
                    read.append(path)
                elif call.name in WRITE_TOOLS:
                    modified.append(path)
    return RangeFacts(
        files_read=_unique([*_previous_list(previous, "files_read"), *read]),
        files_modified=_unique([*_previous_list(previous, "files_modified"), *modified]),
        artifacts=artifacts,
    )


def _clip(text: str, limit: int = TOOL_RESULT_CHARS) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}[… {len(text) - limit} more characters truncated …]"


def _user_text(blocks: Sequence[ContentBlock]) -> str:
    parts: list[str] = []
    for block in blocks:
        if isinstance(block, TextBlock):
            parts.append(block.text)
        elif isinstance(block, JsonBlock):
            if block.artifact_id:
                parts.append(f"[artifact {block.artifact_id}: {block.summary or ''}]")
            else:
                parts.append(_clip(compact_json(block.data)))
        elif isinstance(block, ArtifactRefBlock):
            parts.append(f"[artifact {block.artifact_id}: {block.summary or ''}]")
        elif isinstance(block, ImageBlock | DocumentBlock):
            kind = "image" if isinstance(block, ImageBlock) else "document"
            parts.append(f"[{kind} {block.artifact_id} ({block.mime_type})]")
    return "\n".join(p for p in parts if p)


def node_lines(node: Node) -> list[str]:
    """One node as ``<conversation>`` text lines (labelled with node id and role)."""
    label = f"[{node.node_id}]"
    if node.node_type in SYNTHETIC_TYPES:
        return [f"{label} context: {wrap_synthetic(node)}"]
    if node.role == "tool":
        lines = []
        for block in node.content:
            if isinstance(block, ToolResultBlock):
                name = node.metadata.get("tool_name") or "tool"
                body = _clip(render_tool_result(block, provider_has_error_flag=False))
                lines.append(f"{label} tool result {name} (call {block.tool_call_id}): {body}")
        return lines
    if node.role == "assistant":
        lines = []
        text = text_of(node.content)
        if text:
            lines.append(f"{label} assistant: {text}")
        for block in node.content:
            if isinstance(block, ToolCallBlock):
                lines.append(
                    f"{label} assistant tool_call {block.name} {compact_json(block.arguments)} "
                    f"(call {block.tool_call_id})"
                )
        return lines
    text = _user_text(node.content)
    return [f"{label} {node.role}: {text}"] if text else []


def _section(tag: str, lines: Sequence[str]) -> str:
    return f"<{tag}>\n" + "\n".join(lines) + f"\n</{tag}>"


@dataclass(frozen=True, kw_only=True, slots=True)
class CompactInput:
    text: str
    truncated: bool
    omitted_entries: int
    fits: bool = True
    """False when even the shortest form exceeds the budget (the compaction then fails)."""


def _smallest_drop(count: int, fits: Callable[[int], bool]) -> int | None:
    """The smallest ``k`` in ``0..count`` with ``fits(k)`` (``fits`` is monotone), else ``None``."""
    if not fits(count):
        return None
    low, high = 0, count
    while low < high:
        mid = (low + high) // 2
        if fits(mid):
            high = mid
        else:
            low = mid + 1
    return low


def build_input(
    plan: CutPlan,
    facts: RangeFacts,
    *,
    tokens_before: int,
    budget_tokens: int,
    counter: TokenCounter = DEFAULT_COUNTER,
) -> CompactInput:
    """The fork's user message, shortened to ``budget_tokens``: first the oldest ``<conversation>``
    entries are dropped; if that is not enough, the oldest split-turn prefix entries after the turn's first
    entry (the user message) are dropped too. The previous summary is always kept."""
    previous = plan.previous_compaction
    conversation = [line for node in plan.conversation for line in node_lines(node)]
    prefix = [line for node in plan.split_prefix for line in node_lines(node)]

    def omitted_marker(count: int) -> list[str]:
        return [f"[… {count} earlier items omitted …]"] if count else []

    def render(conv_drop: int, prefix_drop: int) -> str:
        sections: list[str] = []
        if previous is not None:
            sections.append(_section("previous_summary", [text_of(previous.content)]))
        sections.append(_section("conversation", omitted_marker(conv_drop) + conversation[conv_drop:]))
        if plan.split_turn:
            body = prefix[:1] + omitted_marker(prefix_drop) + prefix[1 + prefix_drop :]
            sections.append(_section("split_turn_prefix", body))
        sections.append(
            _section(
                "file_operations",
                [
                    f"read: {', '.join(facts.files_read) or '(none)'}",
                    f"modified: {', '.join(facts.files_modified) or '(none)'}",
                ],
            )
        )
        sections.append(
            _section("artifacts", [f"{k}: {v}" for k, v in facts.artifacts.items()] or ["(none)"])
        )
        sections.append(f"<first_kept_node_id>{plan.first_kept_node_id}</first_kept_node_id>")
        sections.append(f"<tokens_before>{tokens_before}</tokens_before>")
        sections.append(
            INSTRUCTION + (", plus a final ## Split Turn Prefix section." if plan.split_turn else ".")
        )
        return "\n\n".join(sections)

    def fits(text: str) -> bool:
        return counter.text(text) + MESSAGE_OVERHEAD <= budget_tokens

    conv_drop = _smallest_drop(len(conversation), lambda k: fits(render(k, 0)))
    if conv_drop is not None:
        return CompactInput(text=render(conv_drop, 0), truncated=conv_drop > 0, omitted_entries=conv_drop)
    droppable = max(0, len(prefix) - 1)
    prefix_drop = _smallest_drop(droppable, lambda k: fits(render(len(conversation), k)))
    omitted = len(conversation) + (prefix_drop if prefix_drop is not None else droppable)
    text = render(len(conversation), prefix_drop if prefix_drop is not None else droppable)
    return CompactInput(text=text, truncated=True, omitted_entries=omitted, fits=prefix_drop is not None)
