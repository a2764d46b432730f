"""``soong-agent audit <run_id|session_id>``: why each tool call of a past run was allowed or denied.

Reads the persisted events (``tool_started`` / ``tool_denied`` carry ``permission_audit``: who decided —
``policy``, ``rule``, ``mode``, ``session_grant``, ``callback`` or ``hook`` — the run's permission mode, the
decision, the matching
``[[permissions.rules]]`` entry, the reasons for asking and the request id; ``tool_failed`` before the
gate means the call was never checked). One block per executed tool call (``<run_id> #<n>``: keyed by run
and sequence, so calls sharing a provider id stay apart), in call order, on stdout; every stored string is
escaped for the terminal. Exit status 0, or 1 when the id is unknown.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any, TextIO

from agent_core.cli._terminal import Output, error_text, escape_terminal

if TYPE_CHECKING:
    from agent_core.types.runtime import ReplayResult, RuntimeEvent

EXIT_OK, EXIT_FAILED = 0, 1
_GATE_EVENTS = ("tool_started", "tool_denied", "tool_failed", "tool_completed")


def _rule_text(rule: dict[str, Any] | None) -> str:
    if not rule:
        return ""
    matcher = ""
    if rule.get("argv_prefix"):
        matcher = f" argv_prefix={json.dumps(rule['argv_prefix'], ensure_ascii=False)}"
    elif rule.get("path"):
        matcher = f" path={rule['path']!r}"
    return f"rule #{int(rule.get('index', 0)) + 1} (tool={rule.get('tool')!r}{matcher} decision={rule.get('decision')})"


def explain(audit: dict[str, Any] | None, *, allowed: bool, reason: str | None = None) -> str:
    """One line: the verdict, who decided and why."""
    verdict = "allowed" if allowed else "denied"
    if not audit:
        return f"{verdict} (no permission record)"
    by = str(audit.get("decided_by") or "policy")
    decision = str(audit.get("decision") or "")
    parts = [verdict]
    if by == "rule":
        parts.append(f"by {_rule_text(audit.get('rule'))}")
    elif by == "session_grant":
        parts.append("by an earlier 'allow for session' grant")
    elif by == "callback":
        parts.append(f"by the permission callback ({decision.replace('_', ' ')})")
        if audit.get("request_id"):
            parts.append(f"request {audit['request_id']}")
    elif by == "hook":
        parts.append("by a PreToolUse hook")
    elif by == "mode":
        parts.append(f"by the permission mode {audit.get('permission_mode')}")
    else:
        parts.append("by the default policy" + (" (no prompt needed)" if allowed else ""))
    if by != "mode" and audit.get("permission_mode") not in (None, "default"):
        parts.append(f"mode {audit['permission_mode']}")
    if by != "rule" and audit.get("rule"):
        parts.append(f"matching {_rule_text(audit.get('rule'))}")
    reasons = audit.get("reasons") or []
    if reasons:
        parts.append("asked because: " + ", ".join(str(r) for r in reasons))
    rewritten = audit.get("arguments_rewritten_by")
    if isinstance(rewritten, list) and rewritten:
        parts.append("arguments replaced by the PreToolUse hook(s) " + ", ".join(str(n) for n in rewritten))
    if audit.get("executable"):
        parts.append(f"executable {audit['executable']}")
    protected = audit.get("protected")
    if isinstance(protected, list) and protected:
        paths = ", ".join(str(p.get("path")) for p in protected if isinstance(p, dict))
        parts.append(f"protected: {paths}")
    if reason and not allowed:
        parts.append(f"reason: {reason}")
    return "; ".join(parts)


def executed_calls(replay: ReplayResult) -> list[tuple[str, int, str, list[RuntimeEvent]]]:
    """Every tool call of ``replay`` as ``(run_id, n, tool_call_id, events)``, ``n`` its 1-based position
    among the run's calls. Keyed by run and sequence, not by the provider's id: a call starts with its
    ``tool_started`` / ``tool_denied`` (or a ``tool_failed`` that no started call is waiting for), so a
    model reusing one id for several calls still gets one entry per call (issue 31 item 9)."""
    calls: list[tuple[str, int, str, list[RuntimeEvent]]] = []
    open_calls: dict[tuple[str, str], list[RuntimeEvent]] = {}
    per_run: dict[str, int] = {}
    for event in replay.events:
        kind = event.event_type.value
        if not event.tool_call_id or kind not in _GATE_EVENTS:
            continue
        run_id = event.run_id or ""
        key = (run_id, event.tool_call_id)
        current = open_calls.get(key)
        waiting = current is not None and current[-1].event_type.value == "tool_started"
        if kind in ("tool_completed", "tool_failed") and waiting and current is not None:
            current.append(event)
            continue
        per_run[run_id] = per_run.get(run_id, 0) + 1
        events = [event]
        open_calls[key] = events
        calls.append((run_id, per_run[run_id], event.tool_call_id, events))
    return calls


def describe(replay: ReplayResult) -> list[str]:
    """The audit lines of every executed tool call in ``replay`` (call order, one entry per call)."""
    lines: list[str] = []
    for run_id, n, call_id, events in executed_calls(replay):
        by_type = {e.event_type.value: e.payload for e in events}
        first = events[0].payload
        tool = str(first.get("tool_name") or "?")
        args = str(by_type.get("tool_started", {}).get("args_summary") or "")
        lines.append(f"{run_id} #{n}  {call_id}  {tool}  {args}".rstrip())
        if "tool_started" in by_type:
            started = by_type["tool_started"]
            lines.append("    " + explain(started.get("permission_audit"), allowed=True))
        elif "tool_denied" in by_type:
            denied = by_type["tool_denied"]
            audit = denied.get("permission_audit")
            lines.append("    " + explain(audit, allowed=False, reason=str(denied.get("reason") or "")))
        else:
            error = by_type.get("tool_failed", {}).get("error") or {}
            lines.append(f"    not checked: failed before the permission gate ({error.get('code', 'error')})")
    return [escape_terminal(line) for line in lines]


async def audit_command(args: argparse.Namespace, out: Output, err: Output, stdin: TextIO | None) -> int:
    from agent_core import AgentRuntime
    from agent_core.errors import AgentCoreError

    target = str(args.id)
    try:
        async with AgentRuntime(project_dir=args.path) as runtime:
            if target.startswith("run_"):
                replay = await runtime.replay_run(target)
            else:
                replay = await runtime.replay_session(target)
    except AgentCoreError as exc:
        err.write(error_text(exc))
        return EXIT_FAILED
    header = f"session {replay.session_id}" + (f", run {replay.run_id}" if replay.run_id else "")
    lines = describe(replay)
    out.write(
        escape_terminal(header) + f": {sum(1 for ln in lines if not ln.startswith('    '))} tool call(s)\n"
    )
    for line in lines:
        out.write(line + "\n")
    return EXIT_OK
