"""``soong-agent run`` for scripts and CI: the message from stdin and machine-readable output.

* Input: the message is read from stdin (to its end) when the argument is ``-``, or when it is left out
  and stdin is not a terminal. Then stdin is not there for answers: the run asks nobody (see below).
* ``--output-format json``: stdout carries exactly one JSON object when the run ends (:func:`result`).
* ``--output-format stream-json``: stdout carries one JSON object per line: every event of the run and of
  its child runs as it happens (the same JSON as ``soong-agent serve``'s event stream: a
  ``RuntimeEvent``, a child's with ``parent_run_id`` / ``parent_tool_call_id``), then the result object
  last. Nothing else is written to stdout.
* Headless (either format, or the message read from stdin): there is no prompt and no stdin read.
  A call that would ask is decided by the permission mode: what the mode allows runs, the rest is denied
  (as without a permission callback), and ``internal.ask_user`` tells the model nobody can answer.
* The result object: ``type`` (``"result"``), ``session_id``, ``run_id``, ``status`` (``completed``,
  ``failed``, ``cancelled``, or ``error`` when the run could not start), ``end_reason``, ``answer``
  (the text of the final answer, ``""`` without one), ``output`` (the validated ``--output-schema``
  value, else ``null``), ``usage`` (the run's and its sub-agents' token counts and cost, the fields of
  ``UsageTotals``), ``turns``, ``error`` (an ``ErrorPayload`` or ``null``), ``duration_ms``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, TextIO

from agent_core.cli._terminal import Output

if TYPE_CHECKING:
    from agent_core import AgentRuntime, RunHandle
    from agent_core.types.runtime import Node, RuntimeEvent

OutputFormat = Literal["text", "json", "stream-json"]
OUTPUT_FORMATS: tuple[OutputFormat, ...] = ("text", "json", "stream-json")
STDIN_MESSAGE = "-"


def is_terminal(stream: TextIO | None) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


async def read_message(argument: str | None, stdin: TextIO | None) -> tuple[str | None, bool, str]:
    """``(message, from_stdin, problem)``: the argument, or stdin's text for ``-`` or a missing argument
    when stdin is not a terminal; ``problem`` (a usage error) when there is none."""
    if argument is not None and argument != STDIN_MESSAGE:
        return argument, False, ""
    if argument is None and (stdin is None or is_terminal(stdin)):
        return (
            None,
            False,
            "no message: give it as an argument, or pipe it on stdin (or pass - to read stdin)",
        )
    if stdin is None:
        return None, True, "no message: stdin is closed"
    try:
        text = await _read_all(stdin)
    except (OSError, ValueError) as exc:
        return None, True, f"cannot read the message from stdin: {exc}"
    if not text.strip():
        return None, True, "the message read from stdin is empty"
    return text, True, ""


async def _read_all(stream: TextIO) -> str:
    """Everything ``stream`` holds until its end, read on a daemon thread (a Ctrl-C while a slow producer
    writes is not held up by the read, and the thread never keeps the process alive)."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return stream.read()  # an in-memory stream (tests): nothing to wait for
    loop = asyncio.get_running_loop()
    done: asyncio.Future[bytes] = loop.create_future()

    def settle(value: bytes | None, error: BaseException | None) -> None:
        if done.done():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(value or b"")

    def read() -> None:
        chunks: list[bytes] = []
        try:
            while True:
                try:
                    chunk = os.read(fd, 65536)
                except InterruptedError:
                    continue
                if not chunk:
                    break
                chunks.append(chunk)
        except OSError as exc:
            with contextlib.suppress(RuntimeError):  # the loop is closed: the CLI is exiting
                loop.call_soon_threadsafe(settle, None, exc)
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, b"".join(chunks), None)

    threading.Thread(target=read, name="soong-agent-stdin-message", daemon=True).start()
    return (await done).decode("utf-8", "replace")


def event_line(event: RuntimeEvent) -> str:
    """One stream-json line: the event's public JSON form (as ``serve`` sends it)."""
    return event.model_dump_json()


def write_line(out: Output, text: str) -> None:
    out.write(text + "\n")
    flush = getattr(out.stream, "flush", None)
    if flush is not None:
        try:
            flush()
        except (OSError, ValueError):
            pass


def final_answer(nodes: Sequence[Node], final_node_id: str | None) -> str:
    """The final answer's text: the final node and the answers it continued (cut off at the output
    limit), i.e. the assistant messages without tool calls it descends from directly."""
    if final_node_id is None:
        return ""
    by_id = {n.node_id: n for n in nodes}
    parts: list[str] = []
    node = by_id.get(final_node_id)
    while node is not None and node.role == "assistant" and node.node_type == "message":
        if any(getattr(b, "type", None) == "tool_call" for b in node.content):
            break
        parts.append(
            "".join(getattr(b, "text", "") for b in node.content if getattr(b, "type", "") == "text")
        )
        node = by_id.get(node.parent_id) if node.parent_id else None
    return "".join(reversed(parts))


def _jsonable(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if callable(dump) else value


async def result(
    runtime: AgentRuntime,
    run: RunHandle,
    *,
    started: float,
    output: Any = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The result object of a run that ended (see the module docstring)."""
    from agent_core.errors import AgentCoreError

    answer, usage, turns = "", None, None
    try:
        replay = await runtime.replay_run(run.run_id)
    except AgentCoreError:
        replay = None
    if replay is not None:
        usage = replay.usage.model_dump(mode="json") if replay.usage is not None else None
        completed = [
            e for e in replay.events if e.event_type.value == "run_completed" and e.run_id == run.run_id
        ]
        final_id = completed[-1].payload.get("final_node_id") if completed else None
        answer = final_answer(replay.nodes, final_id if isinstance(final_id, str) else None)
        root = [r for r in replay.runs if r.run_id == run.run_id]
        turns = root[0].turn_count if root else None
    return {
        "type": "result",
        "session_id": run.session_id,
        "run_id": run.run_id,
        "status": run.status.value,
        "end_reason": run.end_reason.value if run.end_reason is not None else None,
        "answer": answer,
        "output": _jsonable(output),
        "usage": usage,
        "turns": turns,
        "error": run.error.model_dump(mode="json") if run.error is not None else None,
        "duration_ms": int((time.monotonic() - started) * 1000),
        **(extra or {}),
    }


def startup_failure(error: Any, started: float) -> dict[str, Any]:
    """The result object of a run that could not start (configuration, credentials, unknown session)."""
    return {
        "type": "result",
        "session_id": None,
        "run_id": None,
        "status": "error",
        "end_reason": None,
        "answer": "",
        "output": None,
        "usage": None,
        "turns": None,
        "error": _jsonable(error),
        "duration_ms": int((time.monotonic() - started) * 1000),
    }


def dumps(value: dict[str, Any]) -> str:
    """The result as one line of JSON (non-ASCII escaped: safe on any terminal)."""
    return json.dumps(value, ensure_ascii=True, default=str)
