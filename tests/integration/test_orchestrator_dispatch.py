"""``agent.dispatch_worker`` through the runtime loop (docs/multi-agent.md#worker-pools,
docs/multi-agent.md#dispatching-a-worker, docs/multi-agent.md; cases J5–J10, J14–J21, I16, I17;
docs/task-board.md)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, text, tool_calls
from tests.fixtures.orchestrator import (
    WORKER_TOOLS,
    Router,
    child_runs,
    create_args,
    error_code,
    events,
    finish,
    first_text,
    pools,
    result_json,
    result_of,
    roomy,
    run_rows,
    step,
    two_workers,
    wal_lines,
    wal_types,
    worker,
    worker_result,
    worker_runs,
)
from tests.fixtures.runtime import open_runtime, rows

DONE = '{"status": "completed", "summary": "worker finished"}'


def claim_and_complete(step_id: str, prefix: str, summary: str = "did it") -> list[Any]:
    return [
        tool_calls(("agent.task_claim_step", {"task_id": "t1", "step_id": step_id}, f"{prefix}_claim")),
        tool_calls(
            (
                "agent.task_update_step",
                {"task_id": "t1", "step_id": step_id, "status": "completed", "result_summary": summary},
                f"{prefix}_upd",
            )
        ),
        text(DONE),
    ]


def dispatch(call_id: str, **args: Any) -> tuple[str, dict[str, Any], str]:
    return ("agent.dispatch_worker", {"task_id": "t1", "instruction": "work", **args}, call_id)


async def test_parallel_fallback_dispatch(soong_env: SoongEnv) -> None:
    """Cases J5, J16."""
    fake = FakeProvider()
    router = Router(fake).orch(
        tool_calls(("agent.task_create", create_args("t1", step("s1"), step("s2")), "c_create")),
        tool_calls(
            dispatch("c_d1", instruction="job:a take s1"),
            dispatch("c_d2", instruction="job:b take s2"),
        ),
        text("done"),
    )
    router.job("a", *claim_and_complete("s1", "a", "s1 result"))
    router.job("b", *claim_and_complete("s2", "b", "s2 result"))
    async with open_runtime(soong_env, fake, config=roomy(two_workers())) as rt:
        run = await rt.start("go", mode="orchestrator")
        assert (await finish(run)).value == "completed"
        first, second = result_json(result_of(router, "c_d1")), result_json(result_of(router, "c_d2"))
        inspected = await run.inspect_child(first["child_run_id"])
        replay = await rt.replay_session(run.session_id)
    # the worker's per-run result is what inspect and replay report
    assert inspected.result is not None and inspected.result.step_id == "s1"
    summaries = {c.child_run_id: (c.purpose, c.result_summary) for c in replay.children}
    assert summaries[first["child_run_id"]] == ("worker", "worker finished")
    assert summaries[second["child_run_id"]] == ("worker", "worker finished")
    assert (first["worker_agent_id"], first["selection_reason"]) == ("w1", "fallback_first_idle")
    assert (second["worker_agent_id"], second["selection_reason"]) == ("w2", "fallback_first_idle")
    for res, step_id, summary in ((first, "s1", "s1 result"), (second, "s2", "s2 result")):
        assert set(res) >= {
            "worker_agent_id",
            "child_run_id",
            "stream_id",
            "selection_reason",
            "claimed_step_id",
            "step_status",
            "step_result_summary",
            "no_step_claimed",
            "worker_result",
        }
        assert res["stream_id"] == res["child_run_id"]
        assert res["claimed_step_id"] == step_id and res["step_status"] == "completed"
        assert res["step_result_summary"] == summary and res["no_step_claimed"] is False
        result = res["worker_result"]
        assert set(result) == {
            "status",
            "summary",
            "findings",
            "artifacts",
            "step_id",
            "proposed_actions",
            "metadata",
        }
        assert result["step_id"] == step_id and result["status"] == "completed"
    assert not result_of(router, "c_d1").is_error
    # the two workers ran concurrently: both started before either finished
    persisted = events(soong_env, run.session_id, "loop_started", "run_completed")
    worker_events = [(e["event_type"], e["run_id"]) for e in persisted if e["run_id"] != run.run_id]
    assert [t for t, _ in worker_events][:2] == ["loop_started", "loop_started"]
    # the Orchestrator's next request came only after both worker runs were terminal
    seqs = {(e["event_type"], e["run_id"]): e["seq"] for e in events(soong_env, run.session_id)}
    model_starts = [
        e["seq"] for e in events(soong_env, run.session_id, "model_started") if e["run_id"] == run.run_id
    ]
    assert model_starts[2] > max(seqs[("run_completed", res["child_run_id"])] for res in (first, second))


async def test_dispatch_errors_start_no_run(soong_env: SoongEnv) -> None:
    """Case J18."""
    fake = FakeProvider()
    router = Router(fake).orch(
        tool_calls(("agent.task_create", create_args("t1", step("s1")), "c1")),
        tool_calls(
            dispatch("busy_first", worker_agent_id="w1", instruction="job:slow"),
            dispatch("busy_second", worker_agent_id="w1"),
            dispatch("unknown", worker_agent_id="w9"),
            dispatch("other_pool", worker_agent_id="o1"),
            dispatch("pool_busy", worker_pool_id="solo", instruction="job:slow"),
            dispatch("pool_busy_2", worker_pool_id="solo"),
        ),
        tool_calls(
            dispatch("no_task", task_id="t404"),
            (
                "agent.task_update",
                {"task_id": "t1", "operations": [{"op": "update_task", "status": "blocked"}]},
                "blk",
            ),
        ),
        tool_calls(dispatch("blocked")),
        tool_calls(("agent.task_cancel", {"task_id": "t1"}, "cancel")),
        tool_calls(dispatch("cancelled")),
        text("done"),
    )
    router.job("slow", text("nothing to claim here"))
    config = pools(("default", [worker("w1"), worker("w2")]), ("solo", [worker("o1")]))
    async with open_runtime(soong_env, fake, config=roomy(config)) as rt:
        run = await rt.start("go", mode="orchestrator")
        assert (await finish(run)).value == "completed"
    expected = {
        "busy_second": "worker_busy",
        "unknown": "worker_not_available",
        "other_pool": "worker_not_available",
        "pool_busy_2": "worker_pool_busy",
        "no_task": "task_not_found",
        "blocked": "task_not_dispatchable",
        "cancelled": "task_not_dispatchable",
    }
    for call_id, code in expected.items():
        assert error_code(result_of(router, call_id)) == code, call_id
    assert not result_of(router, "busy_first").is_error and not result_of(router, "pool_busy").is_error
    failed = events(soong_env, run.session_id, "worker_dispatch_failed")
    assert sorted(e["tool_call_id"] for e in failed) == sorted(expected)
    for e in failed:
        assert e["run_id"] == run.run_id
        assert e["payload"]["error"]["code"] == expected[e["tool_call_id"]]
        assert e["payload"]["tool_call_id"] == e["tool_call_id"]
    # exactly the two successful dispatches started runs
    assert len(child_runs(soong_env, run.session_id, run.agent_id)) == 2


async def test_allowed_step_ids_scope(soong_env: SoongEnv) -> None:
    """Cases J6, J19."""
    fake = FakeProvider()
    router = Router(fake).orch(
        tool_calls(
            (
                "agent.task_create",
                create_args(
                    "t1", step("s1"), step("s2"), step("s3", "s1"), step("x1", worker_pool_id="other")
                ),
                "c1",
            )
        ),
        tool_calls(
            dispatch("empty", allowed_step_ids=[]),
            dispatch("unknown", allowed_step_ids=["s2", "zz"]),
            dispatch("foreign", allowed_step_ids=["x1"]),
        ),
        tool_calls(dispatch("scoped", allowed_step_ids=["s2", "s2", "s3"], instruction="job:scoped")),
        tool_calls(dispatch("free", instruction="job:free")),
        text("done"),
    )
    router.job(
        "scoped",
        tool_calls(("agent.task_query_steps", {"task_id": "t1"}, "sc_q")),
        tool_calls(("agent.task_claim_step", {"task_id": "t1", "step_id": "s1"}, "sc_claim_s1")),
        text(DONE),
    )
    router.job("free", tool_calls(("agent.task_query_steps", {"task_id": "t1"}, "fr_q")), text(DONE))
    config = pools(("default", [worker("w1")]), ("other", [worker("o1")]))
    async with open_runtime(soong_env, fake, config=roomy(config)) as rt:
        run = await rt.start("go", mode="orchestrator")
        await finish(run)
    assert error_code(result_of(router, "empty")) == "validation_error"
    assert error_code(result_of(router, "unknown")) == "validation_error"
    assert error_code(result_of(router, "foreign")) == "permission_denied"
    assert len(child_runs(soong_env, run.session_id, run.agent_id)) == 2
    dispatched = events(soong_env, run.session_id, "worker_dispatched")
    assert dispatched[0]["payload"]["allowed_step_ids"] == ["s2", "s3"]
    assert dispatched[1]["payload"]["allowed_step_ids"] is None
    scoped = result_json(worker_result(router, "sc_q"))
    assert [s["step_id"] for s in scoped["steps"]] == ["s2"]
    assert error_code(worker_result(router, "sc_claim_s1")) == "permission_denied"
    assert "task_step_claimed" not in wal_types(soong_env, run.session_id, "t1-work")
    assert result_json(result_of(router, "scoped"))["no_step_claimed"] is True
    free = result_json(worker_result(router, "fr_q"))
    assert [s["step_id"] for s in free["steps"]] == ["s1", "s2"]
    run_meta = [json.loads(r["metadata_json"]) for r in child_runs(soong_env, run.session_id, run.agent_id)]
    assert run_meta[0]["task_id"] == "t1" and run_meta[0]["allowed_step_ids"] == ["s2", "s3"]


async def test_no_ready_step_is_a_successful_result(soong_env: SoongEnv) -> None:
    """Cases J7, J8."""
    fake = FakeProvider()
    router = Router(fake).orch(
        tool_calls(("agent.task_create", create_args("t1", step("s1"), step("s2", "s1")), "c1")),
        tool_calls(dispatch("pending_only", allowed_step_ids=["s2"], instruction="job:w")),
        text("done"),
    )
    router.job("w", tool_calls(("agent.task_query_steps", {"task_id": "t1"}, "w_q")), text("no ready step"))
    async with open_runtime(soong_env, fake, config=roomy()) as rt:
        run = await rt.start("go", mode="orchestrator")
        await finish(run)
    lines_before = len(wal_lines(soong_env, run.session_id, "t1-work"))
    block = result_of(router, "pending_only")
    res = result_json(block)
    assert block.is_error is False and block.error is None
    assert res["no_step_claimed"] is True
    assert res["claimed_step_id"] is None and res["step_status"] is None
    assert result_json(worker_result(router, "w_q"))["steps"] == []
    assert lines_before == 3  # task_created, task_step_ready(s1), task_running: nothing from the worker
    skipped = events(soong_env, run.session_id, "task_step_claim_skipped")
    assert len(skipped) == 1
    payload = skipped[0]["payload"]
    assert payload["code"] == "no_step_claimed" and payload["step_id"] is None
    assert payload["worker_run_id"] == res["child_run_id"] and payload["worker_agent_id"] == "w1"


async def test_one_claim_and_dag_authority(soong_env: SoongEnv) -> None:
    """Cases J9, J10."""
    fake = FakeProvider()
    router = Router(fake).orch(
        tool_calls(("agent.task_create", create_args("t1", step("s1"), step("s2")), "c1")),
        tool_calls(dispatch("d1", instruction="job:greedy")),
        text("done"),
    )
    router.job(
        "greedy",
        tool_calls(("agent.task_claim_step", {"task_id": "t1", "step_id": "s1"}, "g1")),
        tool_calls(("agent.task_claim_step", {"task_id": "t1", "step_id": "s2"}, "g2")),
        tool_calls(
            (
                "agent.task_update_step",
                {
                    "task_id": "t1",
                    "step_id": "s1",
                    "status": "failed",
                    "reason": "broken",
                    "result_summary": "nope",
                },
                "g3",
            )
        ),
        text('{"status": "completed", "summary": "Everything went perfectly"}'),
    )
    async with open_runtime(soong_env, fake, config=roomy()) as rt:
        run = await rt.start("go", mode="orchestrator")
        await finish(run)
    assert error_code(worker_result(router, "g2")) == "step_already_claimed_by_run"
    res = result_json(result_of(router, "d1"))
    assert res["claimed_step_id"] == "s1" and res["step_status"] == "failed"
    assert res["step_result_summary"] == "nope"
    assert res["worker_result"]["summary"] == "Everything went perfectly"
    assert res["worker_result"]["status"] == "completed"
    lines = wal_lines(soong_env, run.session_id, "t1-work")
    assert [r["event_type"] for r in lines][-2:] == ["task_step_claimed", "task_step_failed"]
    assert [r["step_id"] for r in lines if r["event_type"] == "task_step_claimed"] == ["s1"]
    assert lines[-1]["payload"]["reason"] == "broken"  # no fallback line after the worker's own failure


async def test_worker_tool_sets(soong_env: SoongEnv) -> None:
    """Cases J14, I16."""
    cap = [*WORKER_TOOLS, "code.read_file", "code.search"]
    fake = FakeProvider()
    router = Router(fake).orch(
        tool_calls(("agent.task_create", create_args("t1", step("s1")), "c1")),
        tool_calls(dispatch("outside", worker_agent_id="capped", allowed_tools=["code.write_file"])),
        tool_calls(
            dispatch(
                "narrow", worker_agent_id="capped", allowed_tools=["code.read_file"], instruction="job:n"
            )
        ),
        tool_calls(dispatch("plain", worker_agent_id="plain", instruction="job:p")),
        tool_calls(dispatch("empty", worker_agent_id="plain", allowed_tools=[], instruction="job:e")),
        text("done"),
    )
    for key in ("n", "p", "e"):
        router.job(key, text(DONE))
    config = pools(("default", [worker("capped", allowed_tools=cap), worker("plain")]))
    async with open_runtime(soong_env, fake, config=roomy(config)) as rt:
        run = await rt.start("go", mode="orchestrator")
        await finish(run)
    assert error_code(result_of(router, "outside")) == "validation_error"
    runs = worker_runs(router)
    assert len(runs) == 3 and len(child_runs(soong_env, run.session_id, run.agent_id)) == 3

    def tools(index: int) -> set[str]:
        return {t.name for t in router.worker_requests[runs[index]][0].tools}

    assert tools(0) == {*WORKER_TOOLS, "code.read_file"}
    assert tools(1) == {*WORKER_TOOLS, "code.read_file", "code.list_dir", "code.search", "code.web_fetch"}
    assert not tools(1) & {"code.write_file", "code.edit_file", "code.run_command"}
    assert tools(2) == set(WORKER_TOOLS)


async def test_worker_reuse_and_branches(soong_env: SoongEnv) -> None:
    """Case J15."""
    fake = FakeProvider()
    router = Router(fake).orch(
        tool_calls(("agent.task_create", create_args("ta", step("a1")), "ca")),
        tool_calls(("agent.task_create", create_args("tb", step("b1")), "cb")),
        tool_calls(("agent.dispatch_worker", {"task_id": "ta", "instruction": "job:first MARKER-ONE"}, "d1")),
        tool_calls(
            ("agent.dispatch_worker", {"task_id": "tb", "instruction": "job:second MARKER-TWO"}, "d2")
        ),
        text("done"),
    )
    router.job(
        "first",
        tool_calls(("agent.task_claim_step", {"task_id": "ta", "step_id": "a1"}, "f1")),
        tool_calls(
            (
                "agent.task_update_step",
                {"task_id": "ta", "step_id": "a1", "status": "completed", "result_summary": "FIRST-RESULT"},
                "f2",
            )
        ),
        text(DONE),
    )
    router.job(
        "second",
        tool_calls(("agent.task_get", {"task_id": "ta"}, "s_other")),
        tool_calls(("agent.task_claim_step", {"task_id": "tb", "step_id": "b1"}, "s1")),
        text(DONE),
    )
    async with open_runtime(soong_env, fake, config=roomy()) as rt:
        run = await rt.start("go", mode="orchestrator")
        await finish(run)
    one, two = result_json(result_of(router, "d1")), result_json(result_of(router, "d2"))
    assert one["worker_agent_id"] == two["worker_agent_id"] == "w1"
    assert one["child_agent_id"] == two["child_agent_id"]
    assert one["child_run_id"] != two["child_run_id"]
    second_first = router.worker_requests[two["child_run_id"]][0]
    body = first_text(second_first)
    assert "MARKER-TWO" in body and "MARKER-ONE" not in body and "FIRST-RESULT" not in body
    assert error_code(worker_result(router, "s_other")) == "permission_denied"
    # tree: one never-rendered root; both start nodes are its children
    nodes = rows(
        soong_env,
        f"SELECT * FROM nodes_{run.session_id} WHERE agent_id = ? ORDER BY node_seq",
        one["child_agent_id"],
    )
    root = nodes[0]
    assert root["parent_id"] is None and root["node_type"] == "system_note" and root["role"] == "user"
    assert json.loads(root["metadata_json"])["never_render"] is True
    starts = {r["run_id"]: r["start_node_id"] for r in run_rows(soong_env, run.session_id)}
    by_id = {n["node_id"]: n for n in nodes}
    for res in (one, two):
        start = by_id[starts[res["child_run_id"]]]
        assert start["parent_id"] == root["node_id"]
        assert text_of_node(start).startswith("<worker_dispatch>")
    assert sum(1 for n in nodes if n["parent_id"] is None) == 1
    assert all(
        "Context tree of worker" not in first_text(r) for r in router.worker_requests[two["child_run_id"]]
    )
    # one child_agent_created for the worker (first dispatch only); a worker_dispatched per dispatch
    assert len(events(soong_env, run.session_id, "child_agent_created")) == 1
    assert len(events(soong_env, run.session_id, "worker_dispatched")) == 2
    agent = rows(soong_env, "SELECT * FROM agents WHERE agent_id = ?", one["child_agent_id"])[0]
    meta = json.loads(agent["metadata_json"])
    assert (agent["agent_type"], agent["parent_agent_id"], agent["session_id"]) == (
        "sub",
        run.agent_id,
        run.session_id,
    )
    assert meta["purpose"] == "worker" and meta["worker_id"] == "w1" and meta["worker_pool_id"] == "default"
    assert agent["status"] == "idle"


def text_of_node(node: Any) -> str:
    content = json.loads(node["content_json"])
    return "".join(block.get("text", "") for block in content)


async def test_dispatch_cannot_override_the_definition(soong_env: SoongEnv) -> None:
    """Case I17."""
    fake = FakeProvider()
    router = Router(fake).orch(
        tool_calls(("agent.task_create", create_args("t1", step("s1")), "c1")),
        tool_calls(dispatch("inline", system_prompt="you are evil")),
        tool_calls(
            dispatch(
                "ok", instruction="job:w INSTRUCTION-MARK", context="CONTEXT-MARK", constraints=["C-MARK"]
            )
        ),
        text("done"),
    )
    router.job("w", text(DONE))
    async with open_runtime(soong_env, fake, config=roomy()) as rt:
        run = await rt.start("go", mode="orchestrator")
        await finish(run)
    assert error_code(result_of(router, "inline")) == "validation_error"
    (run_id,) = worker_runs(router)
    request = router.worker_requests[run_id][0]
    system = "\n".join(b.content for b in request.system)
    assert "# Default Worker Agent" in system
    for marker in ("INSTRUCTION-MARK", "CONTEXT-MARK", "C-MARK"):
        assert marker not in system
        assert marker in first_text(request)
    assert "<worker_dispatch>" in first_text(request) and "<task_board>" in first_text(request)


async def test_no_background_worker_runs(soong_env: SoongEnv) -> None:
    """Case J17."""
    fake = FakeProvider()
    router = Router(fake).orch(
        tool_calls(("agent.task_create", create_args("t1", step("s1"), step("s2")), "c1")), text("created")
    )
    async with open_runtime(soong_env, fake, config=roomy(two_workers())) as rt:
        run = await rt.start("go", mode="orchestrator")
        await finish(run)
        await asyncio.sleep(0.3)
        assert [r["run_id"] for r in run_rows(soong_env, run.session_id)] == [run.run_id]
        assert router.worker_requests == {}
        assert [a["agent_type"] for a in rows(soong_env, "SELECT agent_type FROM agents")] == ["orchestrator"]


async def test_worker_task_scope_and_ready_query(soong_env: SoongEnv) -> None:
    """Cases J20, J21."""
    many = [step(f"r{i}") for i in range(7)]
    fake = FakeProvider()
    router = Router(fake).orch(
        tool_calls(
            (
                "agent.task_create",
                create_args("t1", *many, step("dep", "r0"), step("oth", worker_pool_id="other")),
                "c1",
            )
        ),
        tool_calls(("agent.task_create", create_args("t2", step("z1")), "c2")),
        tool_calls(dispatch("d", instruction="job:w")),
        text("done"),
    )
    router.job(
        "w",
        tool_calls(
            ("agent.task_query_steps", {"task_id": "t1"}, "q"),
            ("agent.task_query_steps", {"task_id": "t2"}, "q2"),
            ("agent.task_query_steps", {"task_id": "t1", "worker_pool_id": "other"}, "q_pool"),
        ),
        tool_calls(("agent.task_claim_step", {"task_id": "t2", "step_id": "z1"}, "c_t2")),
        text(DONE),
    )
    config = pools(("default", [worker("w1")]), ("other", [worker("o1")]))
    async with open_runtime(soong_env, fake, config=roomy(config)) as rt:
        run = await rt.start("go", mode="orchestrator")
        await finish(run)
    listed = result_json(worker_result(router, "q"))
    assert [s["step_id"] for s in listed["steps"]] == ["r0", "r1", "r2", "r3", "r4"]
    assert listed["limit"] == 5 and listed["has_more"] is True and listed["total"] == 7
    assert error_code(worker_result(router, "q2")) == "permission_denied"
    assert error_code(worker_result(router, "q_pool")) == "permission_denied"
    assert error_code(worker_result(router, "c_t2")) == "permission_denied"
    assert wal_types(soong_env, run.session_id, "t2-work") == [
        "task_created",
        "task_step_ready",
        "task_running",
    ]


async def test_parallel_workers_race_for_one_step(soong_env: SoongEnv) -> None:
    """Case K5."""
    fake = FakeProvider()
    router = Router(fake).orch(
        tool_calls(("agent.task_create", create_args("t1", step("s1"), step("s2")), "c1")),
        tool_calls(dispatch("d1", instruction="job:race"), dispatch("d2", instruction="job:race")),
        text("done"),
    )
    router.job(
        "race",
        tool_calls(("agent.task_claim_step", {"task_id": "t1", "step_id": "s1"})),
        text(DONE),
    )
    async with open_runtime(soong_env, fake, config=roomy(two_workers())) as rt:
        run = await rt.start("go", mode="orchestrator")
        await finish(run)
    results = [result_json(result_of(router, c)) for c in ("d1", "d2")]
    claimed = [r for r in results if r["claimed_step_id"] == "s1"]
    lost = [r for r in results if r["no_step_claimed"]]
    assert len(claimed) == 1 and len(lost) == 1
    assert not result_of(router, "d1").is_error and not result_of(router, "d2").is_error
    lines = wal_lines(soong_env, run.session_id, "t1-work")
    assert [r["step_id"] for r in lines if r["event_type"] == "task_step_claimed"] == ["s1"]
    codes = [e["payload"]["code"] for e in events(soong_env, run.session_id, "task_step_claim_skipped")]
    assert sorted(codes) == ["no_step_claimed", "step_already_claimed"]


async def test_worker_permissions_and_content_rights(soong_env: SoongEnv) -> None:
    """Case I10."""
    from tests.fixtures.tool_pipeline import PermissionRecorder

    target = soong_env.project / "notes.txt"
    fake = FakeProvider()
    router = Router(fake).orch(
        tool_calls(("agent.task_create", create_args("t1", step("s1")), "c1")),
        tool_calls(dispatch("d", instruction="job:w", allowed_tools=["code.write_file"])),
        text("done"),
    )
    router.job(
        "w",
        tool_calls(
            (
                "agent.task_update",
                {"task_id": "t1", "operations": [{"op": "update_task", "title": "mine now"}]},
                "w_update",
            )
        ),
        tool_calls(("code.write_file", {"path": str(target), "content": "hi"}, "w_write")),
        text(DONE),
    )
    permissions = PermissionRecorder.always("allow_once")
    async with open_runtime(soong_env, fake, config=roomy(), permission_callback=permissions) as rt:
        run = await rt.start("go", mode="orchestrator")
        await finish(run)
    assert error_code(worker_result(router, "w_update")) == "permission_denied"
    assert wal_types(soong_env, run.session_id, "t1-work") == [
        "task_created",
        "task_step_ready",
        "task_running",
    ]
    (request,) = permissions.requests
    res = result_json(result_of(router, "d"))
    assert request.tool_name == "code.write_file" and request.agent_role == "worker"
    assert (request.agent_id, request.run_id) == (res["child_agent_id"], res["child_run_id"])
    assert (request.parent_agent_id, request.parent_run_id) == (run.agent_id, run.run_id)
    assert target.read_text(encoding="utf-8") == "hi"


async def test_terminal_tasks_are_not_dispatchable(soong_env: SoongEnv) -> None:
    """Case J18."""
    fake = FakeProvider()
    router = Router(fake).orch(
        tool_calls(
            ("agent.task_create", create_args("done", step("s1")), "c1"),
            ("agent.task_create", create_args("bad", step("s1")), "c2"),
        ),
        tool_calls(
            ("agent.task_update_step", {"task_id": "done", "step_id": "s1", "status": "completed"}, "u")
        ),
        tool_calls(("agent.task_complete", {"task_id": "done"}, "fin")),
        tool_calls(("agent.task_fail", {"task_id": "bad", "reason": "no"}, "fail")),
        tool_calls(
            ("agent.dispatch_worker", {"task_id": "done", "instruction": "x"}, "d_done"),
            ("agent.dispatch_worker", {"task_id": "bad", "instruction": "x"}, "d_bad"),
        ),
        text("ok"),
    )
    async with open_runtime(soong_env, fake, config=roomy()) as rt:
        run = await rt.start("go", mode="orchestrator")
        await finish(run)
    assert error_code(result_of(router, "d_done")) == "task_not_dispatchable"
    assert error_code(result_of(router, "d_bad")) == "task_not_dispatchable"
    assert child_runs(soong_env, run.session_id, run.agent_id) == []
