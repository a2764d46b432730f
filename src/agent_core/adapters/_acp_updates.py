"""A run's events as ACP ``session/update`` notifications (the ``acp`` extra). No I/O.

:class:`TurnUpdates` follows the event stream of one prompt's run (``events(debug=True,
include_children=True)``) and returns the updates to send for each event:

- the root run's ``message_delta`` → ``agent_message_chunk`` (a ``message_completed`` text the deltas did
  not carry is sent as a last chunk); ``reasoning_delta`` → ``agent_thought_chunk``;
- every run's tool calls (sub-agents' and workers' too): ``tool_call`` (``pending``) as soon as the model
  starts streaming the call (``tool_call_delta``), updated with its title, kind, locations and arguments
  when the call is complete; ``in_progress`` at ``tool_started``; ``completed`` / ``failed`` at
  ``tool_completed`` / ``tool_failed`` / ``tool_denied``. A write of the built-in file tools adds a
  ``diff`` content (path, old and new text; :meth:`TurnUpdates.file_written`), kept on the final update;
- ``task_*`` events → ``plan`` (every step of the session's Task board; :mod:`._task_plan`);
- the root run's ``model_progress`` (``done``, when the context window is known) → ``usage_update``
  (``used``: the prompt and answer tokens of the last model call; ``size``: the context window).

:func:`history_updates` renders a stored conversation (the active path's nodes) for ``session/load``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp import (
    plan_entry,
    start_tool_call,
    text_block,
    tool_content,
    tool_diff_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_plan,
    update_tool_call,
    update_user_message_text,
)
from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    ContentToolCallContent,
    FileEditToolCallContent,
    ToolCallLocation,
    ToolCallProgress,
    ToolCallStart,
    ToolCallStatus,
    UsageUpdate,
    UserMessageChunk,
)

from agent_core.adapters._task_plan import PlanBoard
from agent_core.adapters._tool_display import CallDisplay, describe_call, parse_arguments
from agent_core.types import events as ev
from agent_core.types.content import JsonBlock, TextBlock, ToolCallBlock, ToolResultBlock

if TYPE_CHECKING:
    from agent_core.tools.files import FileWrite
    from agent_core.types.runtime import Node, RuntimeEvent

Update = (
    AgentMessageChunk
    | AgentThoughtChunk
    | UserMessageChunk
    | ToolCallStart
    | ToolCallProgress
    | AgentPlanUpdate
    | UsageUpdate
)
ToolContent = ContentToolCallContent | FileEditToolCallContent
RESULT_TEXT_LIMIT = 2000


@dataclass(slots=True)
class _Call:
    name: str
    arguments: str = ""
    announced: bool = False
    diffs: list[FileEditToolCallContent] = field(default_factory=list)


def _locations(display: CallDisplay) -> list[ToolCallLocation]:
    return [ToolCallLocation(path=loc.path, line=loc.line) for loc in display.locations]


def _text(text: str) -> ContentToolCallContent:
    return tool_content(text_block(text))


def error_text(error: Any) -> str:
    """``code: message`` of an event's error object (or its message alone)."""
    if not isinstance(error, dict):
        return str(error or "")
    code, message = error.get("code"), " ".join(str(error.get("message") or "").split())
    return f"{code}: {message}" if code else message


def diff_texts(unified: str) -> tuple[str | None, str]:
    """Old and new text of the hunks of a unified diff (``None`` old text for a created file); hunks are
    separated by a ``…`` line on both sides. For a permission request's change preview."""
    old: list[str] = []
    new: list[str] = []
    created = False
    for line in unified.splitlines():
        if line.startswith("--- "):
            created = line[4:].strip() == "/dev/null"
        elif line.startswith("+++ ") or line.startswith("\\"):
            continue
        elif line.startswith("@@"):
            if old or new:
                old.append("…")
                new.append("…")
        elif line.startswith("-"):
            old.append(line[1:])
        elif line.startswith("+"):
            new.append(line[1:])
        elif line.startswith(" ") or line == "":
            old.append(line[1:])
            new.append(line[1:])
    return (None if created else "\n".join(old)), "\n".join(new)


