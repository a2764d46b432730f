"""PermissionGate: session cache, serialised callbacks, failures, request construction
(docs/permissions.md)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from agent_core._redaction import Redactor
from agent_core.permissions._gate import PermissionGate, coerce_decision, summarize_arguments
from agent_core.tools.context import RunScope
from agent_core.tools.preflight import Preflight
from agent_core.types.enums import AgentRole
from agent_core.types.permissions import PermissionDecision, PermissionRequest
from agent_core.types.tools import ToolDefinition
from tests.fixtures.tool_pipeline import PermissionRecorder, make_settings
from tests.fixtures.tool_sink import make_scope

OBJ: dict[str, Any] = {"type": "object", "properties": {}}
WRITE = ToolDefinition(
    name="code.write_file", description="d", input_schema=OBJ, permission="write", tags=["code", "write"]
)
EDIT = ToolDefinition(
    name="code.edit_file", description="d", input_schema=OBJ, permission="write", tags=["code", "write"]
)
RUN = ToolDefinition(
    name="code.run_command", description="d", input_schema=OBJ, permission="write", tags=["code", "dangerous"]
)
READ = ToolDefinition(
    name="code.read_file", description="d", input_schema=OBJ, permission="readonly", tags=["code"]
)


@pytest.fixture
def scope(tmp_path: Path) -> RunScope:
    return make_scope(tmp_path, tmp_path)


def facts(target: str | None) -> Preflight:
    return Preflight(target_scope=target)


async def check(
    gate: PermissionGate,
    scope: RunScope,
    tool: ToolDefinition = WRITE,
    target: str | None = "/p/a",
    **kw: Any,
) -> Any:
    return await gate.check(
        tool=tool,
        arguments=kw.pop("arguments", {"path": "a"}),
        requester=scope,
        facts=kw.pop("facts", facts(target)),
        **kw,
    )


def test_decision_enum() -> None:
    """Case H10."""
    for value in ("allow_once", "allow_for_session", "deny"):
        decision = PermissionDecision(decision=value)  # type: ignore[arg-type]
        assert decision.reason is None and decision.metadata == {}
    for bad in ("always_allow", "deny_for_session", "allow"):
        with pytest.raises(ValidationError):
            PermissionDecision(decision=bad)  # type: ignore[arg-type]


async def test_allow_once_asks_every_time(scope: RunScope) -> None:
    """Case H3."""
    recorder = PermissionRecorder(["allow_once", "allow_once"])
    gate = PermissionGate(recorder, make_settings())
    first, second = await check(gate, scope), await check(gate, scope)
    assert first.allowed and second.allowed and not second.cached
    assert len(recorder.requests) == 2
    assert first.permission_outcome() == {"asked": True, "decision": "allow_once", "cached": False}


async def test_allow_for_session_is_scoped_by_tool_and_target(scope: RunScope) -> None:
    """Cases H4, H11."""
    recorder = PermissionRecorder(["allow_for_session", "allow_once", "allow_once"])
    gate = PermissionGate(recorder, make_settings())
    assert (await check(gate, scope, target="/p/a/x.txt")).decision == "allow_for_session"
    cached = await check(gate, scope, target="/p/a/x.txt")
    assert cached.allowed and cached.cached and not cached.asked
    assert cached.permission_outcome() == {"asked": False, "decision": "allow_for_session", "cached": True}
    await check(gate, scope, target="/p/b/x.txt")  # other target asks
    await check(gate, scope, tool=EDIT, target="/p/a/x.txt")  # other tool asks
    assert [r.target_scope for r in recorder.requests] == ["/p/a/x.txt", "/p/b/x.txt", "/p/a/x.txt"]


async def test_run_command_scope(scope: RunScope) -> None:
    """Case H12."""
    recorder = PermissionRecorder(["allow_for_session", "allow_once", "allow_once"])
    gate = PermissionGate(recorder, make_settings())
    await check(gate, scope, tool=RUN, target="/usr/bin/python @ /p")
    assert (await check(gate, scope, tool=RUN, target="/usr/bin/python @ /p")).cached
    assert not (await check(gate, scope, tool=RUN, target="/usr/bin/git @ /p")).cached
    assert not (await check(gate, scope, tool=RUN, target="/usr/bin/python @ /p/sub")).cached
    assert len(recorder.requests) == 3


async def test_deny_is_not_remembered(scope: RunScope) -> None:
    """Case H13."""
    recorder = PermissionRecorder([PermissionDecision(decision="deny", reason="no"), "allow_once"])
    gate = PermissionGate(recorder, make_settings())
    denied = await check(gate, scope)
    assert not denied.allowed and denied.reason == "no" and denied.failure is None
    assert (await check(gate, scope)).allowed
    assert len(recorder.requests) == 2


async def test_grants_are_per_session_and_forgotten(tmp_path: Path) -> None:
    """Case H5."""
    a, b = make_scope(tmp_path, tmp_path), make_scope(tmp_path, tmp_path)
    recorder = PermissionRecorder.always("allow_for_session")
    gate = PermissionGate(recorder, make_settings())
    await check(gate, a)
    assert (await check(gate, a)).cached
    assert not (await check(gate, b)).cached  # another session never sees it
    gate.forget_session(a.session_id)
    assert not (await check(gate, a)).cached
    fresh = PermissionGate(recorder, make_settings())  # a new runtime: nothing persisted
    assert not (await check(fresh, a)).cached
    gate.clear()
    assert not gate.is_allowed_for_session(b.session_id, "code.write_file", "/p/a")


async def test_allow_for_session_downgrades(scope: RunScope) -> None:
    recorder = PermissionRecorder.always("allow_for_session")
    gate = PermissionGate(recorder, make_settings())
    unscoped = await check(gate, scope, target=None)
    assert unscoped.decision == "allow_once"
    assert recorder.requests[0].metadata["allow_for_session_available"] is False
    await check(gate, scope, target=None)
    assert len(recorder.requests) == 2
    disabled = PermissionGate(recorder, make_settings(permissions={"allow_for_session_enabled": False}))
    assert (await check(disabled, scope)).decision == "allow_once"
    assert not (await check(disabled, scope)).cached


@pytest.mark.parametrize(
    ("decision", "failure"),
    [
        (RuntimeError("boom"), "exception"),
        ("not a decision object", "invalid_decision"),
        ({"decision": "always_allow"}, "invalid_decision"),
        (None, "invalid_decision"),
    ],
)
async def test_callback_failures_deny(scope: RunScope, decision: Any, failure: str) -> None:
    """Case H17."""

    async def callback(_request: PermissionRequest) -> Any:
        if isinstance(decision, BaseException):
            raise decision
        return decision

    outcome = await check(PermissionGate(callback, make_settings()), scope)
    assert not outcome.allowed and outcome.failure == failure
    assert outcome.request is not None and outcome.asked


async def test_callback_timeout_denies(scope: RunScope) -> None:
    recorder = PermissionRecorder(["allow_once"], delay=5)
    gate = PermissionGate(recorder, make_settings(), timeout_s=0.05)
    outcome = await asyncio.wait_for(check(gate, scope), 2)
    assert not outcome.allowed and outcome.failure == "timeout"
    assert outcome.failure_message and "0.05" in outcome.failure_message


def test_coerce_decision() -> None:
    assert coerce_decision({"decision": "deny", "reason": "r"}) == PermissionDecision(
        decision="deny", reason="r"
    )
    mutated = PermissionDecision(decision="allow_once")
    mutated.decision = "always_allow"  # type: ignore[assignment]
    assert coerce_decision(mutated) is None
    assert coerce_decision("allow_once") is None


async def test_sync_callbacks_are_accepted(scope: RunScope) -> None:
    gate = PermissionGate(lambda _r: PermissionDecision(decision="allow_once"), make_settings())  # type: ignore[arg-type,return-value]
    assert (await check(gate, scope)).allowed


async def test_callbacks_never_run_concurrently(scope: RunScope) -> None:
    recorder = PermissionRecorder.always("allow_once")
    recorder.delay = 0.05
    gate = PermissionGate(recorder, make_settings())
    outcomes = await asyncio.gather(*(check(gate, scope, target=f"/p/{i}") for i in range(4)))
    assert all(o.allowed for o in outcomes)
    assert recorder.max_active == 1 and len(recorder.requests) == 4


async def test_parallel_same_scope_asks_once_after_allow_for_session(scope: RunScope) -> None:
    recorder = PermissionRecorder.always("allow_for_session")
    recorder.delay = 0.02
    gate = PermissionGate(recorder, make_settings())
    outcomes = await asyncio.gather(*(check(gate, scope) for _ in range(3)))
    assert len(recorder.requests) == 1
    assert sum(o.cached for o in outcomes) == 2


async def test_cancellation_abandons_pending_request(scope: RunScope) -> None:
    started = asyncio.Event()

    async def slow(_request: PermissionRequest) -> PermissionDecision:
        started.set()
        await asyncio.sleep(10)
        return PermissionDecision(decision="allow_once")

    gate = PermissionGate(slow, make_settings())
    task = asyncio.create_task(check(gate, scope))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    quick = PermissionGate(PermissionRecorder.always("allow_once"), make_settings())
    gate._callback = quick._callback  # the lock was released: a later request proceeds
    assert (await asyncio.wait_for(check(gate, scope), 1)).allowed


async def test_request_fields(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Case H18."""
    secret = "sk-live-very-secret-1234"
    redactor = Redactor(["SERVICE_TOKEN"], environ={"SERVICE_TOKEN": secret})
    child = make_scope(
        tmp_path, tmp_path, role=AgentRole.sub, parent_agent_id="agent_parent", parent_run_id="run_parent"
    )
    recorder = PermissionRecorder.always("allow_once")
    gate = PermissionGate(recorder, make_settings(), redactor=redactor)
    preflight = Preflight(
        target_scope=f"/usr/bin/python @ {tmp_path}",
        cwd=tmp_path / "work",
        env_summary={"PATH": "<set>", "TMPDIR": "<unset>", "LEAKY": secret},
    )
    args = {"argv": ["python", "-c", f"print('{secret}')", "x" * 900], "api_key": "plain-value"}
    await gate.check(
        tool=RUN,
        arguments=args,
        requester=child,
        facts=preflight,
        hook_summary={"decision": "allow", "reasons": [], "hook_count": 1},
    )
    req = recorder.requests[0]
    assert req.request_id.startswith("perm_")
    assert (req.session_id, req.agent_id, req.run_id) == (child.session_id, child.agent_id, child.run_id)
    assert (req.parent_agent_id, req.parent_run_id, req.agent_role) == ("agent_parent", "run_parent", "sub")
    assert (req.tool_name, req.permission, req.dangerous) == ("code.run_command", "write", True)
    assert "dangerous" in req.tags
    assert req.target_scope == f"/usr/bin/python @ {tmp_path}"
    assert req.cwd == str(tmp_path / "work")
    assert req.env_summary == {"PATH": "<set>", "TMPDIR": "<unset>", "LEAKY": "<set>"}
    assert len(req.args_summary) <= 500 and "\n" not in req.args_summary
    assert secret not in req.model_dump_json() and "plain-value" not in req.args_summary
    assert req.hook_summary == {"decision": "allow", "reasons": [], "hook_count": 1}
    assert req.suggested_decision == "allow_once"
    shown = {"argv", "args_length", "session_argv_prefix", "session_argv_exact", "session_grant_covers"}
    assert {k: v for k, v in req.metadata.items() if k not in shown} == {
        "reasons": ["write", "dangerous"],
        "allow_for_session_available": True,
        "permission_mode": "default",
    }
    assert req.metadata["args_length"] > 500 and req.metadata["argv"][3] == "x" * 900
    assert secret not in str(req.metadata["argv"])
    assert req.network_host is None


async def test_main_request_defaults_and_cwd(scope: RunScope) -> None:
    recorder = PermissionRecorder.always("allow_once")
    await check(PermissionGate(recorder, make_settings()), scope)
    req = recorder.requests[0]
    assert req.parent_agent_id is None and req.parent_run_id is None and req.agent_role == "main"
    assert req.cwd == str(scope.project_dir) and req.env_summary == {} and req.hook_summary is None


def test_summarize_arguments() -> None:
    assert summarize_arguments({"a": "x\ny"}) == '{"a":"x\\ny"}'
    long = summarize_arguments({"a": "z" * 1000})
    assert len(long) == 500 and long.endswith("...")
