"""The Memory Extraction Job through the public API (docs/context.md#extraction; docs/runs.md; cases M6, M10,
M14-M18; docs/context.md)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
from pathlib import Path
from typing import Any

import pytest

import agent_core._memory.writer as writer_module
from agent_core import RunStatus
from agent_core._memory.extraction import READ_TOOL, SUBMIT_TOOL
from agent_core._memory.files import MemoryFrontmatter, MemoryStore, render_catalog, render_memory_file
from agent_core.types.content import TextBlock, ToolResultBlock
from agent_core.types.model import ModelRequest
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import fail, text, tool_calls, unsupported
from tests.fixtures.memory import (
    MemoryRouter,
    candidates,
    create_op,
    memory_fake,
    memory_of,
    node_ids,
    prompt_of,
    run_finished,
    submit,
)
from tests.fixtures.multi_agent import ChildRouter, child_done
from tests.fixtures.runtime import collect, open_runtime, rows

ON: dict[str, Any] = {"memory": {"enabled": True}}
FILE_RE = re.compile(r"^user/prefers-tabs-(\d{8})-(mem_(\d{14})_[0-9a-f]{6})\.md$")


def cfg(**memory: Any) -> dict[str, Any]:
    return {"memory": {"enabled": True, **memory}}


def memory_events(env: SoongEnv, session_id: str) -> list[dict[str, Any]]:
    out = []
    for row in rows(
        env,
        f'SELECT event_type, agent_id, run_id, run_seq, level, payload_json FROM "events_{session_id}" '
        "WHERE event_type LIKE 'memory_extraction_%' ORDER BY seq",
    ):
        item = dict(row)
        item["payload"] = json.loads(row["payload_json"] or "{}")
        out.append(item)
    return out


def session_meta(env: SoongEnv, session_id: str) -> dict[str, Any]:
    [row] = rows(env, "SELECT metadata_json FROM sessions WHERE session_id = ?", session_id)
    data: dict[str, Any] = json.loads(row["metadata_json"] or "{}")
    return data


def memory_files(env: SoongEnv) -> dict[str, str]:
    root = env.home / "memory"
    if not root.exists():
        return {}
    return {
        p.relative_to(root).as_posix(): p.read_text(encoding="utf-8") for p in root.rglob("*") if p.is_file()
    }


async def run_once(rt: Any, message: str, session_id: str | None = None) -> Any:
    run = await rt.start(message, session_id=session_id)
    await collect(run)
    await run_finished(run)
    assert run.status == RunStatus.completed, run.error
    return run


async def test_explicit_run_creates_a_memory_with_the_extract_profile(
    soong_env: SoongEnv,
) -> None:
    """Case M6."""
    router = MemoryRouter().extraction(submit(lambda r: {"operations": [create_op(r)]}))
    fake = memory_fake(router, text("Noted: tabs."))
    config = cfg(extract_model_profile={"name": "extract-model"})
    async with open_runtime(soong_env, fake, config=config) as rt:
        run = await run_once(rt, "remember that I prefer tabs")
        await memory_of(rt).scheduler.wait_quiet()
        [outcome] = memory_of(rt).scheduler.outcomes(run.session_id)
    assert outcome.status == "completed" and outcome.reason == "explicit"
    [request] = router.requests["memory_extraction"]
    assert request.model == "extract-model"
    [job_cfg] = [c for c in fake.configs if c.purpose == "memory_extraction"]
    assert (job_cfg.name, job_cfg.provider, job_cfg.max_output_tokens) == ("extract-model", "fake", 1024)
    assert (
        request.metadata["purpose"] == "memory_extraction"
        and request.metadata["session_id"] == run.session_id
    )
    assert "agent_id" not in request.metadata and "run_id" not in request.metadata
    assert [t.name for t in request.tools] == [READ_TOOL, SUBMIT_TOOL]
    assert [b.block_id for b in request.system] == ["memory.extraction"]
    prompt = prompt_of(request)
    for tag in (
        "allowed_categories",
        "memory_catalog",
        "existing_memories",
        "conversation",
        "active_path_summary",
    ):
        assert f"<{tag}>" in prompt
    [user_node] = rows(soong_env, f"SELECT node_id FROM \"nodes_{run.session_id}\" WHERE role = 'user'")
    assert candidates(request) == [user_node["node_id"]]
    assert "Noted: tabs." in prompt  # surrounding assistant context
    # no agent/run rows for the job
    assert len(rows(soong_env, "SELECT * FROM agents WHERE session_id = ?", run.session_id)) == 1
    assert len(rows(soong_env, "SELECT * FROM runs WHERE session_id = ?", run.session_id)) == 1
    # the file (ac 33)
    files = memory_files(soong_env)
    [rel] = [k for k in files if k != "MEMORY.md"]
    match = FILE_RE.match(rel)
    assert match is not None and match.group(3).startswith(match.group(1))
    memory_id = match.group(2)
    front = MemoryFrontmatter.model_validate(_front(files[rel]))
    assert front.id == memory_id and front.category == "user" and front.source_session_id == run.session_id
    assert front.source_node_ids == [user_node["node_id"]] and front.created_at == front.updated_at
    assert files[rel].endswith("The user prefers tabs for indentation in every project.\n")
    assert files["MEMORY.md"].startswith("# Memory Catalog\n")
    assert f"- [{memory_id}]({rel}) (user, " in files["MEMORY.md"]
    # cursor advanced to the last scanned node
    nodes = rows(soong_env, f'SELECT node_id, node_seq FROM "nodes_{run.session_id}" ORDER BY node_seq')
    cursor = session_meta(soong_env, run.session_id)["memory_scan_cursor"]
    assert cursor == {"node_seq": nodes[-1]["node_seq"], "node_id": nodes[-1]["node_id"]}
    assert session_meta(soong_env, run.session_id)["mode"] == "normal"  # other keys kept


def _front(text: str) -> dict[str, Any]:
    import yaml

    return dict(yaml.safe_load(text.split("---\n")[1]))


async def test_events_have_no_agent_or_run_and_carry_source_range(soong_env: SoongEnv) -> None:
    """Case M16."""
    router = MemoryRouter().extraction(submit(lambda r: {"operations": [create_op(r)]}))
    async with open_runtime(soong_env, memory_fake(router, text("ok")), config=ON) as rt:
        run = await run_once(rt, "Remember: I prefer tabs")
        await memory_of(rt).scheduler.wait_quiet()
    events = memory_events(soong_env, run.session_id)
    assert [e["event_type"] for e in events] == ["memory_extraction_started", "memory_extraction_completed"]
    nodes = rows(soong_env, f'SELECT node_seq FROM "nodes_{run.session_id}" ORDER BY node_seq')
    expected_range = {"from_node_seq": nodes[0]["node_seq"], "to_node_seq": nodes[-1]["node_seq"]}
    for event in events:
        assert event["agent_id"] is None and event["run_id"] is None and event["run_seq"] is None
        assert event["payload"]["reason"] == "explicit"
        assert event["payload"]["source_range"] == expected_range
    completed = events[1]["payload"]
    for key in (
        "created_memory_ids", "updated_memory_ids", "ignored_candidates", "duplicate_decisions", "conflicts",
        "source_node_ids", "files_changed", "scan_cursor",
    ):  # fmt: skip
        assert key in completed
    assert len(completed["created_memory_ids"]) == 1 and completed["files_changed"][-1] == "MEMORY.md"
    assert completed["scan_cursor"]["node_seq"] == expected_range["to_node_seq"]
    # not part of any run stream or replay of the run
    replay = await _replay_run_types(soong_env, run.run_id)
    assert not any(t.startswith("memory_extraction") for t in replay)


async def _replay_run_types(env: SoongEnv, run_id: str) -> list[str]:
    async with open_runtime(env, write_config=False) as rt:
        result = await rt.replay_run(run_id)
    return [e.event_type.value for e in result.events]


def _seed_memory(env: SoongEnv, memory_id: str, created: str, category: str = "user") -> Path:
    front = MemoryFrontmatter.model_validate(
        {
            "id": memory_id,
            "category": category,
            "summary": "Old preference",
            "tags": ["old"],
            "created_at": created,
            "updated_at": created,
            "source_session_id": "sess_old",
            "source_node_ids": ["node_old"],
        }
    )
    path = env.home / "memory" / category / f"old-pref-{created[:10].replace('-', '')}-{memory_id}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_memory_file(front, "old body"), encoding="utf-8")
    store = MemoryStore(memory_dir=env.home / "memory")
    store.catalog_path.write_text(render_catalog(store.records()), encoding="utf-8")
    return path


async def test_update_keeps_id_and_path_and_catalog_order(soong_env: SoongEnv) -> None:
    old_id, older_id = "mem_20240101000000_aaaaaa", "mem_20230101000000_bbbbbb"
    old_path = _seed_memory(soong_env, old_id, "2024-01-01T00:00:00Z")
    _seed_memory(soong_env, older_id, "2023-01-01T00:00:00Z")

    def build(request: ModelRequest) -> dict[str, Any]:
        assert old_id in prompt_of(request) and "old body" not in prompt_of(request)  # frontmatter only
        update = {
            "op": "update",
            "memory_id": older_id,
            "summary": "Now prefers two spaces",
            "tags": ["style"],
            "body": "Two spaces now.",
            "source_node_ids": candidates(request),
        }
        conflict = {"memory_id": older_id, "description": "changed preference", "source_node_ids": []}
        return {"operations": [update], "conflicts": [conflict]}

    router = MemoryRouter().extraction(submit(build))
    async with open_runtime(soong_env, memory_fake(router, text("ok")), config=ON) as rt:
        run = await run_once(rt, "remember: I now prefer two spaces")
        await memory_of(rt).scheduler.wait_quiet()
    files = memory_files(soong_env)
    older_rel = f"user/old-pref-20230101-{older_id}.md"
    front = _front(files[older_rel])
    assert front["id"] == older_id and front["summary"] == "Now prefers two spaces"
    assert front["created_at"].startswith("2023-01-01") and not front["updated_at"].startswith("2023")
    [user_node] = rows(soong_env, f"SELECT node_id FROM \"nodes_{run.session_id}\" WHERE role = 'user'")
    assert front["source_node_ids"] == [user_node["node_id"]]
    assert files[older_rel].endswith("Two spaces now.\n")
    assert old_path.read_text(encoding="utf-8").endswith("old body\n")
    catalog = files["MEMORY.md"]
    assert catalog.index(old_id) < catalog.index(older_id)  # created_at order, not updated_at
    assert len([k for k in files if k != "MEMORY.md"]) == 2
    [completed] = [
        e for e in memory_events(soong_env, run.session_id) if e["event_type"].endswith("completed")
    ]
    assert completed["payload"]["updated_memory_ids"] == [older_id]
    assert completed["payload"]["conflicts"][0]["memory_id"] == older_id


def _bad_ops(kind: str, request: ModelRequest) -> dict[str, Any]:
    if kind == "no_sources":
        op = create_op(request)
        del op["source_node_ids"]
    elif kind == "assistant_source":
        op = create_op(request, source_node_ids=node_ids(request, "assistant"))
    elif kind == "private_key":
        op = create_op(request, body="-----BEGIN PRIVATE KEY-----\nMIIEv\n-----END PRIVATE KEY-----")
    else:
        op = create_op(request, source_node_ids=["node_20990101_000000_ffffffffffff"])
    return {"operations": [create_op(request, name="valid-one"), op]}


@pytest.mark.parametrize("kind", ["no_sources", "assistant_source", "private_key", "unknown_node"])
async def test_invalid_submission_fails_without_writes(soong_env: SoongEnv, kind: str) -> None:
    """Cases M10, M18."""
    router = MemoryRouter().extraction(submit(lambda r: _bad_ops(kind, r)))
    async with open_runtime(soong_env, memory_fake(router, text("Sure, noted.")), config=ON) as rt:
        run = await run_once(rt, "please remember I prefer tabs")
        await memory_of(rt).scheduler.wait_quiet()
    assert memory_files(soong_env) == {}
    assert "memory_scan_cursor" not in session_meta(soong_env, run.session_id)
    events = memory_events(soong_env, run.session_id)
    assert [e["event_type"] for e in events] == ["memory_extraction_started", "memory_extraction_failed"]
    failed = events[1]
    assert failed["level"] == "warning" and failed["payload"]["reason"] == "explicit"
    expected = "schema_error" if kind == "no_sources" else "memory_write_failed"
    assert failed["payload"]["error"]["code"] == expected
    assert "MIIEv" not in json.dumps(failed["payload"])


async def test_ignore_only_advances_cursor_then_write_failure_keeps_it(
    soong_env: SoongEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Case M15."""
    ignore = {"description": "a greeting", "reason": "one-off", "source_node_ids": []}
    router = MemoryRouter().extraction(
        submit(lambda r: {"ignored_candidates": [ignore | {"source_node_ids": candidates(r)}]}),
        submit(lambda r: {"operations": [create_op(r, name="first"), create_op(r, name="second")]}),
    )
    async with open_runtime(soong_env, memory_fake(router, text("hi"), text("ok")), config=ON) as rt:
        run = await run_once(rt, "hello, always greet me")
        await memory_of(rt).scheduler.wait_quiet()
        cursor1 = session_meta(soong_env, run.session_id)["memory_scan_cursor"]
        assert memory_files(soong_env) == {}
        calls = {"n": 0}
        real = os.replace

        def flaky(src: Any, dst: Any) -> None:
            calls["n"] += 1
            if calls["n"] == 2:
                raise OSError("disk full (injected)")
            real(src, dst)

        monkeypatch.setattr(writer_module, "_replace", flaky)
        await run_once(rt, "remember two things", session_id=run.session_id)
        await memory_of(rt).scheduler.wait_quiet()
    events = memory_events(soong_env, run.session_id)
    assert [e["event_type"][18:] for e in events] == ["started", "completed", "started", "failed"]
    completed = events[1]["payload"]
    assert completed["files_changed"] == [] and completed["created_memory_ids"] == []
    assert completed["scan_cursor"] == cursor1 and completed["ignored_candidates"][0]["reason"] == "one-off"
    assert events[3]["payload"]["error"]["code"] == "memory_write_failed"
    assert session_meta(soong_env, run.session_id)["memory_scan_cursor"] == cursor1
    assert memory_files(soong_env) == {}  # the first file was rolled back
    # the second job scanned only the new message
    second = router.requests["memory_extraction"][1]
    assert len(candidates(second)) == 1 and "remember two things" in prompt_of(second)
    assert (
        "hello, always greet me"
        not in prompt_of(second).split("<conversation>")[1].split("</conversation>")[0]
    )


