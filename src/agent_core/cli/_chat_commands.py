"""Slash commands of ``soong-agent chat`` (docs/cli.md#chat).

Each command prints its result through the chat's printer; a bad argument or an unknown command prints
one line and the prompt returns. Branch and fork use the SDK's node-tree operations
(``AgentRuntime.switch_node`` / ``fork_session``); ``/usage`` sums the usage recorded on the session's
runs (and the cost when the run reported one).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_core.cli._chat_mcp import mcp_command, prompt_command
from agent_core.cli._chat_modes import (
    PERMISSION_MODES,
    current_permission_mode,
    modes_line,
    permissions_command,
    set_permission_mode,
)
from agent_core.cli._chat_render import cut, safe
from agent_core.cli._chat_rewind import rewind_command
from agent_core.cli._chat_team import team_command

if TYPE_CHECKING:
    from agent_core.cli._chat_session import ChatSession

Command = Callable[["ChatSession", list[str]], Awaitable[None]]
HISTORY_TEXT_LIMIT = 160
DEFAULT_SESSIONS = 10


def _fmt_time(value: Any) -> str:
    return value.strftime("%Y-%m-%d %H:%M") if hasattr(value, "strftime") else str(value)


async def _help(chat: ChatSession, args: list[str]) -> None:
    lines = [f"  {usage:<24} {text}" for usage, text in HELP]
    chat.printer.block(["Commands:", *lines, "Ctrl-C cancels a running reply; Ctrl-D or /exit leaves."])


async def _new(chat: ChatSession, args: list[str]) -> None:
    chat.session_id = None
    chat.note(f"new session ({chat.mode} mode): it starts with your next message")


async def _sessions(chat: ChatSession, args: list[str]) -> None:
    limit = DEFAULT_SESSIONS
    if args:
        if not args[0].isdigit() or int(args[0]) < 1:
            chat.printer.line(f"error: /sessions takes a positive number, not {safe(args[0])!r}")
            return
        limit = int(args[0])
    runtime = await chat.ready()
    sessions = await runtime.list_sessions(limit=limit)
    if not sessions:
        chat.note("no sessions in this project yet")
        return
    lines = []
    for s in sessions:
        mark = "*" if s.session_id == chat.session_id else " "
        status = s.status or "-"
        fork = f" (fork of {s.parent_session_id})" if s.parent_session_id else ""
        title = safe(cut(s.title, 60)) or "-"
        lines.append(
            f"{mark} {s.session_id}  {_fmt_time(s.updated_at)}  {s.mode:<12} {status:<10} {title}{fork}"
        )
    chat.printer.block(lines)


async def _use(chat: ChatSession, args: list[str]) -> None:
    if len(args) != 1:
        chat.printer.line("error: usage: /use <session_id>")
        return
    runtime = await chat.ready()
    found = next((s for s in await runtime.list_sessions() if s.session_id == args[0]), None)
    if found is None:
        chat.printer.line(f"error: unknown session {safe(args[0])!r} in this project (see /sessions)")
        return
    chat.session_id, chat.mode = found.session_id, found.mode
    chat.note(f"using session {found.session_id} ({found.mode}): {safe(found.title) or '-'}")


async def _active_path(chat: ChatSession) -> list[Any] | None:
    runtime = await chat.ready()
    if chat.session_id is None:
        return None
    summary = next((s for s in await runtime.list_sessions() if s.session_id == chat.session_id), None)
    if summary is None or summary.active_node_id is None:
        return []
    return await runtime.get_node_path(summary.active_node_id)


async def _history(chat: ChatSession, args: list[str]) -> None:
    from agent_core.types.content import text_of

    path = await _active_path(chat)
    if not path:
        chat.note("no messages yet in this session")
        return
    if chat.session_id is not None:  # a reply cancelled after the active leaf hangs off it, kept
        runtime = await chat.ready()
        leaf = path[-1].node_id
        path += [
            node
            for node in (await runtime.replay_session(chat.session_id)).nodes
            if node.parent_id == leaf and node.role == "assistant" and node.metadata.get("partial")
        ]
    lines = []
    for node in path:
        if node.node_type != "message" or node.role not in ("user", "assistant"):
            continue
        meta = node.metadata
        cancelled = bool(meta.get("partial") and meta.get("aborted"))
        if meta.get("failed") or ((meta.get("partial") or meta.get("aborted")) and not cancelled):
            continue
        text = safe(cut(text_of(node.content), HISTORY_TEXT_LIMIT))
        if not text:
            continue
        who = "you" if node.role == "user" else "assistant"
        mark = "  [cancelled]" if cancelled else ""  # the partial reply kept when a reply was cancelled
        lines.append(f"{node.node_id}  {who:>9}: {text}{mark}")
    chat.printer.block(lines or ["(no messages on the active path)"])


async def _node_id(chat: ChatSession, command: str, args: list[str]) -> str | None:
    """The node id ``args`` name: a full id, or the start (else the end, e.g. its random tail) of exactly
    one node id of the current session (``None`` after printing why not)."""
    if len(args) != 1:
        chat.printer.line(f"error: usage: {command} <node_id or a unique prefix>  (node ids: /history)")
        return None
    if chat.session_id is None:
        chat.printer.line("error: no session yet: send a message first")
        return None
    wanted = args[0]
    runtime = await chat.ready()
    ids = [node.node_id for node in (await runtime.replay_session(chat.session_id)).nodes]
    if wanted in ids:
        return wanted
    matches = [node_id for node_id in ids if node_id.startswith(wanted)]
    if not matches:  # the random tail of an id (``a1b2c3``) identifies it as well as its start
        matches = [node_id for node_id in ids if node_id.endswith(wanted)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        shown = ", ".join(matches[:5]) + (", ..." if len(matches) > 5 else "")
        chat.printer.line(
            f"error: {safe(wanted)!r} is the start of {len(matches)} node ids ({shown}): type more of it"
        )
        return None
    return wanted  # unknown: the runtime's error names it


async def _branch(chat: ChatSession, args: list[str]) -> None:
    node_id = await _node_id(chat, "/branch", args)
    if node_id is None or chat.session_id is None:
        return
    runtime = await chat.ready()
    node = await runtime.switch_node(chat.session_id, node_id)
    chat.note(f"active leaf is now {node.node_id} ({node.role}); your next message continues from it")


async def _fork(chat: ChatSession, args: list[str]) -> None:
    node_id = await _node_id(chat, "/fork", args)
    if node_id is None or chat.session_id is None:
        return
    runtime = await chat.ready()
    source = chat.session_id
    chat.session_id = await runtime.fork_session(source, node_id)
    chat.note(f"forked {source} at {node_id} into session {chat.session_id} (now current)")


async def _mode(chat: ChatSession, args: list[str]) -> None:
    if not args:
        chat.note(modes_line(chat))
        return
    if len(args) == 1 and args[0] in PERMISSION_MODES:
        await set_permission_mode(chat, args[0])
        return
    if len(args) != 1 or args[0] not in ("normal", "orchestrator"):
        chat.printer.line(
            f"error: usage: /mode normal|orchestrator (current: {chat.mode}) or /mode "
            f"{'|'.join(PERMISSION_MODES)} (permission mode: {current_permission_mode(chat)})"
        )
        return
    if args[0] == chat.mode:
        chat.note(f"already in {chat.mode} mode")
        return
    chat.mode = "orchestrator" if args[0] == "orchestrator" else "normal"
    if chat.session_id is not None:
        chat.session_id = None
        chat.note(f"{chat.mode} mode: a session keeps its mode, so your next message starts a new session")
    else:
        chat.note(f"{chat.mode} mode")


async def _tasks(chat: ChatSession, args: list[str]) -> None:
    if chat.session_id is None:
        chat.note("no session yet")
        return
    runtime = await chat.ready()
    replay = await runtime.replay_session(chat.session_id)
    if not replay.tasks:
        chat.note("no Tasks in this session (Tasks exist in orchestrator mode)")
        return
    lines = []
    for view in replay.tasks:
        task = view.task or {}
        title = safe(cut(str(task.get("title") or task.get("goal") or ""), 80))
        lines.append(f"{view.task_id or '-'}  {view.status or '-'}  {title}")
        steps = task.get("steps")
        for step in steps if isinstance(steps, list) else []:
            if isinstance(step, dict):
                deps = ", ".join(str(d) for d in step.get("depends_on_step_ids") or []) or "-"
                name = safe(cut(str(step.get("title") or step.get("summary") or ""), 70))
                lines.append(
                    f"    {step.get('step_id', '-')}  {step.get('status', '-')}  {name}  (after: {deps})"
                )
    chat.printer.block(lines)


_USAGE_KEYS = (
    "input_tokens",
    "uncached_input_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "output_tokens",
    "reasoning_tokens",
)
"""The input first, then its split (uncached, read from and written to the provider's prompt cache)."""


async def _usage(chat: ChatSession, args: list[str]) -> None:
    if chat.session_id is None:
        chat.note("no session yet")
        return
    runtime = await chat.ready()
    replay = await runtime.replay_session(chat.session_id)
    totals: dict[str, Any] = replay.usage.model_dump() if replay.usage is not None else {}
    if not totals:  # a store without session totals: sum the root runs
        for run in replay.runs:
            for key, value in (run.usage or {}).items():
                if isinstance(value, int | float) and not isinstance(value, bool):
                    totals[key] = (totals.get(key) or 0) + value
    cached = bool(totals.get("cache_read_tokens") or totals.get("cache_write_tokens"))
    parts = [
        f"{key.removesuffix('_tokens').replace('_', ' ')} {totals[key]}"
        for key in _USAGE_KEYS
        if isinstance(totals.get(key), int) and (cached or key != "uncached_input_tokens")
    ]
    runs = totals.get("runs") or len(replay.runs)
    lines = [f"session {chat.session_id}: {runs} run(s); tokens: {', '.join(parts) or 'none reported'}"]
    cost = totals.get("cost_usd")
    if isinstance(cost, int | float):
        lines.append(f"cost: ${cost:.6f}")
    else:
        lines.append("cost: - (set [model] price_input_per_mtok / price_output_per_mtok to see it)")
    if chat.last_usage:
        last = ", ".join(
            f"{k.removesuffix('_tokens')} {v}"
            for k, v in chat.last_usage.items()
            if isinstance(v, int | float)
        )
        lines.append(f"last run: {last}")
    limits = getattr(runtime.config.settings, "limits", None)
    if limits is not None:
        shown = ", ".join(f"{k}={v}" for k, v in limits.model_dump().items() if v not in (None, 0, False))
        lines.append(f"limits (per root run): {shown or 'none'}")
    chat.printer.block(lines)


async def _skills(chat: ChatSession, args: list[str]) -> None:
    runtime = await chat.ready()
    entries = runtime.list_skills()
    if not entries:
        chat.note(f"no skills (add *.md files under {safe(str(runtime.skills_dir))})")
        return
    chat.printer.block([f"{safe(e.name)}: {safe(cut(e.description, 100))}" for e in entries])


async def _config(chat: ChatSession, args: list[str]) -> None:
    from agent_core.config import resolve_purpose_model

    runtime = await chat.ready()
    config = runtime.config
    model = resolve_purpose_model(config, "orchestrator" if chat.mode == "orchestrator" else "main")
    chat.printer.block(
        [
            f"home:     {safe(str(config.home))}",
            f"config:   {safe(str(config.config_path))}",
            f"project:  {safe(str(config.project))}",
            f"provider: {safe(model.provider)} ({safe(model.base_url)})",
            f"model:    {safe(model.name)}",
            f"mode:     {chat.mode}",
            f"permissions: {current_permission_mode(chat)}",
            f"session:  {chat.session_id or '- (new session with the next message)'}",
        ]
    )


async def _cancel(chat: ChatSession, args: list[str]) -> None:
    chat.note("no run is active (Ctrl-C cancels a reply while it runs)")


async def _exit(chat: ChatSession, args: list[str]) -> None:
    chat.quit = True


async def _image(chat: ChatSession, args: list[str]) -> None:
    """Attaches an image or PDF to the next message (checked when the message is sent)."""
    if not args:
        chat.printer.line("error: usage: /image <file> (an image or PDF for the next message)")
        return
    path = Path(" ".join(args)).expanduser()
    if not path.is_file():
        chat.printer.line(f"error: /image: no such file {safe(str(path))!r}")
        return
    chat.attachments.append(path)
    names = ", ".join(safe(p.name) for p in chat.attachments)
    chat.note(
        f"attached {names}: sent with your next message (the model needs them in [model] input_modalities)"
    )


async def _reasoning(chat: ChatSession, args: list[str]) -> None:
    chat.printer.show_reasoning()


COMMANDS: dict[str, Command] = {
    "/help": _help,
    "/new": _new,
    "/sessions": _sessions,
    "/use": _use,
    "/history": _history,
    "/branch": _branch,
    "/fork": _fork,
    "/rewind": rewind_command,
    "/mode": _mode,
    "/permissions": permissions_command,
    "/tasks": _tasks,
    "/team": team_command,
    "/mcp": mcp_command,
    "/usage": _usage,
    "/skills": _skills,
    "/config": _config,
    "/cancel": _cancel,
    "/image": _image,
    "/reasoning": _reasoning,
    "/exit": _exit,
    "/quit": _exit,
}

HELP = (
    ("/help", "this list"),
    ("/new", "start a new session with the next message"),
    ("/sessions [n]", "the n most recent sessions of this project (default 10)"),
    ("/use <session_id>", "continue another session"),
    ("/history", "messages of the active path, with their node ids"),
    ("/branch <node_id>", "make that node the active leaf (a unique start or end of the id is enough)"),
    ("/fork <node_id>", "copy the path to that node into a new session and switch to it (same id forms)"),
    ("/rewind [node]", "files and conversation back to a node (none: list them; + files|conversation: half)"),
    ("/mode normal|orchestrator", "mode of the next new session"),
    ("/mode <permission mode>", "default, accept_edits, plan, dont_ask or bypass: how the next runs ask"),
    ("/permissions [mode]", "show or set the permission mode only"),
    ("/tasks", "the Task board of this session"),
    ("/team", "this session's teammates: state and unread inbox entries"),
    (
        "/mcp [resources <server>]",
        "MCP prompts (/mcp:<server>:<prompt> args) and resources (@<server>:<uri>)",
    ),
    ("/usage", "tokens, cost and limits of this session"),
    ("/skills", "available skills"),
    ("/config", "resolved home, project, provider and model"),
    ("/cancel", "cancel the running reply (Ctrl-C does the same)"),
    ("/image <file>", "attach an image or PDF to your next message"),
    ("/reasoning", "the latest answer's reasoning in full (shown folded)"),
    ("/exit, /quit", "leave (also Ctrl-D)"),
)


async def run_command(chat: ChatSession, line: str) -> None:
    """Runs one slash command line; an unknown command prints a one-line error."""
    if line.startswith("/mcp:") and await prompt_command(chat, line):
        return
    name, *args = line.split()
    command = COMMANDS.get(name.lower())
    if command is None:
        chat.printer.line(f"error: unknown command {safe(name)!r} (type /help for the list)")
        return
    await command(chat, args)
