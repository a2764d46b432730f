"""The permission modes as ACP session modes (``availableModes`` / ``currentModeId`` / ``session/set_mode``).

Pure, apart from :func:`configured_modes`, which reads the project's configuration: the mode a new
session starts in is ``[permissions] mode``; ``bypass`` is offered only when the command sandbox is on
(``[tools] sandbox = "bwrap"``), as the runtime refuses it otherwise.
"""

from __future__ import annotations

from typing import get_args

from acp.schema import SessionMode, SessionModeState

from agent_core.types.permissions import PermissionMode

MODES: dict[PermissionMode, tuple[str, str]] = {
    "default": ("Default", "Asks before file writes, edits and commands"),
    "accept_edits": (
        "Accept edits",
        "Writes and edits files in the project without asking; commands still ask",
    ),
    "plan": ("Plan", "Read-only tools; ends with a plan for you to approve"),
    "dont_ask": ("Don't ask", "Denies whatever would ask"),
    "bypass": ("Bypass", "Allows everything but protected and sensitive paths (commands run sandboxed)"),
}
"""Each mode's name and description as the editor shows them."""


def mode_state(current: PermissionMode, *, sandboxed: bool) -> SessionModeState:
    """The modes offered (``bypass`` only with the sandbox) and the current one."""
    offered = [m for m in get_args(PermissionMode) if m != "bypass" or sandboxed]
    return SessionModeState(
        current_mode_id=current,
        available_modes=[SessionMode(id=m, name=MODES[m][0], description=MODES[m][1]) for m in offered],
    )


def parse_mode(value: str, *, sandboxed: bool) -> PermissionMode | None:
    """``value`` as an offered mode, else ``None``."""
    for mode in get_args(PermissionMode):
        if mode == value and (mode != "bypass" or sandboxed):
            return mode  # type: ignore[no-any-return]
    return None


def configured_modes(project_dir: str, home_dir: str) -> tuple[PermissionMode, bool]:
    """``([permissions] mode, whether the command sandbox is on)`` of the project's configuration."""
    from agent_core.config import load_config

    settings = load_config(home_dir=home_dir, project_dir=project_dir).settings
    return settings.permissions.mode, settings.tools.sandbox == "bwrap"
