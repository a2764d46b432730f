"""Permission modes (issue 37 item 2): how a run's calls are decided beyond the policy table. Pure.

The mode of a run (``[permissions] mode``, ``AgentRuntime.start(..., permission_mode=...)``) is applied by
:func:`apply_mode` to the decision the policy and the permission rules made, before the session grants and
the callback; :func:`refuse_ask` turns what would still ask into a denial in ``dont_ask``:

* ``default``: nothing changes;
* ``accept_edits``: a ``code.write_file`` / ``code.edit_file`` call that asks only because it writes (inside
  the write roots, not on a sensitive, protected or credential path, no ``confirm`` rule) is allowed;
  commands and every other tool still ask;
* ``plan``: every tool that is not read-only is denied (the run is offered read-only tools only, see
  :func:`plan_tools`); read-only calls follow the policy;
* ``dont_ask``: a call that would ask (no rule, grant or policy allows it) is denied;
* ``bypass``: a call that would ask is allowed unless it touches a sensitive, protected or credential path,
  writes outside the write roots or a ``confirm`` rule asks for it; ``deny`` rules still deny. The runtime
  refuses the mode unless ``tools.sandbox = "bwrap"``.

Whatever the mode, a protected or credential path is never allowed without an explicit answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from agent_core.config.schema import Settings
from agent_core.errors import ErrorCode
from agent_core.permissions._policy import (
    REASON_OUTSIDE_ROOTS,
    REASON_SENSITIVE,
    REASON_WRITE,
    UNGRANTABLE,
    PolicyDecision,
)
from agent_core.permissions._rules import REASON_RULE_CONFIRM
from agent_core.types.permissions import PERMISSION_MODES, PermissionMode
from agent_core.types.tools import ToolDefinition

FILE_EDIT_TOOLS = frozenset({"code.write_file", "code.edit_file"})
"""The tools ``accept_edits`` allows without asking (inside the write roots)."""
_BYPASS_KEEPS_ASKING = frozenset({REASON_SENSITIVE, REASON_OUTSIDE_ROOTS, REASON_RULE_CONFIRM, *UNGRANTABLE})

MODE_TEXT: dict[PermissionMode, str] = {
    "default": "tool calls that write, run commands or touch sensitive paths ask the user first",
    "accept_edits": (
        "file writes and edits inside the write roots run without asking; commands and everything else "
        "still ask"
    ),
    "plan": (
        "plan mode: only read-only tools are available. Explore, then answer with a complete, concrete "
        "plan (the steps and the files to change) for the user to approve; change nothing now"
    ),
    "dont_ask": "nothing asks the user: a call that would need permission is denied; work with what is allowed",
    "bypass": (
        "calls run without asking, except on sensitive, protected or credential paths and writes outside "
        "the write roots (commands run in a sandbox)"
    ),
}
"""What each mode means, as the model is told (``permission_mode`` prompt block)."""


def check_mode(value: object) -> PermissionMode:
    """``value`` as a :data:`PermissionMode`; ``ValueError`` naming the modes otherwise."""
    for mode in PERMISSION_MODES:
        if value == mode:
            return mode
    raise ValueError(f"unknown permission mode {value!r} (one of {', '.join(PERMISSION_MODES)})")


def stored_permission_mode(run_metadata: Mapping[str, Any], settings: Settings) -> PermissionMode:
    """The mode recorded in a run row's metadata (``permission_mode``), else ``[permissions] mode``."""
    try:
        return check_mode(run_metadata.get("permission_mode"))
    except ValueError:
        return settings.permissions.mode


def mode_prompt_text(mode: PermissionMode) -> str:
    """The small ``<permission_mode>`` block the model gets for its run's mode (the default mode is only
    named: the permission prompt already says what asks)."""
    if mode == "default":
        return '<permission_mode mode="default"/>'
    return f'<permission_mode mode="{mode}">{MODE_TEXT[mode]}</permission_mode>'


def plan_tools(definitions: Iterable[ToolDefinition]) -> list[ToolDefinition]:
    """The tools a ``plan`` run is offered: the read-only ones (``agent.plan_template`` is one)."""
    return [d for d in definitions if d.permission == "readonly"]


def apply_mode(
    decision: PolicyDecision, mode: PermissionMode, tool: ToolDefinition
) -> tuple[PolicyDecision, bool]:
    """``decision`` under ``mode`` and whether the mode changed it (see module docstring); ``dont_ask``
    acts later (:func:`refuse_ask`), after the session grants."""
    if mode == "plan" and tool.permission != "readonly" and "internal" not in tool.tags:
        return (
            PolicyDecision(
                action="deny",
                reasons=(*decision.reasons, "permission_mode"),
                target_scope=decision.target_scope,
                deny_code=ErrorCode.permission_denied,
                message=(
                    f"tool '{tool.name}' changes things, and this run is in plan mode (read-only tools "
                    "only): finish with the plan; the user switches mode to carry it out"
                ),
            ),
            True,
        )
    if decision.action != "ask":
        return decision, False
    reasons = set(decision.reasons)
    if mode == "accept_edits" and tool.name in FILE_EDIT_TOOLS and reasons <= {REASON_WRITE}:
        return _allowed(decision), True
    if mode == "bypass" and not reasons & _BYPASS_KEEPS_ASKING:
        return _allowed(decision), True
    return decision, False


def refuse_ask(decision: PolicyDecision, tool: ToolDefinition) -> PolicyDecision:
    """The ``dont_ask`` denial of a call that would ask."""
    return PolicyDecision(
        action="deny",
        reasons=(*decision.reasons, "permission_mode"),
        target_scope=decision.target_scope,
        deny_code=ErrorCode.permission_denied,
        message=(
            f"tool '{tool.name}' needs permission ({', '.join(decision.reasons) or 'ask'}) and this run's "
            "permission mode is dont_ask: nothing is asked, so it is denied"
        ),
    )


def _allowed(decision: PolicyDecision) -> PolicyDecision:
    return PolicyDecision(action="allow", reasons=decision.reasons, target_scope=decision.target_scope)
