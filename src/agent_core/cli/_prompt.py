"""Permission prompts on the terminal (docs/cli.md#run, docs/cli.md): the text and the stdin answers."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from agent_core.cli._diff import render_diff
from agent_core.cli._terminal import escape_terminal

if TYPE_CHECKING:
    from agent_core.types.permissions import PermissionRequest

STDIN_TIMEOUT_S = 120.0
WRAP_WIDTH = 110
ARGV_SHOWN_LIMIT = 20_000
"""Characters of a command's argv shown in a prompt; beyond it the prompt says how long it is."""
SESSION_EXTENSION_NOTE = (
    "(adding an option that runs code, writes or sends data, a shell metacharacter or a path outside "
    "the cwd asks again)"
)

_ANSWERS = {
    "1": "allow_once",
    "allow once": "allow_once",
    "2": "allow_for_session",
    "allow for session": "allow_for_session",
    "3": "deny",
    "deny": "deny",
}


_WORDS = {
    "y": "allow_once",
    "yes": "allow_once",
    "allow": "allow_once",
    "once": "allow_once",
    "a": "allow_for_session",
    "always": "allow_for_session",
    "session": "allow_for_session",
    "n": "deny",
    "no": "deny",
}
"""The extra words ``chat`` accepts on a terminal (``run`` keeps the strict set)."""

VALID_ANSWERS = "1/allow once, 2/allow for session, 3/deny"
VALID_WORDS = "y/yes = allow once, a/always = allow for session, n/no = deny"


def recognised_answer(line: str | None, *, words: bool = False) -> str | None:
    """The decision ``line`` names (``1``/``allow once``, ``2``/``allow for session``, ``3``/``deny``;
    trimmed, case-insensitive; with ``words`` also yes/no-style words), else ``None``."""
    if line is None:
        return None
    key = " ".join(line.strip().lower().split())
    return _ANSWERS.get(key) or (_WORDS.get(key) if words else None)


def parse_permission_answer(line: str | None) -> str:
    """Maps one stdin answer to a decision; EOF (``None``), empty or any other input → ``deny``."""
    return recognised_answer(line) or "deny"


def describe_request(request: PermissionRequest, *, color: bool = False) -> str:
    """The permission prompt text (docs/cli.md): everything the user needs to decide; a write/edit
    request also shows the diff it would apply (``cli._diff``; ANSI colours with ``color``).

    Every model-, tool- or file-derived value is passed through :func:`escape_terminal` (a ``\\r`` or an
    ESC sequence in a path cannot redraw the lines above it); a command's argv is shown in full, wrapped,
    and a cut argument summary says how long it was (issue 14 items 6, 7)."""
    e = escape_terminal
    agent = f"{e(request.agent_role)} agent {e(request.agent_id)} (run {e(request.run_id)})"
    lines = [
        f"Permission requested by the {agent}",
        f"  tool:       {e(request.tool_name)}",
        f"  permission: {e(request.permission)}    dangerous: {'yes' if request.dangerous else 'no'}",
        f"  tags:       {e(', '.join(request.tags)) or '-'}",
        *_arguments(request),
        *_wrapped("  target:     ", e(request.target_scope or "-")),
        *_wrapped("  cwd:        ", e(request.cwd)),
        *_facts(request),
    ]
    if request.network_host:
        lines.append(f"  network:    {e(request.network_host)}")
    if request.parent_agent_id or request.parent_run_id:
        lines.append(
            f"  parent:     agent {e(request.parent_agent_id or '-')}, run {e(request.parent_run_id or '-')}"
        )
    if request.hook_summary:
        lines += _wrapped("  hooks:      ", e(str(request.hook_summary)))
    lines += render_diff(request, color=color)
    lines.append(f"  suggested:  {request.suggested_decision.value.replace('_', ' ')}")
    prefix = request.metadata.get("session_argv_prefix")
    if isinstance(prefix, list) and request.metadata.get("allow_for_session_available") is not False:
        shown = " ".join(escape_terminal(json.dumps(str(a), ensure_ascii=False)) for a in prefix)
        if request.metadata.get("session_argv_exact") is True:
            lines += _wrapped("  session:    [2] remembers exactly ", shown[:ARGV_SHOWN_LIMIT])
        else:
            lines += _wrapped("  session:    [2] remembers commands starting with ", shown[:ARGV_SHOWN_LIMIT])
            lines.append(f"              {SESSION_EXTENSION_NOTE}")
    choices = "  [1] allow once   [2] allow for session   [3] deny"
    if request.metadata.get("protected"):
        choices += "   (protected path: never remembered, 2 acts as allow once)"
    elif request.metadata.get("allow_for_session_available") is False:
        choices += "   (no scope to remember: 2 acts as allow once)"
    lines += [choices, "Answer [1/2/3]: "]
    return "\n".join(lines)


def _facts(request: PermissionRequest) -> list[str]:
    """The absolute executable a command runs and each protected target with why it is protected."""
    lines: list[str] = []
    executable = request.metadata.get("executable")
    if isinstance(executable, str):
        lines += _wrapped("  executable: ", escape_terminal(executable))
    protected = request.metadata.get("protected")
    for entry in protected if isinstance(protected, list) else []:
        if isinstance(entry, dict):
            lines += _wrapped("  PROTECTED:  ", escape_terminal(str(entry.get("why"))))
            lines += _wrapped("              ", escape_terminal(str(entry.get("path"))))
    return lines


def _wrapped(label: str, text: str) -> list[str]:
    """``label`` + ``text`` hard-wrapped at :data:`WRAP_WIDTH` columns, continuation lines indented."""
    room = max(WRAP_WIDTH - len(label), 20)
    if len(text) <= room:
        return [label + text]
    pad = " " * len(label)
    return [(label if i == 0 else pad) + text[i : i + room] for i in range(0, len(text), room)]


def _arguments(request: PermissionRequest) -> list[str]:
    argv = request.metadata.get("argv")
    if isinstance(argv, list) and all(isinstance(a, str) for a in argv):
        shown = " ".join(escape_terminal(json.dumps(a, ensure_ascii=False)) for a in argv)
        lines = _wrapped("  argv:       ", shown[:ARGV_SHOWN_LIMIT])
        if len(shown) > ARGV_SHOWN_LIMIT:
            lines.append(f"              [argv cut: {ARGV_SHOWN_LIMIT} of {len(shown)} characters shown]")
        return lines
    summary = escape_terminal(request.args_summary)
    lines = _wrapped("  arguments:  ", summary)
    total = request.metadata.get("args_length")
    if isinstance(total, int) and total > len(request.args_summary):
        lines.append(
            f"              [arguments cut: {len(request.args_summary)} of {total} characters shown]"
        )
    return lines
