"""The per-runtime permission gate (docs/permissions.md#session-grants, docs/permissions.md#denials,
docs/permissions.md#decisions).

:class:`PermissionGate` combines the pure :class:`PermissionPolicy` with the runtime state:

* the in-memory ``allow_for_session`` cache keyed by session and ``(canonical tool, target scope)``,
  plus, for a command, the :class:`~agent_core.permissions._session_grants.SessionGrant` (argv prefix or
  exact argv) that decides which later argv it covers; never persisted, dropped by
  :meth:`forget_session` / :meth:`clear`;
* the SDK callback, invoked one request at a time per runtime, each invocation bounded by a timeout
  (300 s by default). A timeout, an exception or a return value that does not validate as
  :class:`PermissionDecision` is a deny with ``details.permission_failure`` set;
* ``permissions.allow_for_session_enabled = false`` (or a call without target scope) downgrades an
  ``allow_for_session`` answer to ``allow_once``; a call on a protected path is never answered from the
  cache and its request lists the protected targets and why (``metadata.protected``);
* a command's request names the absolute executable it runs (``metadata.executable``).

Cancellation of the awaiting task abandons a pending request (the ``CancelledError`` propagates).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import ValidationError

from agent_core._ids import new_id
from agent_core._jsontext import compact_json
from agent_core._redaction import Redactor, default_redactor, redact_sensitive_keys
from agent_core.config.schema import Settings
from agent_core.errors import ErrorCode
from agent_core.permissions._deferred import DeferredAnswers, PermissionDeferral
from agent_core.permissions._modes import apply_mode, refuse_ask
from agent_core.permissions._policy import (
    UNGRANTABLE,
    CallFacts,
    PermissionPolicy,
    PolicyDecision,
    protected_of,
)
from agent_core.permissions._rules import REASON_RULE_CONFIRM, RuleSet, apply_rule, call_argv
from agent_core.permissions._session_grants import SessionGrant, session_grant
from agent_core.types.enums import AgentRole, PermissionDecisionKind
from agent_core.types.permissions import PermissionDecision, PermissionMode, PermissionRequest
from agent_core.types.tools import ToolDefinition

PermissionCallback = Callable[[PermissionRequest], Awaitable[PermissionDecision | PermissionDeferral]]
FailureKind = Literal["timeout", "exception", "invalid_decision"]


class CallbackFailure(Exception):
    """Raised by a callback that forwards requests to another runtime's callback (``agent_core.engine``)
    when that one failed: the gate reports ``kind`` and ``message`` as if its own callback had failed."""

    def __init__(self, kind: FailureKind, message: str) -> None:
        super().__init__(message)
        self.kind: FailureKind = kind
        self.message = message


class NoCallback(Exception):
    """Raised by a callback that forwards requests to another runtime's callback (``agent_core.engine``)
    when that runtime has none: the gate decides the call as it decides without a callback of its own
    (the policy's or the rule's denial, with its code and message)."""


DecidedBy = Literal["policy", "rule", "mode", "session_grant", "callback"]

DEFAULT_CALLBACK_TIMEOUT_S = 300.0
ARGS_SUMMARY_LIMIT = 500
ARGV_DISPLAY_LIMIT = 1 << 20
"""Upper bound of the uncut summary measured for ``metadata.args_length``."""
_ENV_MARKERS = ("<set>", "<unset>")


def facts_display(facts: CallFacts) -> dict[str, Any]:
    """``protected`` (each protected target, its class and why) and ``executable`` (the absolute file a
    command runs, ``Preflight.executable``) for a request's metadata and the audit."""
    shown: dict[str, Any] = {}
    protected = protected_of(facts)
    if protected:
        shown["protected"] = [p.describe() for p in protected]
    executable = getattr(facts, "executable", None)
    if executable is not None:
        shown["executable"] = str(executable)
    return shown


class Requester(Protocol):
    """The requesting run (``tools.context.RunScope`` satisfies it)."""

    @property
    def session_id(self) -> str: ...
    @property
    def agent_id(self) -> str: ...
    @property
    def run_id(self) -> str: ...
    @property
    def agent_role(self) -> AgentRole: ...
    @property
    def parent_agent_id(self) -> str | None: ...
    @property
    def parent_run_id(self) -> str | None: ...
    @property
    def project_dir(self) -> Path: ...


