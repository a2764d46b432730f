"""``soong-agent chat``: an interactive multi-turn session on one ``AgentRuntime`` (surfaces.md §1).

Contracts:

- Each entered line that is not a slash command is one ``runtime.start(line, session_id=current,
  mode=current)``; the reply streams to stdout (Markdown on a terminal, plain text when piped). The
  prompt line ends with ``> `` and is shown on stdout when it is a terminal, else on stderr.
- Permission prompts are inline: the request (with the diff of a write/edit) and ``Answer [1/2/3]:``,
  answered like ``run`` (contract.md §10); Ctrl-C at that prompt denies and cancels the run; no answer
  within 120 s denies.
- Ctrl-C during a run calls ``run.cancel()``, prints ``[cancelled]`` and returns to the prompt (a second
  Ctrl-C stops waiting for the cancellation). Ctrl-C twice in a row at an empty prompt, Ctrl-D, ``/exit``
  or ``/quit`` leave with status 0. Startup errors (config, unknown ``--session-id``) → status 1.
- ``--continue`` resumes the most recently updated session of the project, ``--session-id`` a given one.
- Startup: the prompt is shown while the runtime opens in the background; the first command or message
  waits for it.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import TextIO

from agent_core.cli._chat_commands import run_command
from agent_core.cli._chat_input import Interrupted, chat_home, open_input
from agent_core.cli._chat_render import safe
from agent_core.cli._chat_session import ChatSession
from agent_core.cli._terminal import Output

EXIT_OK, EXIT_FAILED = 0, 1


async def prompt_loop(chat: ChatSession) -> None:
    """Reads lines until ``/exit``, Ctrl-D or Ctrl-C twice: slash commands, else one turn each."""
    from agent_core.errors import AgentCoreError

    assert chat.input is not None
    chat.plain_sigint(asyncio.get_running_loop())
    interrupted = False
    while not chat.quit:
        try:
            line = await chat.input.read("> ")
        except Interrupted:
            if interrupted:
                return
            interrupted = True
            chat.note("(press Ctrl-C again or Ctrl-D to leave)")
            continue
        if line is None:
            return
        interrupted = False
        text = line.strip()
        if not text:
            continue
        try:
            if text.startswith("/"):
                await run_command(chat, text)
            else:
                await chat.turn(line)
        except AgentCoreError as exc:
            chat.printer.line(f"error: {safe(exc.message)}")


async def _resume(chat: ChatSession, args: argparse.Namespace) -> bool:
    """Applies ``--session-id`` / ``--continue``; prints the startup error and returns False on failure."""
    from agent_core.errors import AgentCoreError

    if not args.session_id and not args.continue_:
        return True
    runtime = await chat.ready()
    try:
        sessions = await runtime.list_sessions()
    except AgentCoreError as exc:
        chat.err.write(f"soong-agent: error: {exc.message}\n")
        return False
    if args.session_id:
        found = next((s for s in sessions if s.session_id == args.session_id), None)
        if found is None:
            chat.err.write(f"soong-agent: error: unknown session {args.session_id!r} in this project\n")
            return False
    elif not sessions:
        chat.note("no earlier session in this project: starting a new one")
        return True
    else:
        found = sessions[0]
    chat.session_id = found.session_id
    chat.mode = found.mode
    chat.note(f"resumed session {found.session_id} ({found.mode}): {safe(found.title)}")
    return True


async def chat_command(args: argparse.Namespace, out: Output, err: Output, stdin: TextIO | None) -> int:
    """Runs ``soong-agent chat``; returns the exit status."""
    chat = ChatSession(out, err, stdin, "orchestrator" if args.orchestrator else "normal")
    chat.path = args.path
    chat.input = open_input(chat_home(), stdin, chat.prompt_out)

    def open_runtime() -> None:
        chat.start_opening(args.path)

    chat.input.on_first_prompt = open_runtime
    failed = False
    try:
        if args.session_id or args.continue_:
            await chat.start_opening(args.path)
        if not await _resume(chat, args):
            return EXIT_FAILED
        await prompt_loop(chat)
    except Exception as exc:
        failed = _report(err, exc)
        return EXIT_FAILED
    finally:
        chat.printer.end_reply()
        if chat.opening is not None:
            try:
                await chat.opening
            except Exception as exc:
                failed = failed or _report(err, exc)
        if chat.runtime is not None:
            await chat.runtime.close()
        await chat.tasks.aclose()
    return EXIT_FAILED if failed else EXIT_OK


def _report(err: Output, exc: Exception) -> bool:
    """Prints a startup/runtime error (an ``AgentCoreError`` as one line); returns True."""
    from agent_core.errors import AgentCoreError

    if not isinstance(exc, AgentCoreError):
        raise exc
    err.write(f"soong-agent: error: {exc.message}\n")
    return True
