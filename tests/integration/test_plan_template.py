"""``agent.plan_template`` through the runtime (docs/context.md#plans-and-task-templates; cases L1–L4)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_core._asset_loader import AssetLoader
from agent_core.config.loader import load_config
from agent_core.tools._effective import compute_effective_tools
from agent_core.types.content import text_of
from agent_core.types.enums import AgentRole
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, text, tool_calls
from tests.fixtures.orchestrator import (
    Router,
    create_args,
    error_code,
    finish,
    result_for,
    result_json,
    roomy,
    step,
    worker_result,
)
from tests.fixtures.runtime import open_runtime, rows
from tests.fixtures.tool_pipeline import PermissionRecorder

PLAN_NAME = "implement-auth-flow.md"
PLAN_BODY = "# Implement the auth flow\n\n## Goal\nLog users in.\n"


def plan_nodes(env: SoongEnv, session_id: str) -> list[dict[str, Any]]:
    found = rows(
        env, f"SELECT * FROM nodes_{session_id} WHERE node_type = 'plan_instruction' ORDER BY node_seq"
    )
    return [dict(r) for r in found]


async def test_plan_template_then_ordinary_files(soong_env: SoongEnv) -> None:
    """Cases L1, L2, L3."""
    plans = soong_env.project / ".soong-agent" / "plans"
    target = plans / PLAN_NAME
    fake = FakeProvider(
        tool_calls(("agent.plan_template", {"goal": "GOAL-MARK: build login"}, "p1")),
        tool_calls(("code.write_file", {"path": str(target), "content": PLAN_BODY}, "w1")),
        tool_calls(("code.write_file", {"path": str(target), "content": "again"}, "w2")),
        tool_calls(("code.read_file", {"path": str(target)}, "r1")),
        text("planned"),
    )
    permissions = PermissionRecorder.always("allow_once")
    async with open_runtime(soong_env, fake, config=roomy(), permission_callback=permissions) as rt:
        assert not plans.exists()
        run = await rt.start("please plan the login work", mode="normal")
        assert (await finish(run)).value == "completed"
    # L1: result, node, prompt placement, no file, no permission request for the template
    result = result_json(result_for(fake.requests, "p1"))
    asset = AssetLoader().load("template.plan.default")
    assert result == {
        "template_id": "template.plan.default",
        "template_version": asset.version,
        "suggested_dir": str(plans),
        "plan_created": False,
    }
    (node,) = plan_nodes(soong_env, run.session_id)
    meta = json.loads(node["metadata_json"])
    assert node["role"] == "user"
    assert meta["synthetic"] is True and meta["template_id"] == "template.plan.default"
    assert meta["template_version"] == asset.version and meta["suggested_dir"] == str(plans)
    assert meta["loaded_by_tool_call_id"] == "p1"
    second = fake.requests[1]
    rendered = [m for m in second.messages if text_of(m.content).startswith("<plan_instruction>")]
    assert len(rendered) == 1 and rendered[0].role == "user"
    body = text_of(rendered[0].content)
    assert "GOAL-MARK: build login" in body and str(plans) in body and "# Plan Writing Instructions" in body
    assert all("GOAL-MARK" not in block.content for block in second.system)
    # L2: the plan is written by an ordinary write (one permission request), path_conflict on a re-write
    assert [r.tool_name for r in permissions.requests] == ["code.write_file"]
    assert target.read_text(encoding="utf-8") == PLAN_BODY
    assert error_code(result_for(fake.requests, "w2")) == "path_conflict"
    # L3: reading it is an ordinary read: no instruction context, no dynamic block
    read = result_for(fake.requests, "r1")
    assert not read.is_error and "Implement the auth flow" in json.dumps(read.model_dump(mode="json"))
    kinds = {r["node_type"] for r in rows(soong_env, f"SELECT node_type FROM nodes_{run.session_id}")}
    assert "instruction_context" not in kinds
    assert all("Implement the auth flow" not in b.content for b in fake.requests[-1].system)
    assert [p.name for p in plans.iterdir()] == [PLAN_NAME]


async def test_plan_template_defaults_goal_and_checks_suggested_dir(soong_env: SoongEnv) -> None:
    outside = soong_env.project.parent / "elsewhere"
    fake = FakeProvider(
        tool_calls(
            ("agent.plan_template", {}, "p_default"),
            ("agent.plan_template", {"suggested_dir": "docs/plans"}, "p_rel"),
            ("agent.plan_template", {"suggested_dir": str(outside)}, "p_out"),
            ("agent.plan_template", {"goal": "x", "extra": 1}, "p_extra"),
        ),
        text("ok"),
    )
    async with open_runtime(
        soong_env, fake, config=roomy(), permission_callback=PermissionRecorder.never()
    ) as rt:
        run = await rt.start("ROOT-MESSAGE-MARK: plan a refactor", mode="normal")
        await finish(run)
    nodes = plan_nodes(soong_env, run.session_id)
    assert len(nodes) == 2
    first = json.loads(nodes[0]["metadata_json"])
    assert first["goal"] == "ROOT-MESSAGE-MARK: plan a refactor"
    relative = result_json(result_for(fake.requests, "p_rel"))
    assert relative["suggested_dir"] == str(soong_env.project / "docs" / "plans")
    assert (soong_env.project / "docs" / "plans").is_dir()
    assert error_code(result_for(fake.requests, "p_out")) == "validation_error" and not outside.exists()
    assert error_code(result_for(fake.requests, "p_extra")) == "validation_error"


async def test_plan_template_availability(soong_env: SoongEnv) -> None:
    """Case L4."""
    fake = FakeProvider()
    router = Router(fake).orch(
        tool_calls(("agent.plan_template", {"goal": "o"}, "o_plan")),
        tool_calls(("agent.task_create", create_args("t1", step("s1")), "c1")),
        tool_calls(("agent.dispatch_worker", {"task_id": "t1", "instruction": "job:w"}, "d")),
        text("done"),
    )
    router.job("w", tool_calls(("agent.plan_template", {"goal": "w"}, "w_plan")), text("{}"))
    async with open_runtime(soong_env, fake, config=roomy()) as rt:
        run = await rt.start("go", mode="orchestrator")
        await finish(run)
    assert not result_for(router.orchestrator_requests, "o_plan").is_error
    assert "agent.plan_template" in {t.name for t in router.orchestrator_requests[0].tools}
    (worker_run,) = router.worker_requests
    assert "agent.plan_template" not in {t.name for t in router.worker_requests[worker_run][0].tools}
    assert error_code(worker_result(router, "w_plan")) == "tool_not_available"


@pytest.mark.parametrize("child_tool", ["agent.create_sub_agent", "agent.fork_agent"])
async def test_sub_and_fork_children_have_no_plan_tool(soong_env: SoongEnv, child_tool: str) -> None:
    """Case L4."""
    fake = FakeProvider()

    def route(request: Any) -> Any:
        if request.metadata.get("purpose") in ("sub", "fork"):
            if not any(m.role == "tool" for m in request.messages):
                return tool_calls(("agent.plan_template", {"goal": "c"}, "child_plan"))
            return text('{"status": "completed", "summary": "child done"}')
        return None

    fake.route(route)
    fake.script(tool_calls((child_tool, {"task": "make a plan"}, "spawn")), text("parent done"))
    async with open_runtime(soong_env, fake, config=roomy()) as rt:
        run = await rt.start("go", mode="normal")
        await finish(run)
    child_requests = [r for r in fake.requests if r.metadata.get("purpose") in ("sub", "fork")]
    # a child is sent its parent's tool definitions (issue 33): the tool is shown, not callable
    assert child_requests and child_requests[0].tools == fake.requests[0].tools
    assert error_code(result_for(child_requests, "child_plan")) == "tool_not_available"
    assert "agent.plan_template" in {t.name for t in fake.requests[0].tools}


def test_compact_fork_has_no_plan_tool(soong_env: SoongEnv) -> None:
    """Case L4."""
    soong_env.write_config()
    config = load_config(home_dir=soong_env.home, project_dir=soong_env.project)
    from agent_core._orchestrator.tool_definitions import orchestrator_tool_definitions

    definitions = orchestrator_tool_definitions()
    for role in (AgentRole.compact, AgentRole.sub, AgentRole.fork, AgentRole.worker):
        assert "agent.plan_template" not in compute_effective_tools(definitions, config.settings, role).names
    for role in (AgentRole.main, AgentRole.orchestrator):
        assert "agent.plan_template" in compute_effective_tools(definitions, config.settings, role).names
