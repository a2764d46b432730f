"""Recall and the memory catalog through the public API (docs/context.md#recall,
docs/context.md#dynamic-blocks; cases M8, M9, M14, M19-M21; docs/context.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import pytest

from agent_core import RunStatus
from agent_core._memory.files import MemoryFrontmatter, MemoryStore, render_catalog, render_memory_file
from agent_core.config.schema import Settings
from agent_core.errors import ErrorCode
from agent_core.tools._effective import compute_effective_tools
from agent_core.types.content import JsonBlock, TextBlock, ToolResultBlock, text_of
from agent_core.types.enums import AgentRole
from agent_core.types.model import ModelRequest
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, fail, text, tool_calls
from tests.fixtures.memory import MemoryRouter, memory_fake, memory_of, prompt_of, selector
from tests.fixtures.multi_agent import ChildRouter, child_done
from tests.fixtures.orchestrator import Router, create_args, roomy, step, two_workers, worker_result
from tests.fixtures.runtime import collect, open_runtime, rows
from tests.fixtures.tool_pipeline import PermissionRecorder

ON: dict[str, Any] = {"memory": {"enabled": True}}
TABS = "mem_20240101000000_aaaaaa"
PYTEST = "mem_20240201000000_bbbbbb"
RECALL = "internal.recall_memory"


def seed(env: SoongEnv) -> None:
    for memory_id, category, summary, body in (
        (TABS, "user", "Prefers tabs", "TABS-BODY: always indent with tabs."),
        (PYTEST, "feedback", "Use pytest", "PYTEST-BODY: run tests with pytest -q."),
    ):
        front = MemoryFrontmatter.model_validate(
            {
                "id": memory_id,
                "category": category,
                "summary": summary,
                "tags": ["pref"],
                "created_at": f"{memory_id[4:8]}-{memory_id[8:10]}-01T00:00:00Z",
                "updated_at": "2024-06-01T00:00:00Z",
                "source_session_id": "sess_old",
                "source_node_ids": ["node_old"],
            }
        )
        path = env.home / "memory" / category / f"note-{memory_id}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_memory_file(front, body), encoding="utf-8")
    store = MemoryStore(memory_dir=env.home / "memory")
    store.catalog_path.write_text(render_catalog(store.records()), encoding="utf-8")


def snapshot(env: SoongEnv) -> dict[str, tuple[bytes, int]]:
    return {
        str(p): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in (env.home / "memory").rglob("*")
        if p.is_file()
    }


def tool_result(request: ModelRequest, call_id: str) -> ToolResultBlock:
    return next(
        b
        for m in request.messages
        for b in m.content
        if isinstance(b, ToolResultBlock) and b.tool_call_id == call_id
    )


def result_json(block: ToolResultBlock) -> dict[str, Any]:
    data = next(b.data for b in block.content if isinstance(b, JsonBlock))
    assert isinstance(data, dict)
    return data


def main_requests(fake: Any) -> list[ModelRequest]:
    return [r for r in fake.requests if r.metadata.get("agent_type") in ("main", "orchestrator")]


def block_ids(request: ModelRequest) -> list[str]:
    return [b.block_id for b in request.system]


def memory_nodes(env: SoongEnv, session_id: str) -> list[dict[str, Any]]:
    out = []
    for row in rows(
        env,
        f"SELECT node_id, role, content_json, metadata_json FROM \"nodes_{session_id}\" WHERE node_type = 'memory_context'",
    ):
        out.append({**dict(row), "metadata": json.loads(row["metadata_json"])})
    return out


@pytest.mark.parametrize("mode", ["normal", "orchestrator"])
async def test_recall_in_main_and_orchestrator(
    soong_env: SoongEnv, mode: Literal["normal", "orchestrator"]
) -> None:
    """Cases M8, M14, M20."""
    seed(soong_env)
    soong_env.write_project(
        ".soong-agent/memory/user/p.md",
        render_memory_file(
            MemoryFrontmatter.model_validate(
                {
                    "id": "mem_20240301000000_cccccc",
                    "category": "user",
                    "summary": "PROJECT-MEMORY",
                    "created_at": "2024-03-01T00:00:00Z",
                    "updated_at": "2024-03-01T00:00:00Z",
                }
            ),
            "PROJECT-BODY",
        ),
    )
    before = snapshot(soong_env)
    router = MemoryRouter().recall(selector(TABS), selector(TABS))
    fake = memory_fake(
        router,
        tool_calls((RECALL, {"query": "indentation style"}, "call_r1")),
        text("Using tabs."),
        tool_calls((RECALL, {"query": "indentation again", "limit": 1}, "call_r2")),
        text("Still tabs."),
    )
    permissions = PermissionRecorder.never()
    # the orchestrator's prompt with every default tool outgrew the baseline's 8192-token window
    async with open_runtime(soong_env, fake, config=roomy(ON), permission_callback=permissions) as rt:
        run = await rt.start("format this file", mode=mode)
        await collect(run)
        assert run.status == RunStatus.completed, run.error
        second = await rt.start("and this one", session_id=run.session_id, mode=mode)
        await collect(second)
        assert second.status == RunStatus.completed, second.error
    first_main = main_requests(fake)[0]
    assert RECALL in {t.name for t in first_main.tools}
    [catalog] = [b for b in first_main.system if b.block_id == "memory_catalog"]
    assert catalog.dynamic and catalog.priority == 130
    assert TABS in catalog.content and PYTEST in catalog.content and "# Memory Catalog" in catalog.content
    system_text = "\n".join(b.content for b in first_main.system)
    assert "TABS-BODY" not in system_text and "PYTEST-BODY" not in system_text  # bodies never in system
    assert "PROJECT-MEMORY" not in system_text  # M19
    # the selector call: internal, no agent/run, recall profile falls back to [model]
    recall_request = router.requests["memory_recall"][0]
    assert recall_request.model == "test-model" and recall_request.tools == []
    assert recall_request.metadata["purpose"] == "memory_recall"
    assert "agent_id" not in recall_request.metadata and "run_id" not in recall_request.metadata
    assert block_ids(recall_request) == ["memory.recall_selector"]
    selector_prompt = prompt_of(recall_request)
    assert "<recall_query>indentation style</recall_query>" in selector_prompt
    assert "format this file" in selector_prompt and "PROJECT-MEMORY" not in selector_prompt
    # the memory_context node and the next request
    [node] = memory_nodes(soong_env, run.session_id)
    meta = node["metadata"]
    assert node["role"] == "user"
    assert meta["recalled_memory_ids"] == [TABS] and meta["categories"] == ["user"]
    assert meta["query"] == "indentation style" and meta["selected_by_model"] == [TABS]
    assert meta["source_paths"] == [str(soong_env.home / "memory" / "user" / f"note-{TABS}.md")]
    after_recall = main_requests(fake)[1]
    assert result_json(tool_result(after_recall, "call_r1")) == {
        "recalled_memory_ids": [TABS],
        "already_recalled_ids": [],
        "memories": [{"id": TABS, "category": "user", "summary": "Prefers tabs"}],
    }
    [memory_message] = [
        m for m in after_recall.messages if m.metadata.get("source_node_type") == "memory_context"
    ]
    assert memory_message.role == "user" and memory_message.metadata["synthetic"] is True
    body = memory_message.content[0]
    assert isinstance(body, TextBlock)
    assert body.text.startswith(f'<memory ids="{TABS}" categories="user">') and "TABS-BODY" in body.text
    assert "PYTEST-BODY" not in body.text
    # the repeat in the next run: already recalled, nothing injected twice
    repeat = result_json(tool_result(main_requests(fake)[3], "call_r2"))
    assert repeat["already_recalled_ids"] == [TABS] and repeat["recalled_memory_ids"] == []
    assert len(memory_nodes(soong_env, run.session_id)) == 1
    assert snapshot(soong_env) == before and permissions.requests == []


async def test_selector_failure_is_a_tool_error_and_the_run_continues(soong_env: SoongEnv) -> None:
    """Case M21."""
    seed(soong_env)
    router = MemoryRouter().recall(fail("provider_error"))
    fake = memory_fake(
        router, tool_calls((RECALL, {"query": "q"}, "call_r")), text("continuing without memory")
    )
    async with open_runtime(soong_env, fake, config=ON) as rt:
        run = await rt.start("hi")
        await collect(run)
    assert run.status == RunStatus.completed
    block = tool_result(main_requests(fake)[1], "call_r")
    assert block.is_error and block.error is not None and block.error.code == ErrorCode.memory_recall_failed
    assert memory_nodes(soong_env, run.session_id) == []


async def test_recall_model_profile(soong_env: SoongEnv) -> None:
    """Case M14."""
    seed(soong_env)
    router = MemoryRouter().recall(selector())
    fake = memory_fake(router, tool_calls((RECALL, {"query": "q"}, "call_r")), text("ok"))
    config = {"memory": {"enabled": True, "recall_model_profile": {"name": "recall-model"}}}
    async with open_runtime(soong_env, fake, config=config) as rt:
        run = await rt.start("hi")
        await collect(run)
    assert router.requests["memory_recall"][0].model == "recall-model"
    assert main_requests(fake)[0].model == "test-model"
    assert result_json(tool_result(main_requests(fake)[1], "call_r"))["recalled_memory_ids"] == []
    assert memory_nodes(soong_env, run.session_id) == []


async def test_children_get_no_recall_tool_and_no_catalog(soong_env: SoongEnv) -> None:
    """Cases M9, M20."""
    seed(soong_env)
    child_calls = tool_calls((RECALL, {"query": "q"}, "child_recall"))
    children = (
        ChildRouter().add("MARK-SUB", child_calls, child_done()).add("MARK-FORK", child_calls, child_done())
    )
    router = MemoryRouter(fallback=children)
    fake = memory_fake(
        router,
        tool_calls(
            ("agent.create_sub_agent", {"task": "MARK-SUB look"}, "c1"),
            ("agent.fork_agent", {"task": "MARK-FORK look"}, "c2"),
        ),
        text("done"),
    )
    async with open_runtime(soong_env, fake, config=ON) as rt:
        run = await rt.start("delegate")
        await collect(run)
    assert run.status == RunStatus.completed
    assert "memory_catalog" in block_ids(main_requests(fake)[0])
    for marker in ("MARK-SUB", "MARK-FORK"):
        first, after = children.requests[marker]
        # a child is sent its parent's prompt (issue 33): the recall tool is shown but not callable, and a
        # system update after the delegated task withdraws the catalog
        assert first.tools == main_requests(fake)[0].tools
        removed = [m for m in first.messages if m.metadata.get("block_id") == "memory_catalog"]
        assert len(removed) == 1 and 'removed="true"' in text_of(removed[0].content)
        assert "TABS-BODY" not in "\n".join(b.content for b in first.system)
        error = tool_result(after, "child_recall").error
        assert error is not None and error.code == ErrorCode.tool_not_available
    assert router.requests["memory_recall"] == []


def test_effective_sets_with_memory_enabled(soong_env: SoongEnv) -> None:
    """Cases M9, M19."""
    from agent_core._memory.recall import recall_definition

    settings = Settings.model_validate(
        {"model": {"provider": "fake", "name": "m"}, "memory": {"enabled": True}}
    )
    definitions = [recall_definition(5)]
    for role in AgentRole:
        names = compute_effective_tools(definitions, settings, role).names
        assert (RECALL in names) == (role in (AgentRole.main, AgentRole.orchestrator)), role
        assert not any("memory_writer" in n for n in names)
    disabled = Settings.model_validate(
        {"model": {"provider": "fake", "name": "m"}, "memory": {"enabled": False}}
    )
    assert RECALL not in compute_effective_tools(definitions, disabled, AgentRole.main).names


async def test_disabled_memory_has_no_tool_and_no_catalog(soong_env: SoongEnv) -> None:
    """Case M19."""
    seed(soong_env)
    router = MemoryRouter()
    fake = memory_fake(router, tool_calls((RECALL, {"query": "q"}, "call_r")), text("ok"))
    async with open_runtime(soong_env, fake, config={"memory": {"enabled": False}}) as rt:
        run = await rt.start("hi")
        await collect(run)
        assert rt._manager is not None
        registered = {d.name for d in rt._manager.services.tools.definitions()}
    assert RECALL not in registered and not any("memory_writer" in n for n in registered)
    assert RECALL not in {t.name for t in main_requests(fake)[0].tools}
    assert "memory_catalog" not in block_ids(main_requests(fake)[0])
    error = tool_result(main_requests(fake)[1], "call_r").error
    assert error is not None and error.code == ErrorCode.tool_not_available
    assert router.requests["memory_recall"] == []


async def test_catalog_block_follows_memory_md_changes_between_builds(soong_env: SoongEnv) -> None:
    seed(soong_env)
    fake = memory_fake(MemoryRouter(), text("one"), text("two"))
    async with open_runtime(
        soong_env, fake, config={"memory": {"enabled": True, "catalog_max_tokens": 40}}
    ) as rt:
        run = await rt.start("hi")
        await collect(run)
        catalog = memory_of(rt).store.catalog_path
        catalog.write_text("# Memory Catalog\n\n- edited entry\n", encoding="utf-8")
        second = await rt.start("again", session_id=run.session_id)
        await collect(second)
    first_block = next(b for b in main_requests(fake)[0].system if b.block_id == "memory_catalog")
    assert first_block.metadata["truncated"] is True and (first_block.token_count or 0) <= 40
    # the stable-prefix rule: the system prompt keeps the catalog of the epoch, the edited catalog reaches
    # the model in a tail note appended after the new user message
    second = main_requests(fake)[1]
    assert next(b for b in second.system if b.block_id == "memory_catalog") == first_block
    note = second.messages[-1]
    assert note.metadata == {"synthetic": True, "source": "system_update", "block_id": "memory_catalog"}
    assert text_of(note.content).startswith('<system_update block="memory_catalog">')
    assert "- edited entry" in text_of(note.content) and "truncated" not in text_of(note.content)
    assert text_of(second.messages[-2].content) == "again"
    assert Path(first_block.metadata["path"]) == catalog


async def test_worker_gets_no_recall_tool_and_no_catalog(soong_env: SoongEnv) -> None:
    """Cases M9, M20."""
    seed(soong_env)
    fake = FakeProvider()
    orchestrator = Router(fake).orch(
        tool_calls(("agent.task_create", create_args("t1", step("s1")), "c_create")),
        tool_calls(("agent.dispatch_worker", {"task_id": "t1", "instruction": "job:r take s1"}, "c_d1")),
        text("done"),
    )
    orchestrator.job(
        "r",
        tool_calls((RECALL, {"query": "q"}, "w_recall")),
        text('{"status": "completed", "summary": "worker finished"}'),
    )
    router = MemoryRouter(fallback=orchestrator)
    fake.route(router)
    async with open_runtime(soong_env, fake, config={**roomy(two_workers()), **ON}) as rt:
        run = await rt.start("go", mode="orchestrator")
        await collect(run)
    assert run.status == RunStatus.completed, run.error
    assert "memory_catalog" in block_ids(orchestrator.orchestrator_requests[0])
    worker_requests = [r for reqs in orchestrator.worker_requests.values() for r in reqs]
    assert worker_requests
    for request in worker_requests:
        assert RECALL not in {t.name for t in request.tools}
        assert "memory_catalog" not in block_ids(request)
    error = worker_result(orchestrator, "w_recall").error
    assert error is not None and error.code == ErrorCode.tool_not_available
    assert router.requests["memory_recall"] == []
