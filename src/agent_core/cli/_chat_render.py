"""What ``soong-agent chat`` prints for a run's events (surfaces.md §1).

Contracts:

- Every model-, tool- or file-derived string goes through ``escape_terminal`` before it is printed.
- On a terminal (``rich=True``) the assistant's reply is rendered as Markdown while it streams: finished
  blocks (a blank line outside a code fence) are printed for good, the block still being written is
  shown in a transient live area (its last screenful). Tool activity is dimmed. Without a terminal the
  reply and the notices are plain text and nothing else: no escape codes, no markup.
- Tool activity: ``• name args`` when a call starts, ``  └ name ok (12 ms)`` / ``failed: ...`` /
  ``  denied (...)`` when it ends; a child agent's activity is indented one level under the tool call
  that created it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent_core.cli._run import _error_text, folded_reasoning
from agent_core.cli._status import ModelStatus
from agent_core.cli._terminal import Output, escape_terminal

if TYPE_CHECKING:
    from rich.console import Console
    from rich.live import Live

    from agent_core.types.runtime import RuntimeEvent

ARGS_LIMIT = 120
CHILD_TEXT_LIMIT = 200


def safe(text: str, *, multiline: bool = False) -> str:
    """``text`` escaped for the terminal (tabs expanded first; newlines kept with ``multiline``)."""
    return escape_terminal(text.expandtabs(4), keep_newlines=multiline)


def cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _split_point(text: str) -> int:
    """End of the last finished Markdown block of ``text`` (0 when none): a blank line outside a fence."""
    end = 0
    in_fence = False
    offset = 0
    for line in text.splitlines(keepends=True):
        offset += len(line)
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            in_fence = not in_fence
        elif not stripped and not in_fence and line.endswith("\n"):
            end = offset
    return end


class ChatPrinter:
    """Renders events; ``rich`` selects Markdown/dim styling (a terminal) or plain text (a pipe)."""

    def __init__(self, out: Output, *, rich: bool, err: Output | None = None) -> None:
        self.out = out
        self.rich = rich
        self._console: Console | None = None
        self._live: Live | None = None
        self._pending = ""  # reply text not yet printed for good (rich mode)
        self._streamed = ""  # reply text of the current assistant message received as deltas
        self._at_line_start = True
        self._error: dict[str, Any] | None = None
        self.cancel_requested = False
        self._reasoning = ""  # the reasoning of the current answer, not shown yet
        self.last_reasoning = ""
        """The latest answer's whole reasoning (``/reasoning`` shows it)."""
        self.status = ModelStatus(err or out)
        self.status.before_line = self.end_reply
        self.status.line_open = lambda: bool(self._pending.strip()) or not self._at_line_start

    # ---- low-level output ---------------------------------------------------------------------
    @property
    def console(self) -> Console:
        if self._console is None:
            from rich.console import Console

            self._console = Console(file=self.out.stream, highlight=False, soft_wrap=False)
        return self._console

    def _plain(self, text: str) -> None:
        if text:
            self.out.write(text)
            self._at_line_start = text.endswith("\n")

    def line(self, text: str, *, dim: bool = False, depth: int = 0) -> None:
        """One line of notice text (already escaped), after finishing any open reply text."""
        self.end_reply()
        text = "  " * depth + text
        if self.rich:
            from rich.text import Text

            self.console.print(Text(text, style="dim" if dim else ""), soft_wrap=True)
        else:
            self._plain(text + "\n")

    def block(self, lines: list[str]) -> None:
        """Several lines printed as they are (command output, already escaped, may hold ANSI colour)."""
        self.end_reply()
        self.out.write("".join(f"{line}\n" for line in lines))
        self._at_line_start = True

    # ---- the reply ----------------------------------------------------------------------------
    def reply(self, delta: str) -> None:
        if not delta:
            return
        if not self.rich:
            self._plain(safe(delta, multiline=True))
            return
        self._pending += delta
        split = _split_point(self._pending)
        if split:
            done, self._pending = self._pending[:split], self._pending[split:]
            self._stop_live()
            self._print_markdown(done)
        if self._pending.strip():
            self._show_live(self._pending)

    def _markdown(self, text: str) -> Any:
        from rich.markdown import Markdown

        # hyperlinks=False: a link shows its target as text, never an OSC 8 hyperlink whose visible text can
        # hide where it points ([https://github.com/acme](https://evil.example), issue 31)
        return Markdown(safe(text, multiline=True), hyperlinks=False)

    def _print_markdown(self, text: str) -> None:
        if text.strip():
            self.console.print(self._markdown(text))

    def _show_live(self, text: str) -> None:
        from rich.live import Live

        view = _Tail(self._markdown(text), max(3, self.console.height - 2))
        if self._live is None:
            self._live = Live(
                view,
                console=self.console,
                transient=True,
                auto_refresh=False,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self._live.start()
        self._live.update(view, refresh=True)

    def _stop_live(self) -> None:
        if self._live is not None:
            live, self._live = self._live, None
            live.stop()

    def end_reply(self) -> None:
        """Prints whatever reply text is still open and ends the line."""
        if self.rich:
            self._stop_live()
            pending, self._pending = self._pending, ""
            self._print_markdown(pending)
        elif not self._at_line_start:
            self._plain("\n")

    # ---- events -------------------------------------------------------------------------------
    def handle(self, event: RuntimeEvent, depth: int = 0) -> None:
        if self.status.handle(event, root=depth == 0):
            return
        kind = event.event_type.value
        p = event.payload
        if kind == "loop_failed":
            error = p.get("error") or self._error or {}
            self._error = None
            detail = _error_text(error) if error else str(p.get("end_reason") or "failed")
            self.line(f"[failed] {safe(detail)}", depth=depth)
            return
        if self._error is not None and kind != "error":
            error, self._error = self._error, None
            self.line(f"[error] {safe(_error_text(error))}", depth=depth)
        if depth:
            self._child(kind, p, depth)
            return
        if kind == "reasoning_delta":
            self._reasoning += str(p.get("text", ""))
            return
        self.end_reasoning()
        if kind == "message_delta":
            delta = str(p.get("text", ""))
            self._streamed += delta
            self.reply(delta)
        elif kind == "message_completed":
            if p.get("role", "assistant") == "assistant":
                full = str(p.get("text", ""))
                if full.startswith(self._streamed):
                    self.reply(full[len(self._streamed) :])
            self._streamed = ""
        elif kind == "error":
            self._error = dict(p)
        elif kind.startswith("tool_"):
            self._tool(kind, p, depth)
        elif kind.startswith(("child_agent_", "worker_dispatch")):
            self._agent(kind, p, depth)
        elif kind == "teammate_spawned":
            how = "resident" if p.get("resident") else "one task"
            self.line(f"[teammate {safe(str(p.get('name')))} started ({how})]", dim=True)
        elif kind == "teammate_stopped":
            self.line(
                f"[teammate {safe(str(p.get('name')))} stopped: {safe(str(p.get('reason')))}]", dim=True
            )
        elif kind == "run_queued":
            self.line(
                f"[queued behind another run of this session (position {p.get('queue_position')})]", dim=True
            )
        elif kind == "loop_aborted" and not self.cancel_requested:
            self.line(f"[aborted: {safe(str(p.get('abort_reason') or p.get('end_reason')))}]")
        elif kind == "stop_hook_prevented":
            self.line(
                f"[a Stop hook asked the agent to continue: {safe(str(p.get('reason') or ''))}]", dim=True
            )
        elif kind == "model_fallback":
            error = (p.get("error") or {}).get("code")
            self.line(
                safe(
                    f"[{p.get('from_provider')}/{p.get('from_model')} failed ({error}); continuing on "
                    f"{p.get('to_provider')}/{p.get('to_model')}]"
                ),
                dim=True,
            )
        elif kind == "context_overflow":
            self.line("[the provider said the prompt is too long: compacting and retrying once]", dim=True)

    def end_reasoning(self) -> None:
        """Shows the reasoning that just ended as one dimmed, folded line (``/reasoning`` unfolds it)."""
        if self._reasoning.strip():
            text, self._reasoning = self._reasoning, ""
            self.last_reasoning = text
            self.line(safe(folded_reasoning(text)), dim=True)
        self._reasoning = ""

    def show_reasoning(self) -> None:
        """The latest answer's reasoning in full, dimmed (``/reasoning``)."""
        if not self.last_reasoning.strip():
            self.line("[no reasoning in the latest answer]", dim=True)
            return
        for line in self.last_reasoning.strip().splitlines():
            self.line(safe(line), dim=True)

    def _tool(self, kind: str, p: dict[str, Any], depth: int) -> None:
        name = safe(str(p.get("tool_name") or "tool"))
        if kind == "tool_started":
            args = safe(cut(str(p.get("args_summary") or ""), ARGS_LIMIT))
            self.line(f"• {name} {args}".rstrip(), dim=True, depth=depth)
        elif kind == "tool_completed":
            self.line(f"  └ {name} ok ({p.get('duration_ms', '?')} ms)", dim=True, depth=depth)
        elif kind == "tool_failed":
            self.line(f"  └ {name} failed: {safe(_error_text(p.get('error') or {}))}", dim=True, depth=depth)
        elif kind == "tool_denied":
            why = safe(str(p.get("reason") or "denied"))
            self.line(f"  └ {name} denied ({safe(str(p.get('denied_by')))}): {why}", dim=True, depth=depth)

    def _agent(self, kind: str, p: dict[str, Any], depth: int) -> None:
        run = safe(str(p.get("child_run_id") or "-"))
        indent = depth + 1
        if kind == "child_agent_created":
            definition = safe(str(p.get("agent_definition_id") or "child"))
            self.line(
                f"[agent {definition} ({safe(str(p.get('agent_type')))}) started, run {run}]",
                dim=True,
                depth=indent,
            )
        elif kind == "worker_dispatched":
            worker = safe(str(p.get("worker_agent_id")))
            self.line(
                f"[worker {worker} dispatched on task {safe(str(p.get('task_id')))}]", dim=True, depth=indent
            )
        elif kind == "worker_dispatch_failed":
            self.line(
                f"[worker dispatch failed: {safe(_error_text(p.get('error') or {}))}]", dim=True, depth=indent
            )
        elif kind == "child_agent_completed":
            self.line(
                f"[agent run {run} {safe(str(p.get('status') or 'completed'))}]", dim=True, depth=indent
            )
        elif kind == "child_agent_failed":
            self.line(
                f"[agent run {run} failed: {safe(_error_text(p.get('error') or {}))}]", dim=True, depth=indent
            )
        elif kind == "child_agent_cancelled":
            self.line(f"[agent run {run} cancelled]", dim=True, depth=indent)

    def _child(self, kind: str, p: dict[str, Any], depth: int) -> None:
        if kind.startswith("tool_"):
            self._tool(kind, p, depth)
        elif kind.startswith(("child_agent_", "worker_dispatch")):
            self._agent(kind, p, depth)
        elif kind == "message_completed" and p.get("role", "assistant") == "assistant":
            text = safe(cut(str(p.get("text") or ""), CHILD_TEXT_LIMIT))
            if text:
                self.line(text, dim=True, depth=depth)

    def finish(self) -> None:
        self.status.clear()
        self.end_reasoning()
        if self._error is not None:
            error, self._error = self._error, None
            self.line(f"[error] {safe(_error_text(error))}")
        self._streamed = ""
        self.end_reply()


class _Tail:
    """A renderable showing only the last ``rows`` lines of another one (the live reply area)."""

    def __init__(self, renderable: Any, rows: int) -> None:
        self.renderable = renderable
        self.rows = rows

    def __rich_console__(self, console: Console, options: Any) -> Any:
        from rich.segment import Segment

        lines = console.render_lines(self.renderable, options, pad=False)
        for line in lines[-self.rows :]:
            yield from line
            yield Segment.line()
