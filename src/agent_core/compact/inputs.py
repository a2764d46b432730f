"""The compact fork's input message and the core-computed range facts (compact.md §7, §10.4).

The fork never replays the conversation as chat turns: its single user message carries the previous
summary, the nodes to summarise serialised as text lines, the split-turn prefix, the file operations and
artifacts of the range, and the exact ``first_kept_node_id`` / ``tokens_before``. When that message exceeds
the fork's budget, the oldest ``<conversation>`` entries are replaced by an omission marker; the previous
summary is always kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from agent_core.compact.policy import CutPlan
from agent_core.context.render import SYNTHETIC_TYPES, wrap_synthetic
from agent_core.context.tokens import DEFAULT_COUNTER, MESSAGE_OVERHEAD, TokenCounter, compact_json
from agent_core.providers.tool_mapping import render_tool_result
from agent_core.types.content import (
    ArtifactRefBlock,
    ContentBlock,
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


@dataclass(frozen=True, kw_only=True)
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


@dataclass(frozen=True, kw_only=True)
class CompactInput:
    text: str
    truncated: bool
    omitted_entries: int


def build_input(
    plan: CutPlan,
    facts: RangeFacts,
    *,
    tokens_before: int,
    budget_tokens: int,
    counter: TokenCounter = DEFAULT_COUNTER,
) -> CompactInput:
    """The fork's user message; oldest conversation entries are dropped to fit ``budget_tokens``."""
    previous = plan.previous_compaction
    conversation = [line for node in plan.conversation for line in node_lines(node)]
    prefix = [line for node in plan.split_prefix for line in node_lines(node)]

    def render(entries: Sequence[str], omitted: int) -> str:
        sections: list[str] = []
        if previous is not None:
            sections.append(_section("previous_summary", [text_of(previous.content)]))
        body = list(entries)
        if omitted:
            body.insert(0, f"[… {omitted} earlier items omitted …]")
        sections.append(_section("conversation", body))
        if plan.split_turn:
            sections.append(_section("split_turn_prefix", prefix))
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

    def size(text: str) -> int:
        return counter.text(text) + MESSAGE_OVERHEAD

    text = render(conversation, 0)
    if size(text) <= budget_tokens:
        return CompactInput(text=text, truncated=False, omitted_entries=0)
    # Drop the oldest entries: find the smallest number that fits (sizes shrink monotonically).
    low, high = 1, len(conversation)
    while low < high:
        mid = (low + high) // 2
        if size(render(conversation[mid:], mid)) <= budget_tokens:
            high = mid
        else:
            low = mid + 1
    omitted = low if conversation else 0
    return CompactInput(text=render(conversation[omitted:], omitted), truncated=True, omitted_entries=omitted)