class TurnUpdates:
    """The updates of one prompt turn (see the module docstring)."""

    def __init__(self, root_run_id: str, project: Path, board: PlanBoard) -> None:
        self.root_run_id = root_run_id
        self.project = project
        self.board = board
        self._calls: dict[str, _Call] = {}
        self._index: dict[tuple[str | None, int], str] = {}
        self._streamed = ""
        self._window: int | None = None
        self.error: str | None = None

    def call_display(self, tool_call_id: str, tool_name: str, summary: str = "") -> CallDisplay:
        """Title, kind and locations of a call of this turn (its streamed arguments when known)."""
        call = self._calls.get(tool_call_id)
        arguments = parse_arguments(call.arguments) if call is not None else None
        return describe_call(tool_name, arguments, self.project, summary)

    def _start(self, call_id: str, call: _Call, status: ToolCallStatus, summary: str = "") -> ToolCallStart:
        call.announced = True
        display = self.call_display(call_id, call.name, summary)
        arguments = parse_arguments(call.arguments)
        return start_tool_call(
            call_id,
            display.title,
            kind=display.kind,
            status=status,
            locations=_locations(display),
            raw_input=arguments if arguments else None,
        )

    def updates(self, event: RuntimeEvent) -> list[Update]:
        """The updates ``event`` leads to (often none)."""
        p = event.payload
        root = event.run_id == self.root_run_id
        match p:
            case ev.MessageDelta(text=text) if root:
                self._streamed += text
                return [update_agent_message_text(text)] if text else []
            case ev.MessageCompleted(role=role, text=full) if root:
                streamed, self._streamed = self._streamed, ""
                if role == "assistant" and full.startswith(streamed) and full != streamed:
                    return [update_agent_message_text(full[len(streamed) :])]
                return []
            case ev.ReasoningDelta(text=text) if root:
                return [update_agent_thought_text(text)] if text else []
            case ev.ToolCallDelta():
                return self._delta(event.run_id, p)
            case ev.ToolStarted() | ev.ToolCompleted() | ev.ToolFailed() | ev.ToolDenied() if (
                event.tool_call_id
            ):
                return self._tool(event.tool_call_id, p)
            case ev.TaskWalMirror():
                if not self.board.apply(p.event_type.value, p.fields):
                    return []
                entries = [plan_entry(content, status=status) for content, status in self.board.entries()]
                return [update_plan(entries)]
            case ev.ModelProgress() if root:
                return self._usage(p)
            case ev.Error(error=error) if root:
                self.error = error_text(error)
            case ev.LoopFailed(error=error, end_reason=end) if root:
                self.error = error_text(error) or self.error or str(end or "failed")
        return []

    def _usage(self, p: ev.ModelProgress) -> list[Update]:
        if isinstance(p.context_window, int):  # sent with the "waiting" phase
            self._window = p.context_window
        prompt, output = p.prompt_tokens, p.output_tokens
        if p.phase == "done" and self._window and isinstance(prompt, int):
            used = prompt + (output if isinstance(output, int) else 0)
            return [
                UsageUpdate(session_update="usage_update", used=min(used, self._window), size=self._window)
            ]
        return []

    def _delta(self, run_id: str | None, p: ev.ToolCallDelta) -> list[Update]:
        key = (run_id, p.index if isinstance(p.index, int) else -1)
        call_id = p.tool_call_id or self._index.get(key)
        if not isinstance(call_id, str):
            return []
        if p.phase == "start":
            self._index[key] = call_id
        call = self._calls.setdefault(call_id, _Call(str(p.name or "tool")))
        if p.name:
            call.name = str(p.name)
        if isinstance(p.arguments_delta, str):
            call.arguments += p.arguments_delta
        if p.phase == "start" and not call.announced:
            return [self._start(call_id, call, "pending")]
        if p.phase == "end":
            if not call.announced:
                return [self._start(call_id, call, "pending")]
            display = self.call_display(call_id, call.name)
            arguments = parse_arguments(call.arguments)
            return [
                update_tool_call(
                    call_id,
                    title=display.title,
                    kind=display.kind,
                    locations=_locations(display),
                    raw_input=arguments if arguments else None,
                )
            ]
        return []

    def _tool(
        self, call_id: str, p: ev.ToolStarted | ev.ToolCompleted | ev.ToolFailed | ev.ToolDenied
    ) -> list[Update]:
        call = self._calls.setdefault(call_id, _Call(str(p.tool_name or "tool")))
        out: list[Update] = []
        if not call.announced:
            summary = p.args_summary if isinstance(p, ev.ToolStarted) else ""
            out.append(self._start(call_id, call, "pending", str(summary or "")))
        if isinstance(p, ev.ToolStarted):
            out.append(update_tool_call(call_id, status="in_progress"))
            return out
        content: list[ToolContent] = list(call.diffs)
        match p:
            case ev.ToolCompleted(summary=summary):
                if summary and not content:
                    content.append(_text(str(summary)[:RESULT_TEXT_LIMIT]))
                out.append(update_tool_call(call_id, status="completed", content=content or None))
            case ev.ToolFailed(error=error, reason=reason):
                why = error_text(error) or (reason if isinstance(reason, str) and reason else "failed")
                out.append(update_tool_call(call_id, status="failed", content=[*content, _text(why)]))
            case ev.ToolDenied(denied_by=by, reason=reason):
                why = f"Denied by {by or 'policy'}: {reason or 'not allowed'}"
                out.append(update_tool_call(call_id, status="failed", content=[*content, _text(why)]))
        return out

    def file_written(self, write: FileWrite) -> list[Update]:
        """The ``diff`` of a built-in file tool's write, on its tool call."""
        call = self._calls.setdefault(write.tool_call_id, _Call(write.tool_name))
        diff = tool_diff_content(str(write.path), write.text, write.previous_text)
        call.diffs.append(diff)
        out: list[Update] = []
        if not call.announced:
            out.append(self._start(write.tool_call_id, call, "in_progress"))
        out.append(update_tool_call(write.tool_call_id, content=list(call.diffs)))
        return out


