"""``soong-agent chat``: an interactive multi-turn session on one ``AgentRuntime`` (docs/cli.md#chat).

Contracts:

- Each entered line that is not a slash command is one ``runtime.start(line, session_id=current,
  mode=current)``; the reply streams to stdout (Markdown on a terminal, plain text when piped). The
  prompt line ends with ``> `` and is shown on stdout when it is a terminal, else on stderr.
- Permission prompts are inline: the request (with the diff of a write/edit) and ``Answer [1/2/3]:``.
  On a terminal an unrecognised answer re-prompts with the valid choices (``1``/``allow once``,
  ``2``/``allow for session``, ``3``/``deny``, also ``y``/``yes``, ``a``/``always``, ``n``/``no``) at most
  three times, then denies; a slash command typed there runs when the turn ends; piped input is answered
  like ``run`` (anything unrecognised denies at once, naming the valid answers). Ctrl-C at that prompt
  denies and cancels the run; no answer within 120 s denies. No answer becomes a chat message: a line
  that is only an answer, typed right after a turn that asked, is held back until typed again.
- Ctrl-C during a run calls ``run.cancel()``, prints ``[cancelled]`` and returns to the prompt (a second
  Ctrl-C stops waiting for the cancellation); the partial reply stays on screen once and in the session
  (``/history`` marks it). While a reply streams, the terminal does not echo typed keys: they wait for
  the next prompt, which shows and runs them. Ctrl-C while the chat starts or shuts down: status 130. Ctrl-C twice in a row at an empty prompt, Ctrl-D, ``/exit``
  or ``/quit`` leave with status 0. Startup errors (config, unknown ``--session-id``) → status 1.
- ``--continue`` resumes the most recently updated session of the project, ``--session-id`` a given one.
- Startup: the config is read and the API-key variables it names are checked before anything is shown
  (an error is one line on stderr, exit 1); then a one-line banner (model, project, session, ``/help``)
  and the prompt, while the runtime's storage opens in the background (the first command or message
  waits for it). Each error is printed once.
"""

from __future__ import annotations

import argparse
from typing import TextIO

from agent_core.cli import _interrupts as interrupts
from agent_core.cli._chat_commands import run_command
from agent_core.cli._chat_input import Interrupted, chat_home, open_input
from agent_core.cli._chat_modes import approve_plan
from agent_core.cli._chat_render import safe
from agent_core.cli._chat_session import ChatSession
from agent_core.cli._prompt import recognised_answer
from agent_core.cli._terminal import Output, error_text

EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130


async def prompt_loop(chat: ChatSession) -> None:
    """Reads lines until ``/exit``, Ctrl-D or Ctrl-C twice: slash commands, else one turn each.

    Slash commands typed at a permission prompt run when the turn ends. A line that is only a permission
    answer (``2``, ``yes``, ...) right after a turn that asked for permission is not sent: the prompt it
    was meant for has closed; typing it again sends it."""

    assert chat.input is not None
    # without a terminal, Ctrl-C at the prompt arrives as SIGINT: it goes to the line reader
    with interrupts.on_interrupt(chat.input.interrupt):
        await _read_lines(chat)


async def _read_lines(chat: ChatSession) -> None:
    from agent_core.errors import AgentCoreError

    assert chat.input is not None
    interrupted = False
    held: str | None = None
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
        if (
            chat.permission_asked
            and not text.startswith("/")
            and recognised_answer(text, words=True)
            and text != held
        ):
            held = text
            chat.note(
                f"not sent: {safe(text)!r} looks like an answer to the permission prompt, which has closed "
                "(type it again to send it as a message)"
            )
            continue
        held = None
        chat.permission_asked = False
        try:
            if text.startswith("/"):
                await run_command(chat, text)
            else:
                await chat.turn(line)
                await _after_plan(chat)
            while chat.queued and not chat.quit:
                command = chat.queued.pop(0)
                chat.note(f"> {safe(command)}")
                await run_command(chat, command)
        except AgentCoreError as exc:
            if chat.open_failed():
                raise  # the runtime did not open: chat_command reports it once and exits 1
            chat.printer.line(f"error: {safe(exc.message)}")


async def _after_plan(chat: ChatSession) -> None:
    """A completed run in plan mode ends with a plan: asks to carry it out (``cli._chat_modes``)."""
    run = chat.last_run
    while run is not None and run.permission_mode == "plan" and run.status.value == "completed":
        follow = await approve_plan(chat)
        if follow is None:
            return
        await chat.turn(follow)
        run = chat.last_run


async def _resume(chat: ChatSession, args: argparse.Namespace) -> bool:
    """Applies ``--session-id`` / ``--continue``; prints the startup error and returns False on failure."""
    from agent_core.errors import AgentCoreError

    if not args.session_id and not args.continue_:
        return True
    runtime = await chat.ready()
    try:
        sessions = await runtime.list_sessions()
    except AgentCoreError as exc:
        chat.err.write(error_text(exc))
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
    chat.team.follow(runtime, found.session_id)
    return True


async def chat_command(args: argparse.Namespace, out: Output, err: Output, stdin: TextIO | None) -> int:
    """Runs ``soong-agent chat``; returns the exit status."""
    from agent_core.errors import AgentCoreError

    chat = ChatSession(out, err, stdin, "orchestrator" if args.orchestrator else "normal")
    chat.path = args.path
    chat.permission_mode = getattr(args, "permission_mode", None)
    try:  # config and credentials are checked before the first prompt
        await chat.load(args.path)
    except AgentCoreError as exc:
        err.write(error_text(exc))
        return EXIT_FAILED
    if interrupts.pending():  # Ctrl-C during startup: nothing was opened
        return EXIT_INTERRUPTED
    chat.input = open_input(chat_home(), stdin, chat.prompt_out)
    reported: AgentCoreError | None = None
    try:
        if args.session_id or args.continue_:
            await chat.ready()
            if not await _resume(chat, args):
                return EXIT_FAILED
        if interrupts.pending():
            return EXIT_INTERRUPTED
        chat.note(chat.banner())

        def open_runtime() -> None:
            chat.start_opening()

        chat.input.on_first_prompt = open_runtime
        await prompt_loop(chat)
    except AgentCoreError as exc:
        reported = exc
        err.write(error_text(exc))
        return EXIT_FAILED
    finally:
        chat.printer.end_reply()
        await chat.team.close()
        if chat.opening is not None:
            try:
                await chat.opening
            except AgentCoreError as exc:
                if exc is not reported:  # each error is printed once
                    err.write(error_text(exc))
                    reported = exc
        if chat.runtime is not None:
            await chat.runtime.close()
        await chat.tasks.aclose()
    return EXIT_FAILED if reported is not None else EXIT_OK
