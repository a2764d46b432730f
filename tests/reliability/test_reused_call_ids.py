"""A model that reuses one tool-call id cannot hide calls from the audit (issue 31 item 9).

The model sends ``call_same`` in three turns: allowed, denied, allowed. Each executed call is its own
stored call (the reused id is replaced, the provider's id kept as metadata), the provider requests pair
every result with its own call, and ``soong-agent audit`` prints all three, keyed by run and sequence.
"""

from __future__ import annotations

from agent_core import PermissionDecision, PermissionRequest, RunStatus
from agent_core.types.content import ToolCallBlock, ToolResultBlock
from tests.fixtures.cli import run_cli
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, text, tool_calls
from tests.fixtures.runtime import collect, open_runtime, rows


async def test_reused_call_id_gives_three_audit_entries(soong_env: SoongEnv) -> None:
    """Case I9."""
    answers = iter(["allow_once", "deny", "allow_once"])

    async def user(request: PermissionRequest) -> PermissionDecision:
        return PermissionDecision(decision=next(answers))  # type: ignore[arg-type]

    fake = FakeProvider(
        tool_calls(("code.run_command", {"argv": ["echo", "first"]}, "call_same")),
        tool_calls(("code.run_command", {"argv": ["echo", "second"]}, "call_same")),
        tool_calls(("code.run_command", {"argv": ["echo", "third"]}, "call_same")),
        text("done"),
    )
    async with open_runtime(
        soong_env, fake, config={"compact": {"enabled": False}}, permission_callback=user
    ) as rt:
        run = await rt.start("run three commands")
        await collect(run, timeout=30)
        assert run.status == RunStatus.completed, run.error
    last = fake.requests[-1]
    calls = [b.tool_call_id for m in last.messages for b in m.content if isinstance(b, ToolCallBlock)]
    results = [b.tool_call_id for m in last.messages for b in m.content if isinstance(b, ToolResultBlock)]
    assert len(calls) == 3 and len(set(calls)) == 3, f"one id for three calls: {calls}"
    assert calls == results
    assert calls[0] == "call_same"
    stored = rows(
        soong_env,
        f'SELECT DISTINCT tool_call_id FROM "events_{run.session_id}" WHERE event_type IN '
        "('tool_started', 'tool_denied')",
    )
    assert len(stored) == 3

    result = run_cli(["audit", run.session_id, "--path", str(soong_env.project)])
    assert result.exit_code == 0, result
    out = result.stdout
    assert ": 3 tool call(s)" in out, out
    entries = [line for line in out.splitlines() if line.startswith(f"{run.run_id} #")]
    assert [line.split()[1] for line in entries] == ["#1", "#2", "#3"], out
    verdicts = [line.strip() for line in out.splitlines() if line.startswith("    ")]
    assert [v.split(";")[0] for v in verdicts] == ["allowed", "denied", "allowed"], out