def _visible_message(node: Node) -> bool:
    meta = node.metadata
    cancelled = bool(meta.get("partial") and meta.get("aborted"))
    return not (meta.get("failed") or ((meta.get("partial") or meta.get("aborted")) and not cancelled))


def history_updates(path: Sequence[Node], project: Path) -> list[Update]:
    """The conversation on an active path as it was shown: user and assistant text, tool calls with their
    final status (for ``session/load``)."""
    out: list[Update] = []
    for node in path:
        if node.node_type == "message" and node.role == "user" and _visible_message(node):
            text = "".join(b.text for b in node.content if isinstance(b, TextBlock))
            if text and not node.metadata.get("synthetic"):
                out.append(update_user_message_text(text))
        elif node.node_type == "message" and node.role == "assistant" and _visible_message(node):
            for block in node.content:
                if isinstance(block, TextBlock) and block.text:
                    out.append(update_agent_message_text(block.text))
                elif isinstance(block, ToolCallBlock):
                    display = describe_call(block.name, block.arguments, project)
                    out.append(
                        start_tool_call(
                            block.tool_call_id,
                            display.title,
                            kind=display.kind,
                            status="pending",
                            locations=_locations(display),
                            raw_input=block.arguments or None,
                        )
                    )
        elif node.role == "tool":
            for block in node.content:
                if isinstance(block, ToolResultBlock):
                    status: ToolCallStatus = "failed" if block.is_error else "completed"
                    shown = _result_text(block)
                    content = [_text(shown)] if shown else None
                    out.append(update_tool_call(block.tool_call_id, status=status, content=content))
    return out


def _result_text(block: ToolResultBlock) -> str:
    if block.error is not None:
        return error_text(block.error.model_dump(mode="json"))
    for part in block.content:
        if isinstance(part, TextBlock) and part.text:
            return part.text[:RESULT_TEXT_LIMIT]
        if isinstance(part, JsonBlock) and part.summary:
            return part.summary[:RESULT_TEXT_LIMIT]
    return ""


def permission_content(metadata: dict[str, Any], path: str | None) -> list[ToolContent]:
    """The change preview of a permission request (``metadata.diff``) as ``diff`` content."""
    diff = metadata.get("diff")
    if not isinstance(diff, str) or not diff or not path:
        return []
    old, new = diff_texts(diff)
    shown: list[ToolContent] = [tool_diff_content(path, new, old)]
    omitted = metadata.get("diff_omitted_lines")
    if isinstance(omitted, int) and omitted > 0:
        shown.append(_text(f"(the preview leaves out {omitted} more diff lines)"))
    return shown


def json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)
