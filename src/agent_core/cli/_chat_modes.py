"""Permission modes in ``soong-agent chat`` (issue 37 item 2): ``/mode`` and ``/permissions``, and the
approval of a plan.

``/mode`` takes either a run mode (``normal`` / ``orchestrator``: the mode of the next new session) or a
permission mode (``default``, ``accept_edits``, ``plan``, ``dont_ask``, ``bypass``: the mode of every
following run, switchable between runs); the two sets share no word, so one command serves both.
``/permissions [mode]`` shows or sets the permission mode only. Without an argument both print the current
modes. After a run in ``plan`` mode completes, chat asks whether to carry the plan out: ``y`` switches to
``default`` and ``a`` to ``accept_edits``, then sends "Carry out the plan." as the next message; anything
else keeps planning (type what to change).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_core.cli._chat_input import Interrupted

if TYPE_CHECKING:
    from agent_core.cli._chat_session import ChatSession

PERMISSION_MODES = ("default", "accept_edits", "plan", "dont_ask", "bypass")
RUN_MODES = ("normal", "orchestrator")
PLAN_PROMPT = "Carry out this plan? [y] yes (default mode)  [a] yes, accept edits  [n] keep planning: "
CARRY_OUT = "Carry out the plan."


def current_permission_mode(chat: ChatSession) -> str:
    """The mode the next run uses: the one chosen in this chat, else ``[permissions] mode``."""
    if chat.permission_mode is not None:
        return chat.permission_mode
    runtime = chat.runtime
    return runtime._config.settings.permissions.mode if runtime is not None else "default"


def modes_line(chat: ChatSession) -> str:
    return f"run mode: {chat.mode} (next new session); permission mode: {current_permission_mode(chat)}"


async def set_permission_mode(chat: ChatSession, value: str) -> None:
    """Switches the permission mode of the following runs (``bypass`` only with the sandbox on)."""
    runtime = await chat.ready()
    if value == "bypass" and runtime._config.settings.tools.sandbox != "bwrap":
        chat.printer.line('error: permission mode bypass needs [tools] sandbox = "bwrap" in config.toml')
        return
    chat.permission_mode = value
    notes = {
        "default": "tool calls that write, run commands or touch sensitive paths ask first",
        "accept_edits": "file edits inside the write roots run without asking; commands still ask",
        "plan": "read-only tools only; the reply is a plan you approve before anything changes",
        "dont_ask": "nothing asks: what would need permission is denied",
        "bypass": "everything runs without asking except protected and sensitive paths (sandboxed commands)",
    }
    chat.note(f"permission mode {value}: {notes[value]}")


async def permissions_command(chat: ChatSession, args: list[str]) -> None:
    """``/permissions [mode]``."""
    if not args:
        chat.note(modes_line(chat))
        return
    if len(args) != 1 or args[0] not in PERMISSION_MODES:
        chat.printer.line(f"error: usage: /permissions {'|'.join(PERMISSION_MODES)}")
        return
    await set_permission_mode(chat, args[0])


async def approve_plan(chat: ChatSession) -> str | None:
    """After a completed ``plan`` run: asks whether to carry the plan out; the next message to send
    (``None``: keep planning)."""
    if chat.input is None:
        return None
    try:
        line = await chat.input.read(PLAN_PROMPT, history=False)
    except Interrupted:
        line = None
    answer = (line or "").strip().lower()
    if answer in ("y", "yes"):
        chat.permission_mode = "default"
    elif answer in ("a", "accept", "accept_edits"):
        chat.permission_mode = "accept_edits"
    else:
        chat.note("still in plan mode: say what to change, or /mode default to leave it")
        return None
    chat.note(f"permission mode {chat.permission_mode}: carrying out the plan")
    return CARRY_OUT
