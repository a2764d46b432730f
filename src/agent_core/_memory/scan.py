"""The scan range of a Memory Extraction Job and the text it shows the model (docs/context.md#extraction).

- The scan cursor lives in ``sessions.metadata_json.memory_scan_cursor = {node_seq, node_id}`` (the last
  scanned node). :func:`load_scan` takes a snapshot of the session's root-agent nodes after it.
- Candidates are the new root-agent user messages (``role=user``, ``node_type=message``). Context around
  each: the root-agent assistant message with text immediately before it and the first one after it;
  tool results in between appear only as one-line summaries (tool name, ok/error, artifact ids), never
  their content. Synthetic nodes (plan/task instructions, skills, memories, child results, notes) are
  never shown; the latest compaction summary is shown separately. Partial/failed assistant nodes are
  skipped. An ``<active_path_summary>`` holds the last few already-scanned messages, shortened.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agent_core._context.conversation import is_skipped_assistant
from agent_core._memory.files import MemoryRecord
from agent_core._notes import escape_note_text
from agent_core._storage.protocol import SessionStore
from agent_core.types.content import ArtifactRefBlock, JsonBlock, ToolResultBlock, text_of
from agent_core.types.enums import NodeType
from agent_core.types.runtime import Node

CURSOR_KEY = "memory_scan_cursor"
CANDIDATE_CHARS = 4000
CONTEXT_CHARS = 1500
SUMMARY_CHARS = 300
SUMMARY_MESSAGES = 6
COMPACTION_CHARS = 6000


@dataclass(frozen=True, kw_only=True, slots=True)
class ScanCursor:
    node_seq: int
    node_id: str

    def as_dict(self) -> dict[str, Any]:
        return {"node_seq": self.node_seq, "node_id": self.node_id}


@dataclass(frozen=True, kw_only=True, slots=True)
class ScanInput:
    """A snapshot of one session's root-agent context relative to the scan cursor."""

    session_id: str
    root_agent_id: str
    cursor: ScanCursor | None
    root_nodes: list[Node]
    """Every root-agent node, by ``node_seq``."""
    new_nodes: list[Node]
    """Root-agent nodes after the cursor."""

    @property
    def candidates(self) -> list[Node]:
        return [n for n in self.new_nodes if is_user_message(n)]

    @property
    def next_cursor(self) -> ScanCursor | None:
        if not self.new_nodes:
            return self.cursor
        last = self.new_nodes[-1]
        return ScanCursor(node_seq=last.node_seq, node_id=last.node_id)

    @property
    def source_range(self) -> dict[str, int | None]:
        if not self.new_nodes:
            return {"from_node_seq": None, "to_node_seq": None}
        return {"from_node_seq": self.new_nodes[0].node_seq, "to_node_seq": self.new_nodes[-1].node_seq}


def is_user_message(node: Node) -> bool:
    return node.role == "user" and node.node_type == NodeType.message.value


def is_assistant_message(node: Node) -> bool:
    return (
        node.role == "assistant"
        and node.node_type == NodeType.message.value
        and is_skipped_assistant(node) is None
        and bool(text_of(node.content).strip())
    )


def parse_cursor(metadata_json: str | None) -> ScanCursor | None:
    """The cursor stored in ``sessions.metadata_json`` (``None`` when absent or malformed)."""
    if not metadata_json:
        return None
    try:
        data = json.loads(metadata_json)
    except ValueError:
        return None
    raw = data.get(CURSOR_KEY) if isinstance(data, dict) else None
    if not isinstance(raw, dict):
        return None
    seq, node_id = raw.get("node_seq"), raw.get("node_id")
    if not isinstance(seq, int) or isinstance(seq, bool) or not isinstance(node_id, str):
        return None
    return ScanCursor(node_seq=seq, node_id=node_id)


async def load_scan(storage: SessionStore, session_id: str) -> ScanInput | None:
    """The current scan snapshot of ``session_id`` (``None`` if the session does not exist)."""
    record = await storage.get_session(session_id)
    if record is None:
        return None
    cursor = parse_cursor(record.metadata_json)
    nodes = await storage.list_nodes(session_id, agent_id=record.root_agent_id)
    after = cursor.node_seq if cursor is not None else 0
    return ScanInput(
        session_id=session_id,
        root_agent_id=record.root_agent_id,
        cursor=cursor,
        root_nodes=nodes,
        new_nodes=[n for n in nodes if n.node_seq > after],
    )


