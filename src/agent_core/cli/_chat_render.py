"""What ``soong-agent chat`` prints for a run's events (docs/cli.md#chat).

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

    from agent_core.types.events import RuntimeEventPayload
    from agent_core.types.runtime import RuntimeEvent

ARGS_LIMIT = 120
CHILD_TEXT_LIMIT = 200


def safe(text: str, *, multiline: bool = False) -> str:
    """``text`` escaped for the terminal (tabs expanded first; newlines kept with ``multiline``)."""
    return escape_terminal(text.expandtabs(4), keep_newlines=multiline)


def cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _name(tool_name: str | None) -> str:
    return safe(str(tool_name or "tool"))


def _run(run_id: str | None) -> str:
    return safe(str(run_id or "-"))


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
        from agent_core.types import events as ev  # loaded with the runtime; not before the first prompt

        if self.status.handle(event, root=depth == 0):
            return
        p = event.payload
        if isinstance(p, ev.LoopFailed):
            error = p.error or self._error or {}
            self._error = None
            detail = _error_text(error) if error else str(p.end_reason or "failed")
            self.line(f"[failed] {safe(detail)}", depth=depth)
            return
        if self._error is not None and not isinstance(p, ev.Error):
            pending, self._error = self._error, None
            self.line(f"[error] {safe(_error_text(pending))}", depth=depth)
        if depth:
            self._child(p, depth)
            return
        if isinstance(p, ev.ReasoningDelta):
            self._reasoning += p.text or ""
            return
        self.end_reasoning()
        match p:
            case ev.MessageDelta(text=delta):
                self._streamed += delta
                self.reply(delta)
            case ev.MessageCompleted(role=role, text=full):
                if role == "assistant" and full.startswith(self._streamed):
                    self.reply(full[len(self._streamed) :])
                self._streamed = ""
            case ev.Error(error=details):
                self._error = dict(details)
            case ev.TeammateSpawned(name=name, resident=resident):
                how = "resident" if resident else "one task"
                self.line(f"[teammate {safe(str(name))} started ({how})]", dim=True)
            case ev.TeammateStopped(name=name, reason=reason):
                self.line(f"[teammate {safe(str(name))} stopped: {safe(str(reason))}]", dim=True)
            case ev.RunQueued(queue_position=position):
                self.line(f"[queued behind another run of this session (position {position})]", dim=True)
            case ev.LoopAborted(abort_reason=why, end_reason=end) if not self.cancel_requested:
                self.line(f"[aborted: {safe(str(why or end))}]")
            case ev.StopHookPrevented(reason=reason):
                self.line(f"[a Stop hook asked the agent to continue: {safe(str(reason or ''))}]", dim=True)
            case ev.ModelFallback(from_provider=p_from, from_model=m_from, to_provider=p_to, to_model=m_to):
                code = (p.error or {}).get("code")
                self.line(safe(f"[{p_from}/{m_from} failed ({code}); continuing on {p_to}/{m_to}]"), dim=True)
            case ev.ContextOverflow():
                self.line(
                    "[the provider said the prompt is too long: compacting and retrying once]", dim=True
                )
            case _:
                self._tool(p, depth) or self._agent(p, depth)

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

    def _tool(self, p: RuntimeEventPayload, depth: int) -> bool:
        """Prints a tool call's start or end; ``False`` when ``p`` is not one."""
        from agent_core.types import events as ev

        match p:
            case ev.ToolStarted(tool_name=name, args_summary=args):
                self.line(
                    f"• {_name(name)} {safe(cut(str(args or ''), ARGS_LIMIT))}".rstrip(),
                    dim=True,
                    depth=depth,
                )
            case ev.ToolCompleted(tool_name=name, duration_ms=ms):
                self.line(f"  └ {_name(name)} ok ({'?' if ms is None else ms} ms)", dim=True, depth=depth)
            case ev.ToolFailed(tool_name=name, error=error):
                self.line(
                    f"  └ {_name(name)} failed: {safe(_error_text(error or {}))}", dim=True, depth=depth
                )
            case ev.ToolDenied(tool_name=name, denied_by=by, reason=reason):
                why = safe(str(reason or "denied"))
                self.line(f"  └ {_name(name)} denied ({safe(str(by))}): {why}", dim=True, depth=depth)
            case _:
                return False
        return True

    def _agent(self, p: RuntimeEventPayload, depth: int) -> bool:
        """Prints a child agent's or a worker dispatch's progress; ``False`` when ``p`` is not one."""
        from agent_core.types import events as ev

        indent = depth + 1
        match p:
            case ev.ChildAgentCreated(child_run_id=run, agent_definition_id=definition, agent_type=kind):
                self.line(
                    f"[agent {safe(str(definition or 'child'))} ({safe(str(kind))}) started, run {_run(run)}]",
                    dim=True,
                    depth=indent,
                )
            case ev.WorkerDispatched(worker_agent_id=worker, task_id=task):
                self.line(
                    f"[worker {safe(str(worker))} dispatched on task {safe(str(task))}]",
                    dim=True,
                    depth=indent,
                )
            case ev.WorkerDispatchFailed(error=error):
                self.line(
                    f"[worker dispatch failed: {safe(_error_text(error or {}))}]", dim=True, depth=indent
                )
            case ev.ChildAgentCompleted(child_run_id=run, status=status):
                self.line(
                    f"[agent run {_run(run)} {safe(str(status or 'completed'))}]", dim=True, depth=indent
                )
            case ev.ChildAgentFailed(child_run_id=run, error=failure):
                self.line(
                    f"[agent run {_run(run)} failed: {safe(_error_text(failure or {}))}]",
                    dim=True,
                    depth=indent,
                )
            case ev.ChildAgentCancelled(child_run_id=run):
                self.line(f"[agent run {_run(run)} cancelled]", dim=True, depth=indent)
            case _:
                return False
        return True

    def _child(self, p: RuntimeEventPayload, depth: int) -> None:
        from agent_core.types import events as ev

        if self._tool(p, depth) or self._agent(p, depth):
            return
        if isinstance(p, ev.MessageCompleted) and p.role == "assistant":
            text = safe(cut(str(p.text or ""), CHILD_TEXT_LIMIT))
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