def mode_of(requester: Requester) -> PermissionMode:
    """The requester's permission mode (``default`` for a requester that has none)."""
    mode: PermissionMode = getattr(requester, "permission_mode", "default")
    return mode


def summarize_arguments(
    arguments: Any, redactor: Redactor | None = None, limit: int = ARGS_SUMMARY_LIMIT
) -> str:
    """Redacted single-line compact JSON of ``arguments``, at most ``limit`` characters."""
    r = redactor or default_redactor
    text = compact_json(redact_sensitive_keys(r.value(arguments)))
    text = r.text(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True, kw_only=True, slots=True)
class GateOutcome:
    """Result of one permission check."""

    allowed: bool
    decision: str
    """``allow`` (policy), ``allow_once``, ``allow_for_session`` or ``deny``."""
    asked: bool = False
    cached: bool = False
    reasons: tuple[str, ...] = ()
    target_scope: str | None = None
    request: PermissionRequest | None = None
    reason: str | None = None
    """Why the call was denied (callback reason or policy message)."""
    error_code: ErrorCode | None = None
    failure: FailureKind | None = None
    failure_message: str | None = None
    decided_by: DecidedBy = "policy"
    """Who decided (audit, issue 14 item 10): ``policy`` (the default table), ``rule`` (a
    ``[[permissions.rules]]`` entry), ``mode`` (the run's permission mode), ``session_grant`` (an earlier
    ``allow_for_session``) or ``callback``."""
    rule: dict[str, Any] | None = None
    """The matching permission rule (its index and fields), when one matched."""
    mode: PermissionMode = "default"
    """The run's permission mode when the call was decided (in every audit entry)."""

    def permission_outcome(self) -> dict[str, Any]:
        """The ``tool_started`` payload key ``permission_outcome``."""
        return {"asked": self.asked, "decision": self.decision, "cached": self.cached}

    def audit(self) -> dict[str, Any]:
        """The ``permission_audit`` payload key of ``tool_started`` / ``tool_denied`` (issue 14 item 10)."""
        return {
            "decided_by": self.decided_by,
            "decision": self.decision,
            "rule": self.rule,
            "reasons": list(self.reasons),
            "request_id": self.request.request_id if self.request is not None else None,
            "permission_mode": self.mode,
        }


@dataclass(frozen=True, slots=True)
class PendingAsk:
    """A call :meth:`PermissionGate.decide` left to the callback: what :meth:`PermissionGate.ask` needs."""

    tool: ToolDefinition
    arguments: Mapping[str, Any]
    requester: Requester
    facts: CallFacts
    decision: PolicyDecision
    rule: dict[str, Any] | None
    argv: list[str] | None
    grant: SessionGrant | None
    cached: GateOutcome


def coerce_decision(value: Any) -> PermissionDecision | None:
    """Validates a callback return value; ``None`` when it is not a valid :class:`PermissionDecision`."""
    try:
        if isinstance(value, PermissionDecision):
            return PermissionDecision.model_validate(value.model_dump())
        if isinstance(value, Mapping):
            return PermissionDecision.model_validate(dict(value))
    except ValidationError:
        return None
    return None