def _clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + " …[truncated]"


def _tool_summary(node: Node) -> str:
    tool = node.metadata.get("tool_name") or "tool"
    status = "ok"
    artifacts: list[str] = []
    for block in node.content:
        if isinstance(block, ToolResultBlock):
            status = "error" if block.is_error else "ok"
            for inner in block.content:
                if isinstance(inner, ArtifactRefBlock) or (
                    isinstance(inner, JsonBlock) and inner.artifact_id
                ):
                    artifacts.append(str(inner.artifact_id))
    suffix = f", artifacts: {', '.join(artifacts)}" if artifacts else ""
    return f"[tool result node_id={node.node_id} tool={tool}: {status}{suffix}; content omitted]"


def _label(node: Node, extra: str = "") -> str:
    return f"[node_id={node.node_id} role={node.role}{extra}]"


def conversation_text(scan: ScanInput) -> str:
    """The ``<conversation>`` body: candidates with their surrounding assistant context."""
    nodes = scan.root_nodes
    index_of = {n.node_id: i for i, n in enumerate(nodes)}
    chosen: dict[int, str] = {}
    for node in scan.candidates:
        i = index_of[node.node_id]
        chosen[i] = f"{_label(node, ' candidate=new')}\n{_clip(text_of(node.content), CANDIDATE_CHARS)}"
        for j in range(i - 1, -1, -1):
            if is_user_message(nodes[j]):
                break
            if is_assistant_message(nodes[j]):
                chosen.setdefault(j, _context_entry(nodes[j]))
                break
        for j in range(i + 1, len(nodes)):
            other = nodes[j]
            if is_user_message(other):
                break
            if other.role == "tool":
                chosen.setdefault(j, _tool_summary(other))
            elif is_assistant_message(other):
                chosen.setdefault(j, _context_entry(other))
                break
    return "\n\n".join(chosen[i] for i in sorted(chosen))


def _context_entry(node: Node) -> str:
    return f"{_label(node, ' context=true')}\n{_clip(text_of(node.content), CONTEXT_CHARS)}"


def active_path_summary(scan: ScanInput) -> str:
    """The last few already-scanned root messages, shortened (interpretation only)."""
    after = scan.cursor.node_seq if scan.cursor is not None else 0
    older = [
        n for n in scan.root_nodes if n.node_seq <= after and (is_user_message(n) or is_assistant_message(n))
    ]
    lines = [
        f"{_label(n)} {_clip(text_of(n.content), SUMMARY_CHARS)}".replace("\n", " ")
        for n in older[-SUMMARY_MESSAGES:]
    ]
    return "\n".join(lines) if lines else "(no earlier messages)"


def compaction_summary(scan: ScanInput) -> str | None:
    """Text of the latest compaction node of the root agent, if any."""
    for node in reversed(scan.root_nodes):
        if node.node_type == NodeType.compaction.value:
            text = text_of(node.content).strip()
            return _clip(text, COMPACTION_CHARS) if text else None
    return None


def frontmatter_lines(records: list[MemoryRecord]) -> str:
    """One JSON object per memory: its frontmatter (never the body)."""
    if not records:
        return "(no memories yet)"
    return "\n".join(
        json.dumps(r.front.dump() | {"file": r.relpath}, ensure_ascii=False, sort_keys=False) for r in records
    )


def job_prompt(
    scan: ScanInput, *, categories: list[str], catalog: str | None, records: list[MemoryRecord]
) -> str:
    """The job's user message with the tagged sections the ``memory.extraction`` prompt expects."""
    parts = [
        f"<allowed_categories>{', '.join(categories)}</allowed_categories>",
        f"<memory_catalog>\n{escape_note_text((catalog or '(empty)').strip())}\n</memory_catalog>",
        f"<existing_memories>\n{escape_note_text(frontmatter_lines(records))}\n</existing_memories>",
        f"<conversation>\n{escape_note_text(conversation_text(scan))}\n</conversation>",
        f"<active_path_summary>\n{escape_note_text(active_path_summary(scan))}\n</active_path_summary>",
    ]
    summary = compaction_summary(scan)
    if summary:
        parts.append(f"<compaction_summary>\n{escape_note_text(summary)}\n</compaction_summary>")
    return "\n\n".join(parts)