async def test_secret_never_lands_in_files_or_payloads(
    soong_env: SoongEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cases M16, M18."""
    secret = f"sk-test-{secrets.token_hex(12)}"
    monkeypatch.setenv("SOONG_TEST_API_KEY", secret)
    config = {"memory": {"enabled": True}, "model": {"api_key_env": "SOONG_TEST_API_KEY"}}
    router = MemoryRouter().extraction(
        submit(lambda r: {"operations": [create_op(r, body=f"The key is {secret}")]}),
        submit(
            lambda r: {
                "ignored_candidates": [
                    {
                        "description": f"api key {secret}",
                        "reason": f"secret={secret}",
                        "source_node_ids": candidates(r),
                    }
                ]
            }
        ),
    )
    async with open_runtime(soong_env, memory_fake(router, text("ok"), text("ok")), config=config) as rt:
        run = await run_once(rt, f"remember my api key {secret}")
        await memory_of(rt).scheduler.wait_quiet()
        await run_once(rt, f"never forget {secret}", session_id=run.session_id)
        await memory_of(rt).scheduler.wait_quiet()
    for request in router.requests["memory_extraction"]:
        assert secret not in prompt_of(request)  # nodes are redacted at write time
    events = memory_events(soong_env, run.session_id)
    assert [e["event_type"][18:] for e in events] == ["started", "failed", "started", "completed"]
    assert events[1]["payload"]["error"]["code"] == "memory_write_failed"
    assert "secret" in events[1]["payload"]["error"]["message"]
    for event in events:
        assert secret not in event["payload_json"]
    assert "[REDACTED]" in events[3]["payload_json"]
    assert memory_files(soong_env) == {}
    db_bytes = b"".join(p.read_bytes() for p in soong_env.home.glob("sessions.sqlite*") if p.is_file())
    assert secret.encode() not in db_bytes


async def test_message_and_token_backlogs(soong_env: SoongEnv) -> None:
    """Case M17."""
    router = MemoryRouter().extraction(
        submit(lambda r: {"ignored_candidates": []}), submit(lambda r: {"ignored_candidates": []})
    )
    config = cfg(extract_every_messages=2, extract_every_tokens=50)
    fake = memory_fake(router, text("a"), text("b"), text("c"))
    async with open_runtime(soong_env, fake, config=config) as rt:
        run = await run_once(rt, "hello there")
        assert router.requests["memory_extraction"] == []
        await run_once(rt, "how are you", session_id=run.session_id)
        await memory_of(rt).scheduler.wait_quiet()
        assert len(candidates(router.requests["memory_extraction"][0])) == 2
        other = await run_once(rt, "word " * 60)
        await memory_of(rt).scheduler.wait_quiet()
        reasons = [o.reason for o in memory_of(rt).scheduler.outcomes(run.session_id)]
        other_reasons = [o.reason for o in memory_of(rt).scheduler.outcomes(other.session_id)]
    assert reasons == ["message_backlog"] and other_reasons == ["token_backlog"]
    for session_id, reason in ((run.session_id, "message_backlog"), (other.session_id, "token_backlog")):
        assert {e["payload"]["reason"] for e in memory_events(soong_env, session_id)} == {reason}


async def test_idle_job_runs_after_idle_seconds_and_a_new_run_cancels_it(
    soong_env: SoongEnv,
) -> None:
    """Case M17."""
    gate = asyncio.Event()
    router = MemoryRouter().extraction(submit(lambda r: {"ignored_candidates": []}))

    async def slow_reply(fake: Any, request: ModelRequest) -> Any:
        await gate.wait()
        async for event in text("late")(fake, request):
            yield event

    fake = memory_fake(router, text("first"), slow_reply)
    async with open_runtime(soong_env, fake, config=cfg(idle_seconds=0.2)) as rt:
        run = await run_once(rt, "hello")
        scheduler = memory_of(rt).scheduler
        assert scheduler.idle_pending(run.session_id)
        second = await rt.start("and another thing", session_id=run.session_id)
        assert not scheduler.idle_pending(run.session_id)  # a new run start cancels the idle timer
        await asyncio.sleep(0.5)
        assert router.requests["memory_extraction"] == []
        gate.set()
        await collect(second)
        await run_finished(second)
        assert router.requests["memory_extraction"] == [] and scheduler.idle_pending(run.session_id)
        await memory_of(rt).scheduler.wait_quiet(include_idle=True)
        outcomes = memory_of(rt).scheduler.outcomes(run.session_id)
    assert [o.reason for o in outcomes] == ["idle"]
    assert [e["payload"]["reason"] for e in memory_events(soong_env, run.session_id)] == ["idle", "idle"]
    [request] = router.requests["memory_extraction"]
    assert len(candidates(request)) == 2


async def test_disabled_memory_never_extracts(soong_env: SoongEnv) -> None:
    """Case M17."""
    router = MemoryRouter()
    config = {"memory": {"enabled": False, "extract_every_messages": 1, "idle_seconds": 0.05}}
    fake = memory_fake(router, text("ok"), text("ok"))
    async with open_runtime(soong_env, fake, config=config) as rt:
        run = await run_once(rt, "remember that I always prefer tabs")
        await run_once(rt, "don't forget", session_id=run.session_id)
        await asyncio.sleep(0.2)
        assert rt._features().memory is None and rt._manager is not None
        assert rt._manager.features.memory is None
    assert router.requests["memory_extraction"] == []
    assert memory_events(soong_env, run.session_id) == []
    assert not (soong_env.home / "memory").exists()


async def test_one_job_per_session_and_coalesced_reevaluation(soong_env: SoongEnv) -> None:
    router = MemoryRouter().extraction(
        submit(lambda r: {"operations": [create_op(r, name="first-pref")]}),
        submit(lambda r: {"operations": [create_op(r, name="second-pref")]}),
    )
    router.gate = asyncio.Event()
    fake = memory_fake(router, text("one"), text("two"), text("three"))
    async with open_runtime(soong_env, fake, config=ON) as rt:
        run = await run_once(rt, "remember I prefer tabs")
        await asyncio.sleep(0.05)
        await run_once(rt, "remember I prefer dark mode", session_id=run.session_id)
        await run_once(rt, "always use pytest", session_id=run.session_id)
        await asyncio.sleep(0.05)
        assert len(router.requests["memory_extraction"]) == 1
        router.gate.set()
        await memory_of(rt).scheduler.wait_quiet()
        outcomes = memory_of(rt).scheduler.outcomes(run.session_id)
    assert router.max_active == 1
    assert [(o.status, o.reason) for o in outcomes] == [("completed", "explicit"), ("completed", "explicit")]
    second = router.requests["memory_extraction"][1]
    assert len(candidates(second)) == 2  # both runs that ended during the first job, in one job


async def test_close_cancels_a_running_job_and_keeps_the_cursor(soong_env: SoongEnv) -> None:
    router = MemoryRouter().extraction(submit(lambda r: {"operations": [create_op(r)]}))
    router.gate = asyncio.Event()
    async with open_runtime(soong_env, memory_fake(router, text("ok")), config=ON) as rt:
        run = await run_once(rt, "remember I prefer tabs")
        for _ in range(100):
            if router.requests["memory_extraction"]:
                break
            await asyncio.sleep(0.01)
        assert router.active["memory_extraction"] == 1
    assert memory_files(soong_env) == {}
    assert "memory_scan_cursor" not in session_meta(soong_env, run.session_id)
    events = memory_events(soong_env, run.session_id)
    assert [e["event_type"][18:] for e in events] == ["started", "failed"]
    assert events[1]["payload"]["error"]["code"] == "cancelled"


async def test_read_memory_tool_loop_then_duplicate_decision(soong_env: SoongEnv) -> None:
    old_id = "mem_20240101000000_aaaaaa"
    _seed_memory(soong_env, old_id, "2024-01-01T00:00:00Z")
    dup = {"description": "prefers tabs again", "memory_id": old_id, "source_node_ids": []}
    router = MemoryRouter().extraction(
        tool_calls(
            (READ_TOOL, {"memory_id": old_id}, "call_read"), (READ_TOOL, {"memory_id": "nope"}, "call_bad")
        ),
        submit(lambda r: {"duplicate_decisions": [dup]}),
    )
    async with open_runtime(soong_env, memory_fake(router, text("ok")), config=ON) as rt:
        run = await run_once(rt, "remember I prefer tabs")
        await memory_of(rt).scheduler.wait_quiet()
    second = router.requests["memory_extraction"][1]
    results = {
        b.tool_call_id: b for m in second.messages for b in m.content if isinstance(b, ToolResultBlock)
    }
    good = results["call_read"].content[0]
    assert isinstance(good, TextBlock) and json.loads(good.text)["body"] == "old body\n"
    assert results["call_bad"].is_error
    [completed] = [
        e for e in memory_events(soong_env, run.session_id) if e["event_type"].endswith("completed")
    ]
    assert completed["payload"]["duplicate_decisions"][0]["memory_id"] == old_id
    assert completed["payload"]["files_changed"] == []


@pytest.mark.parametrize("turn", ["text", "unsupported", "fail"])
async def test_job_fails_without_submit_or_tool_support(soong_env: SoongEnv, turn: str) -> None:
    scripted = {"text": text("nothing to remember"), "unsupported": unsupported("tools"), "fail": fail()}[
        turn
    ]
    router = MemoryRouter().extraction(scripted)
    async with open_runtime(soong_env, memory_fake(router, text("ok")), config=ON) as rt:
        run = await run_once(rt, "remember I prefer tabs")
        await memory_of(rt).scheduler.wait_quiet()
    events = memory_events(soong_env, run.session_id)
    assert [e["event_type"][18:] for e in events] == ["started", "failed"]
    code = {"text": "schema_error", "unsupported": "unsupported_capability", "fail": "provider_error"}[turn]
    assert events[1]["payload"]["error"]["code"] == code
    assert "memory_scan_cursor" not in session_meta(soong_env, run.session_id)


async def test_main_model_fallback_and_request_content(soong_env: SoongEnv) -> None:
    """Cases M14, M18."""
    soong_env.write_project(".soong-agent/plans/my-plan.md", "PLAN-BODY-MARKER steps\n")
    router = MemoryRouter().extraction(submit(lambda r: {"ignored_candidates": []}))
    fake = memory_fake(
        router,
        tool_calls(("code.read_file", {"path": ".soong-agent/plans/my-plan.md"}, "call_plan")),
        text("I read the plan."),
    )
    async with open_runtime(soong_env, fake, config=ON) as rt:
        run = await run_once(rt, "read my plan and remember I always keep plans short")
        await memory_of(rt).scheduler.wait_quiet()
    [request] = router.requests["memory_extraction"]
    assert request.model == "test-model"  # no extract_model_profile -> exactly [model]
    [main_cfg] = [c for c in fake.configs if c.purpose == "main"]
    [job_cfg] = [c for c in fake.configs if c.purpose == "memory_extraction"]
    ignored = {"purpose", "profile", "source"}
    assert job_cfg.model_dump(exclude=ignored) == main_cfg.model_dump(exclude=ignored)
    prompt = prompt_of(request)
    assert "PLAN-BODY-MARKER" in fake.requests[1].messages[-1].model_dump_json()  # the main run saw it
    assert "PLAN-BODY-MARKER" not in prompt
    assert "tool=code.read_file: ok" in prompt and "content omitted" in prompt
    assert memory_events(soong_env, run.session_id)[-1]["event_type"] == "memory_extraction_completed"


async def test_extraction_takes_no_child_concurrency_slot(soong_env: SoongEnv) -> None:
    """Case M6."""
    children = ChildRouter().add("MARK-SUB", child_done("sub ok"))
    router = MemoryRouter(fallback=children).extraction(submit(lambda r: {"ignored_candidates": []}))
    router.gate = asyncio.Event()
    fake = memory_fake(
        router,
        text("noted"),
        tool_calls(("agent.create_sub_agent", {"task": "MARK-SUB check"}, "call_sub")),
        text("done"),
    )
    config = {"memory": {"enabled": True}, "agents": {"max_concurrent_children_per_session": 1}}
    async with open_runtime(soong_env, fake, config=config) as rt:
        run = await run_once(rt, "remember I prefer tabs")
        for _ in range(200):
            if router.active["memory_extraction"]:
                break
            await asyncio.sleep(0.01)
        assert router.active["memory_extraction"] == 1  # held on the gate
        await run_once(rt, "now delegate", session_id=run.session_id)
        assert len(children.requests["MARK-SUB"]) == 1
        mains = [r for r in fake.requests if r.metadata.get("agent_type") == "main"]
        result = next(
            b
            for m in mains[-1].messages
            for b in m.content
            if isinstance(b, ToolResultBlock) and b.tool_call_id == "call_sub"
        )
        assert not result.is_error
        router.gate.set()
        await memory_of(rt).scheduler.wait_quiet()
    agents = rows(soong_env, "SELECT agent_type FROM agents WHERE session_id = ?", run.session_id)
    assert sorted(a["agent_type"] for a in agents) == ["main", "sub"]


async def test_delete_session_and_cleanup_never_touch_memory(soong_env: SoongEnv) -> None:
    router = MemoryRouter().extraction(submit(lambda r: {"operations": [create_op(r)]}))
    async with open_runtime(soong_env, memory_fake(router, text("ok")), config=ON) as rt:
        run = await run_once(rt, "remember I prefer tabs")
        await memory_of(rt).scheduler.wait_quiet()
        before = memory_files(soong_env)
        assert len(before) == 2
        result = await rt.delete_session(run.session_id)
        assert result.deleted
        await rt.cleanup_artifacts(dry_run=False, include_all=True)
    assert memory_files(soong_env) == before