class PermissionGate:
    """One per runtime: session cache, serialised callback invocations, timeouts."""

    def __init__(
        self,
        callback: PermissionCallback | None,
        settings: Settings,
        *,
        timeout_s: float = DEFAULT_CALLBACK_TIMEOUT_S,
        redactor: Redactor | None = None,
    ) -> None:
        self._callback = callback
        self._settings = settings
        self._policy = PermissionPolicy.from_settings(settings)
        self._rules = RuleSet.from_settings(settings)
        self._timeout_s = timeout_s
        self._forwarding = False
        self._redactor = redactor or default_redactor
        self._lock = asyncio.Lock()
        self._session_grants: dict[str, set[tuple[str, str]]] = {}
        self._command_grants: dict[str, set[tuple[str, str, SessionGrant]]] = {}
        self.deferred: DeferredAnswers[PermissionDecision] = DeferredAnswers()
        """Requests whose callback returned ``DEFER`` (answered by ``AgentRuntime.answer_permission``)."""

    def use_callback(self, callback: PermissionCallback, *, forwarding: bool = False) -> None:
        """Replaces the callback (a Temporal worker asks the runtime that started the run). A
        ``forwarding`` callback gets no timeout here: the runtime it forwards to applies its own."""
        self._callback = callback
        self._forwarding = forwarding

    @property
    def has_callback(self) -> bool:
        return self._callback is not None

    @property
    def policy(self) -> PermissionPolicy:
        return self._policy

    # -- session cache ------------------------------------------------------------------------------

    def is_allowed_for_session(self, session_id: str, tool_name: str, target_scope: str | None) -> bool:
        if target_scope is None:
            return False
        return (tool_name, target_scope) in self._session_grants.get(session_id, set())

    def _granted(self, session_id: str, tool_name: str, scope: str | None, argv: list[str] | None) -> bool:
        """An ``allow_for_session`` grant covers this call; for a command, a grant for the same tool and
        scope whose :meth:`SessionGrant.covers` accepts the argv (never a longer argv that adds a dangerous
        option, a shell metacharacter or an outside path; never anything beyond an exact grant)."""
        if argv is None:
            return self.is_allowed_for_session(session_id, tool_name, scope)
        if scope is None:
            return False
        return any(
            name == tool_name and granted_scope == scope and grant.covers(argv)
            for name, granted_scope, grant in self._command_grants.get(session_id, set())
        )

    def forget_session(self, session_id: str) -> None:
        """Drops every ``allow_for_session`` grant of ``session_id``."""
        self._session_grants.pop(session_id, None)
        self._command_grants.pop(session_id, None)

    def clear(self) -> None:
        """Drops every grant (runtime close)."""
        self._session_grants.clear()
        self._command_grants.clear()

    # -- checking -----------------------------------------------------------------------------------

    def build_request(
        self,
        *,
        tool: ToolDefinition,
        arguments: Mapping[str, Any],
        requester: Requester,
        facts: CallFacts,
        hook_summary: dict[str, Any] | None,
        reasons: tuple[str, ...],
        target_scope: str | None,
        suggested: PermissionDecisionKind,
        allow_for_session_available: bool,
    ) -> PermissionRequest:
        role = requester.agent_role
        env = {str(k): (v if v in _ENV_MARKERS else "<set>") for k, v in facts.env_summary.items()}
        return PermissionRequest(
            request_id=new_id("perm_"),
            session_id=requester.session_id,
            agent_id=requester.agent_id,
            run_id=requester.run_id,
            parent_agent_id=requester.parent_agent_id,
            parent_run_id=requester.parent_run_id,
            agent_role=AgentRole(role),
            tool_name=tool.name,
            permission=tool.permission,
            tags=list(tool.tags),
            args_summary=summarize_arguments(dict(arguments), self._redactor),
            target_scope=target_scope,
            cwd=str(facts.cwd or requester.project_dir),
            env_summary=env,
            network_host=facts.network_host,
            dangerous="dangerous" in tool.tags,
            hook_summary=dict(hook_summary) if hook_summary is not None else None,
            suggested_decision=suggested,
            metadata={
                "reasons": list(reasons),
                "allow_for_session_available": allow_for_session_available,
                "permission_mode": mode_of(requester),
                **self._change_preview(facts),
                **self._argument_display(arguments),
                **facts_display(facts),
            },
        )

    def _argument_display(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """``args_length`` (characters of the uncut redacted summary, when ``args_summary`` was cut) and,
        for a command call, ``argv``: the whole redacted argv, for prompts to show wrapped (issue 14 item
        7)."""
        full = summarize_arguments(dict(arguments), self._redactor, limit=ARGV_DISPLAY_LIMIT)
        shown: dict[str, Any] = {"args_length": len(full)} if len(full) > ARGS_SUMMARY_LIMIT else {}
        argv = arguments.get("argv")
        if isinstance(argv, list) and all(isinstance(a, str) for a in argv):
            redacted = redact_sensitive_keys(self._redactor.value(list(argv)))
            shown["argv"] = [self._redactor.text(str(a)) for a in redacted]
        return shown

    def _change_preview(self, facts: CallFacts) -> dict[str, Any]:
        """``diff`` (redacted unified diff), ``diff_created``, ``diff_omitted_lines`` of a write/edit
        call whose pre-flight offers a lazy ``change_preview``; ``{}`` without one (or when it fails)."""
        preview_of = getattr(facts, "change_preview", None)
        if not callable(preview_of):
            return {}
        try:
            preview = preview_of()
        except Exception:  # a preview is a courtesy: never let it break the permission request
            return {}
        if preview is None:
            return {}
        return {
            "diff": self._redactor.text(preview.diff),
            "diff_created": preview.created,
            "diff_omitted_lines": preview.omitted_lines,
        }

    async def check(
        self,
        *,
        tool: ToolDefinition,
        arguments: Mapping[str, Any],
        requester: Requester,
        facts: CallFacts,
        hook_summary: dict[str, Any] | None = None,
        tool_call_id: str | None = None,
    ) -> GateOutcome:
        """Decides one call: policy and permission rules, then session cache, then (serialised) callback.

        A request shown to the callback carries ``metadata.tool_call_id`` (when given): the call it is for,
        which identifies the request again when the call is retried elsewhere (``agent_core.engine``)."""
        decided = self.decide(tool=tool, arguments=arguments, requester=requester, facts=facts)
        if isinstance(decided, GateOutcome):
            return decided
        return await self.ask(decided, hook_summary=hook_summary, tool_call_id=tool_call_id)

    def decide(
        self,
        *,
        tool: ToolDefinition,
        arguments: Mapping[str, Any],
        requester: Requester,
        facts: CallFacts,
        has_callback: bool | None = None,
    ) -> GateOutcome | PendingAsk:
        """The part of :meth:`check` that never waits: the outcome when policy, rules or a session grant
        decide, else the :class:`PendingAsk` to finish with :meth:`ask` (same outcome as :meth:`check`).
        ``has_callback=False``: decided as without a callback (an ``ask`` becomes the denial)."""
        has_callback = self.has_callback if has_callback is None else has_callback
        mode = mode_of(requester)
        decision = self._policy.decide(tool, facts, has_callback=True)
        match = self._rules.match(tool, arguments, facts, requester.project_dir)
        decision = apply_rule(decision, match, tool=tool.name, has_callback=has_callback)
        decision, by_mode = apply_mode(decision, mode, tool)
        if decision.action == "ask" and not has_callback and REASON_RULE_CONFIRM not in decision.reasons:
            decision = self._policy.decide(tool, facts, has_callback=False)
        by_rule: DecidedBy = "mode" if by_mode else "rule" if match is not None else "policy"
        rule = match.describe() if match is not None else None
        scope = decision.target_scope
        if decision.action == "allow":
            return GateOutcome(
                allowed=True, decision="allow", target_scope=scope, decided_by=by_rule, rule=rule, mode=mode
            )
        if decision.action == "deny":
            denied_by: DecidedBy = (
                "mode" if by_mode else "rule" if match is not None and match.decision != "allow" else "policy"
            )
            return GateOutcome(
                allowed=False,
                decision="deny",
                reasons=decision.reasons,
                target_scope=scope,
                reason=decision.message,
                error_code=decision.deny_code or ErrorCode.permission_denied,
                decided_by=denied_by,
                rule=rule,
                mode=mode,
            )
        argv = call_argv(arguments) if "argv" in arguments else None
        grant = session_grant(argv) if argv is not None else None
        cached = GateOutcome(
            allowed=True,
            decision=PermissionDecisionKind.allow_for_session.value,
            cached=True,
            reasons=decision.reasons,
            target_scope=scope,
            decided_by="session_grant",
            rule=rule,
            mode=mode,
        )
        if not set(decision.reasons) & UNGRANTABLE and self._granted(
            requester.session_id, tool.name, scope, argv
        ):
            return cached
        if mode == "dont_ask":
            refused = refuse_ask(decision, tool)
            return GateOutcome(
                allowed=False,
                decision="deny",
                reasons=refused.reasons,
                target_scope=scope,
                reason=refused.message,
                error_code=ErrorCode.permission_denied,
                decided_by="mode",
                rule=rule,
                mode=mode,
            )
        return PendingAsk(tool, arguments, requester, facts, decision, rule, argv, grant, cached)

    async def ask(
        self,
        pending: PendingAsk,
        *,
        hook_summary: dict[str, Any] | None = None,
        tool_call_id: str | None = None,
    ) -> GateOutcome:
        """Finishes :meth:`check` for a call :meth:`decide` could not decide: asks the callback (serialised;
        a session grant made meanwhile answers without asking)."""
        tool, arguments, requester, facts = pending.tool, pending.arguments, pending.requester, pending.facts
        decision, rule, argv, grant, cached = (
            pending.decision,
            pending.rule,
            pending.argv,
            pending.grant,
            pending.cached,
        )
        scope = decision.target_scope
        async with self._lock:
            if not set(decision.reasons) & UNGRANTABLE and self._granted(
                requester.session_id, tool.name, scope, argv
            ):
                return cached
            request = self.build_request(
                tool=tool,
                arguments=arguments,
                requester=requester,
                facts=facts,
                hook_summary=hook_summary,
                reasons=decision.reasons,
                target_scope=scope,
                suggested=decision.suggested_decision,
                allow_for_session_available=decision.allow_for_session_available,
            )
            if tool_call_id is not None:
                request.metadata["tool_call_id"] = tool_call_id
            if grant is not None:  # shown in the prompt: what "allow for session" would remember
                request.metadata["session_argv_prefix"] = [self._redactor.text(a) for a in grant.prefix]
                request.metadata["session_argv_exact"] = grant.exact
                request.metadata["session_grant_covers"] = grant.describe()
            try:
                answer, failure, failure_message = await self._ask(request)
            except NoCallback as exc:  # the runtime asked has none: decided as without one here
                outcome = self.decide(
                    tool=tool, arguments=arguments, requester=requester, facts=facts, has_callback=False
                )
                if isinstance(outcome, GateOutcome):
                    return outcome
                answer, failure, failure_message = None, None, str(exc)
            if answer is None or answer.decision == "deny":
                if answer is not None:
                    reason = (
                        self._redactor.text(answer.reason)
                        if answer.reason
                        else "denied by the permission callback"
                    )
                else:
                    reason = failure_message
                return GateOutcome(
                    allowed=False,
                    decision="deny",
                    asked=True,
                    reasons=decision.reasons,
                    target_scope=scope,
                    request=request,
                    reason=reason,
                    error_code=ErrorCode.permission_denied,
                    failure=failure,
                    failure_message=failure_message if failure else None,
                    decided_by="callback",
                    rule=rule,
                    mode=mode_of(requester),
                )
            granted = answer.decision
            if granted == "allow_for_session":
                if decision.allow_for_session_available and scope is not None:
                    if grant is not None:
                        grants = self._command_grants.setdefault(requester.session_id, set())
                        grants.add((tool.name, scope, grant))
                    else:
                        self._session_grants.setdefault(requester.session_id, set()).add((tool.name, scope))
                else:
                    granted = "allow_once"
            return GateOutcome(
                allowed=True,
                decision=granted,
                asked=True,
                reasons=decision.reasons,
                target_scope=scope,
                request=request,
                decided_by="callback",
                rule=rule,
                mode=mode_of(requester),
            )

    async def ask_callback(
        self, request: PermissionRequest
    ) -> tuple[PermissionDecision | None, FailureKind | None, str]:
        """Asks this gate's callback about a request decided elsewhere (``agent_core.engine``): the answer,
        else ``None`` with the failure kind and message (timeout, exception, invalid decision)."""
        if self._callback is None:
            return None, None, "no permission callback"
        return await self._ask(request)

    async def _ask(
        self, request: PermissionRequest
    ) -> tuple[PermissionDecision | None, FailureKind | None, str]:
        """Invokes the callback with a copy of ``request`` (the callback cannot patch anything).

        A callback returning ``DEFER`` waits (no timeout) for ``answer_permission`` (permissions.deferred).
        """
        deferred = self.deferred.open(request.request_id)
        try:
            try:
                async with asyncio.timeout(None if self._forwarding else self._timeout_s):
                    raw = await self._invoke(request.model_copy(deep=True))
            except TimeoutError:
                return None, "timeout", f"the permission callback did not answer within {self._timeout_s:g} s"
            except CallbackFailure as failure:  # the runtime a forwarding callback asked failed
                return None, failure.kind, failure.message
            except NoCallback:
                raise
            except Exception as exc:
                message = self._redactor.text(f"the permission callback raised {type(exc).__name__}: {exc}")
                return None, "exception", message
            if isinstance(raw, PermissionDeferral):
                raw = await deferred
        finally:
            self.deferred.discard(request.request_id)
        answer = coerce_decision(raw)
        if answer is None:
            return (
                None,
                "invalid_decision",
                f"the permission callback returned an invalid decision ({type(raw).__name__})",
            )
        return answer, None, ""

    async def _invoke(self, request: PermissionRequest) -> Any:
        assert self._callback is not None
        result: Any = self._callback(request)
        if inspect.isawaitable(result):
            result = await result
        return result
