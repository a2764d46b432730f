"""What the model receives, end to end: budgets and reports (F14), compaction boundaries (F15), synthetic
messages (F16), and the project directories a run may create (B10)."""

from __future__ import annotations

from typing import Any

from agent_core import RunStatus
from agent_core._asset_loader import AssetLoader
from agent_core._storage.drafts import EventDraft, NodeDraft
from agent_core.types.content import TextBlock
from agent_core.types.enums import EventType
from agent_core.types.model import ModelRequest
from agent_core.types.runtime import ContextBuildReport
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, text, tool_calls
from tests.fixtures.orchestrator import create_args, step
from tests.fixtures.runtime import collect, open_runtime


def texts(request: ModelRequest) -> list[str]:
    return [b.text for m in request.messages for b in m.content if isinstance(b, TextBlock)]


async def test_dynamic_budget_trims_dynamic_blocks_only_and_reports_every_build(
    soong_env: SoongEnv,
) -> None:
    """Case F14."""
    soong_env.write_home(
        "skills/alpha.md", "# Alpha\nbody", frontmatter={"name": "alpha", "description": "a" * 400}
    )
    fake = FakeProvider(text("ok"))
    async with open_runtime(soong_env, fake, config={"context": {"dynamic_system_budget": 40}}) as rt:
        run = await rt.start("hello")
        events = await collect(run, debug=True)
        replay = await rt.replay_session(run.session_id)
    request = fake.requests[0]
    static_ids = [b.block_id for b in request.system if not b.dynamic]
    assert static_ids[:4] == ["system.core", "system.tool_protocol", "system.todo", "system.permissions"]
    assert "runtime.tool_catalog" in static_ids
    assert sum(b.token_count or 0 for b in request.system if b.dynamic) <= 40
    built = [e for e in events if e.event_type == EventType.context_built]
    assert len(built) == len(fake.requests) == 1
    report = ContextBuildReport.model_validate(built[0].data)
    assert built[0].node_id is None and built[0].run_id == run.run_id and report.agent_id == run.agent_id
    trimmed = [b for b in report.system_blocks if b.dynamic and not b.selected]
    assert trimmed and all(b.selected for b in report.system_blocks if not b.dynamic)
    assert report.included_node_ids and report.token_budget.dynamic_system_budget <= 40
    assert any(e.event_type == EventType.context_built for e in replay.events)


async def _compacted_session(rt: Any, fake: FakeProvider) -> tuple[str, dict[str, str]]:
    """Three completed turns, then two compaction nodes appended to the root path (the second valid)."""
    fake.script(text("a1"), text("a2"), text("a3"))
    first = await rt.start("q1")
    await collect(first)
    sid = first.session_id
    for q in ("q2", "q3"):
        await collect(await rt.start(q, session_id=sid))
    manager = rt._manager
    session = await manager.get_session(sid)
    nodes = {n.content[0].text: n.node_id for n in session.cursor.path}  # type: ignore[union-attr]
    storage = manager.services.storage
    ids: dict[str, str] = {}
    for name, first_kept in (("old", nodes["q2"]), ("new", nodes["q3"])):
        draft = NodeDraft(
            agent_id=session.root_agent_id,
            parent_id=session.cursor.tip,
            role="user",
            node_type="compaction",
            content=[TextBlock(text=f"## Goal\nsummary {name}")],
            metadata={"first_kept_node_id": first_kept, "mode": "auto", "tokens_before": 100},
        )
        written = await storage.append(
            sid,
            nodes=[draft],
            events=[EventDraft(event_type=EventType.compact_completed, agent_id=session.root_agent_id)],
            active_node_id=draft.node_id,
        )
        session.cursor.append(written.nodes[0])
        session.active_node_id = draft.node_id
        ids[name] = draft.node_id
    return sid, ids


async def test_request_starts_from_the_latest_valid_compaction(soong_env: SoongEnv) -> None:
    """Case F15."""
    fake = FakeProvider()
    async with open_runtime(soong_env, fake) as rt:
        sid, ids = await _compacted_session(rt, fake)
        fake.script(text("a4"))
        run = await rt.start("q4", session_id=sid)
        events = await collect(run, debug=True)
        assert run.status == RunStatus.completed
    got = texts(fake.requests[-1])
    assert got[0].startswith('<compaction_summary first_kept_node_id="') and "summary new" in got[0]
    assert got[1:] == ["q3", "a3", "q4"]
    assert not any(t in ("q1", "a1", "q2", "a2") or "summary old" in t for t in got)
    report = next(e for e in events if e.event_type == EventType.context_built).data
    assert report["compaction_node_id"] == ids["new"]
    assert report["excluded_reasons"][ids["old"]] == "compacted"


async def test_synthetic_nodes_reach_the_model_as_tagged_user_messages(soong_env: SoongEnv) -> None:
    """Case F16."""
    soong_env.write_home(
        "skills/alpha.md", "# Alpha\nskill body", frontmatter={"name": "alpha", "description": "A."}
    )
    fake = FakeProvider(
        tool_calls(
            ("internal.load_skill", {"name": "alpha"}, "s1"), ("agent.plan_template", {"goal": "g"}, "p1")
        ),
        text("done"),
    )
    async with open_runtime(soong_env, fake, config={"model": {"context_window": 200_000}}) as rt:
        run = await rt.start("use the skill")
        await collect(run)
        assert run.status == RunStatus.completed, run.error
    second = fake.requests[1]
    synthetic = [m for m in second.messages if m.metadata.get("synthetic")]
    kinds = [m.metadata["source_node_type"] for m in synthetic]
    assert kinds == ["skill_context", "plan_instruction"]
    assert all(m.role == "user" and m.metadata.get("source_node_id") for m in synthetic)
    assert synthetic[0].content[0].text.startswith('<skill name="alpha">')  # type: ignore[union-attr]
    assert synthetic[1].content[0].text.startswith("<plan_instruction>")  # type: ignore[union-attr]
    system_text = "\n".join(b.content for b in second.system)
    plan_title = AssetLoader().load("template.plan.default").text.splitlines()[0]
    assert plan_title in synthetic[1].content[0].text  # type: ignore[union-attr]
    assert "skill body" not in system_text and plan_title not in system_text


async def test_runs_create_only_plan_and_task_dirs(soong_env: SoongEnv) -> None:
    """Case B10."""
    fake = FakeProvider(
        tool_calls(("agent.plan_template", {"goal": "g"}, "p1")),
        tool_calls(("agent.task_create", create_args("t1", step("s1")), "c1")),
        text("planned"),
    )
    async with open_runtime(soong_env, fake, config={"model": {"context_window": 200_000}}) as rt:
        run = await rt.start("plan it", mode="orchestrator")
        await collect(run)
        assert run.status == RunStatus.completed, run.error
    state = soong_env.project / ".soong-agent"
    assert (state / "plans").is_dir() and (state / "tasks" / run.session_id).is_dir()
    assert sorted(p.name for p in state.iterdir()) == ["plans", "tasks"]
    for name in ("config.toml", "hooks.json", "tools", "agents", "skills", "memory", "rules", "history"):
        assert not (state / name).exists()
