"""``[[permissions.rules]]`` and command session grants (issue 14 item 9)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from agent_core.config.schema import Settings
from agent_core.permissions._gate import PermissionGate
from agent_core.permissions._session_grants import session_prefix
from agent_core.tools.context import RunScope
from agent_core.tools.preflight import Preflight
from agent_core.types.tools import ToolDefinition
from tests.fixtures.tool_pipeline import PermissionRecorder
from tests.fixtures.tool_sink import make_scope

OBJ: dict[str, Any] = {"type": "object", "properties": {}}
RUN = ToolDefinition(
    name="code.run_command", description="d", input_schema=OBJ, permission="write", tags=["code", "dangerous"]
)
WRITE = ToolDefinition(
    name="code.write_file", description="d", input_schema=OBJ, permission="write", tags=["code", "write"]
)
READ = ToolDefinition(
    name="code.read_file", description="d", input_schema=OBJ, permission="readonly", tags=["code"]
)


def settings(*rules: dict[str, Any]) -> Settings:
    return Settings.model_validate(
        {"model": {"provider": "ollama", "name": "m"}, "permissions": {"rules": list(rules)}}
    )


@pytest.fixture
def scope(tmp_path: Path) -> RunScope:
    return make_scope(tmp_path, tmp_path)


async def run(gate: PermissionGate, scope: RunScope, argv: list[str], **facts: Any) -> Any:
    pre = Preflight(target_scope=f"{argv[0]} @ {scope.project_dir}", **facts)
    return await gate.check(tool=RUN, arguments={"argv": argv}, requester=scope, facts=pre)


async def test_argv_prefix_allow_skips_the_prompt(scope: RunScope) -> None:
    recorder = PermissionRecorder.always("deny")
    gate = PermissionGate(
        recorder,
        settings({"tool": "code.run_command", "argv_prefix": ["git", "status"], "decision": "allow"}),
    )
    outcome = await run(gate, scope, ["git", "status", "-s"])
    assert outcome.allowed and not outcome.asked and outcome.decided_by == "rule"
    assert outcome.rule == {
        "index": 0,
        "tool": "code.run_command",
        "argv_prefix": ["git", "status"],
        "decision": "allow",
    }
    assert not (await run(gate, scope, ["git", "push"])).allowed and len(recorder.requests) == 1
    # a model-chosen path to "git" is not the git on the allowlisted PATH
    assert not (await run(gate, scope, ["/tmp/evil/git", "status"])).allowed and len(recorder.requests) == 2


async def test_allow_rule_works_without_a_callback(scope: RunScope) -> None:
    gate = PermissionGate(
        None, settings({"tool": "code.run_command", "argv_prefix": ["make"], "decision": "allow"})
    )
    assert (await run(gate, scope, ["make", "test"])).allowed
    denied = await run(gate, scope, ["rm", "-rf", "x"])
    assert not denied.allowed and denied.decided_by == "policy"


async def test_deny_wins_over_allow(scope: RunScope) -> None:
    recorder = PermissionRecorder.always("allow_once")
    gate = PermissionGate(
        recorder,
        settings(
            {"tool": "code.*", "decision": "allow"},
            {"tool": "code.run_command", "argv_prefix": ["git", "push"], "decision": "deny"},
        ),
    )
    outcome = await run(gate, scope, ["git", "push", "--force"])
    assert not outcome.allowed and outcome.decided_by == "rule" and outcome.rule["index"] == 1
    assert "permission rule #2" in (outcome.reason or "") and recorder.requests == []


async def test_allow_rule_never_waives_sensitive_or_outside_roots(scope: RunScope, tmp_path: Path) -> None:
    recorder = PermissionRecorder.always("deny")
    gate = PermissionGate(recorder, settings({"tool": "code.*", "decision": "allow"}))
    pre = Preflight(target_scope=str(tmp_path / ".env"), target_paths=[tmp_path / ".env"], sensitive=True)
    outcome = await gate.check(tool=READ, arguments={"path": ".env"}, requester=scope, facts=pre)
    assert not outcome.allowed and outcome.asked and recorder.requests[0].suggested_decision == "deny"


async def test_path_rules_and_confirm(scope: RunScope, tmp_path: Path) -> None:
    recorder = PermissionRecorder.always("deny")
    gate = PermissionGate(
        recorder,
        settings(
            {"tool": "code.write_file", "path": "<project>/docs/*", "decision": "allow"},
            {"tool": "code.read_file", "path": "<project>/private/*", "decision": "confirm"},
        ),
    )
    doc = scope.project_dir / "docs" / "a.md"
    pre = Preflight(target_scope=str(doc), target_paths=[doc])
    assert (await gate.check(tool=WRITE, arguments={"path": "docs/a.md"}, requester=scope, facts=pre)).allowed
    other = scope.project_dir / "src" / "a.py"
    pre = Preflight(target_scope=str(other), target_paths=[other])
    assert not (
        await gate.check(tool=WRITE, arguments={"path": "src/a.py"}, requester=scope, facts=pre)
    ).allowed
    private = scope.project_dir / "private" / "n.txt"
    pre = Preflight(target_scope=str(private), target_paths=[private])
    outcome = await gate.check(tool=READ, arguments={"path": "private/n.txt"}, requester=scope, facts=pre)
    assert not outcome.allowed and outcome.asked and "rule_confirm" in outcome.reasons
    no_callback = PermissionGate(None, gate._settings)
    denied = await no_callback.check(
        tool=READ, arguments={"path": "private/n.txt"}, requester=scope, facts=pre
    )
    assert not denied.allowed and denied.decided_by == "rule"


async def test_session_grant_remembers_the_argv_prefix_not_the_executable(scope: RunScope) -> None:
    recorder = PermissionRecorder(["allow_for_session", "deny", "deny"])
    gate = PermissionGate(recorder, settings())
    assert (await run(gate, scope, ["python3", "x.py"])).allowed
    cached = await run(gate, scope, ["python3", "x.py", "--verbose"])
    assert cached.allowed and cached.decided_by == "session_grant"
    assert not (await run(gate, scope, ["python3", "-c", "import os; os.system('id')"])).allowed
    assert not (await run(gate, scope, ["python3", "y.py"])).allowed
    assert len(recorder.requests) == 3
    assert recorder.requests[0].metadata["session_argv_prefix"] == ["python3", "x.py"]


def test_session_prefix_and_rule_validation() -> None:
    assert session_prefix(["git", "status", "-s"]) == ["git", "status"]
    assert session_prefix(["python3", "-c", "x"]) == ["python3", "-c", "x"]
    assert session_prefix(["ls"]) == ["ls"]
    with pytest.raises(ValidationError):
        settings({"tool": "code.run_command", "argv_prefix": ["git"], "path": "x", "decision": "allow"})
    with pytest.raises(ValidationError):
        settings({"tool": "code.run_command", "decision": "always"})
