"""``soong-agent audit`` (issue 14 item 10): every permission decision of a past run, who made it and the
matching rule, printed from the stored events."""

from __future__ import annotations

from pathlib import Path

from agent_core import PermissionDecision, PermissionRequest, RunStatus
from tests.fixtures.cli import run_cli
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, text, tool_calls
from tests.fixtures.runtime import collect, open_runtime

RULES = [
    {"tool": "code.run_command", "argv_prefix": ["true"], "decision": "allow"},
    {"tool": "code.write_file", "path": "<project>/locked/*", "decision": "deny"},
]


async def test_audit_explains_each_decision(soong_env: SoongEnv, tmp_path: Path) -> None:
    (soong_env.project / "a.txt").write_text("hi\n")

    async def user(request: PermissionRequest) -> PermissionDecision:
        if request.tool_name == "code.write_file":
            return PermissionDecision(decision="allow_for_session")
        return PermissionDecision(decision="deny", reason="not\x1b[2J now")

    fake = FakeProvider(
        tool_calls(
            ("code.read_file", {"path": "a.txt"}, "c_read"),
            ("code.run_command", {"argv": ["true"]}, "c_rule"),
            ("code.write_file", {"path": "new.txt", "content": "x"}, "c_ask"),
        ),
        tool_calls(
            ("code.write_file", {"path": "new.txt", "content": "y", "overwrite": True}, "c_grant"),
            ("code.write_file", {"path": "locked/x.txt", "content": "y"}, "c_deny"),
        ),
        tool_calls(("code.run_command", {"argv": ["ls", "-la"]}, "c_cb")),
        text("done"),
    )
    config = {"permissions": {"rules": RULES}, "compact": {"enabled": False}}
    async with open_runtime(soong_env, fake, config=config, permission_callback=user) as rt:
        run = await rt.start("work")
        await collect(run, timeout=30)
        assert run.status == RunStatus.completed, run.error
    result = run_cli(["audit", run.run_id, "--path", str(soong_env.project)])
    assert result.exit_code == 0, result
    out = result.stdout
    blocks = {line.split()[2]: line for line in out.splitlines() if line.startswith(f"{run.run_id} #")}
    verdicts = dict(zip(blocks, [line for line in out.splitlines() if line.startswith("    ")], strict=True))
    assert set(blocks) == {"c_read", "c_rule", "c_ask", "c_grant", "c_deny", "c_cb"}, out
    assert verdicts["c_read"].strip().startswith("allowed; by the default policy")
    assert "allowed; by rule #1" in verdicts["c_rule"] and 'argv_prefix=["true"]' in verdicts["c_rule"]
    assert "allowed; by the permission callback (allow for session)" in verdicts["c_ask"]
    assert "asked because: write" in verdicts["c_ask"]
    assert "allowed; by an earlier 'allow for session' grant" in verdicts["c_grant"]
    assert "denied; by rule #2" in verdicts["c_deny"]
    assert "denied; by the permission callback (deny)" in verdicts["c_cb"] and "\\x1b[2J" in verdicts["c_cb"]
    assert "\x1b" not in out
    session = run_cli(["audit", run.session_id, "--path", str(soong_env.project)])
    assert session.exit_code == 0 and "c_cb" in session.stdout
    missing = run_cli(["audit", "run_nope", "--path", str(soong_env.project)])
    assert missing.exit_code == 1 and "error" in missing.stderr
