"""``internal.recall_memory`` at the tool level with a scripted selector (docs/context.md#recall)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_core._context.tokens import DEFAULT_COUNTER
from agent_core._ids import new_id
from agent_core._memory.files import MemoryFrontmatter, MemoryStore, render_catalog, render_memory_file
from agent_core._memory.recall import (
    RECALL_TOOL,
    RecallLimits,
    RecallToolAdapter,
    memory_section,
    parse_selection,
)
from agent_core.errors import AgentCoreError, ErrorCode, ProviderError
from agent_core.tools.adapter import ToolAdapter
from agent_core.types.base import utc_now
from agent_core.types.content import TextBlock
from agent_core.types.model import ToolCall
from agent_core.types.runtime import Node
from tests.fixtures.env import SoongEnv
from tests.fixtures.tool_sink import RecordingSink, make_ctx, make_scope

IDS = ["mem_20240101000000_aaaaaa", "mem_20240201000000_bbbbbb", "mem_20240301000000_cccccc"]


def _write(env: SoongEnv, memory_id: str, body: str, category: str = "user") -> Path:
    front = MemoryFrontmatter.model_validate(
        {
            "id": memory_id,
            "category": category,
            "summary": f"about {memory_id[-6:]}",
            "tags": [],
            "created_at": f"2024-0{IDS.index(memory_id) + 1}-01T00:00:00Z"
            if memory_id in IDS
            else "2024-05-01T00:00:00Z",
            "updated_at": "2024-06-01T00:00:00Z",
            "source_session_id": "sess_x",
            "source_node_ids": ["node_x"],
        }
    )
    path = env.home / "memory" / category / f"note-{memory_id}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_memory_file(front, body), encoding="utf-8")
    return path


class Harness:
    def __init__(self, env: SoongEnv, tmp_path: Path, *, top_k: int = 5, budget: int = 6000) -> None:
        self.env = env
        self.store = MemoryStore(memory_dir=env.home / "memory")
        self.answers: list[Any] = []
        self.prompts: list[str] = []
        self.adapter = RecallToolAdapter(
            store=self.store, limits=RecallLimits(top_k=top_k, token_budget=budget), select=self._select
        )
        self.sink = RecordingSink(artifact_dir=tmp_path / "artifacts")
        self.scope = make_scope(env.project, env.home, effective_tools=frozenset({RECALL_TOOL}))

    async def _select(self, session_id: str, prompt: str, limit: int) -> str:
        self.prompts.append(prompt)
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer if isinstance(answer, str) else json.dumps({"memory_ids": answer})

    async def call(self, **arguments: Any) -> dict[str, Any]:
        ctx = make_ctx(self.scope, self.sink, RECALL_TOOL)
        return await self.adapter.execute(
            ToolCall(tool_call_id=ctx.tool_call_id, name=RECALL_TOOL, arguments=arguments), ctx
        )

    def commit_nodes(self) -> None:
        for _call_id, draft in self.sink.context_nodes:
            self.sink.path.append(
                Node(
                    node_id=new_id("node_"),
                    node_seq=len(self.sink.path) + 1,
                    session_id=self.scope.session_id,
                    agent_id=self.scope.agent_id,
                    role=draft.role.value,
                    node_type=draft.node_type.value,
                    content=list(draft.content),
                    metadata=dict(draft.metadata),
                    created_at=utc_now(),
                )
            )
        self.sink.context_nodes.clear()


@pytest.fixture
def harness(soong_env: SoongEnv, tmp_path: Path) -> Harness:
    for i, memory_id in enumerate(IDS):
        _write(
            soong_env, memory_id, f"BODY-{i} " + "word " * 10, category=("user", "feedback", "reference")[i]
        )
    store = MemoryStore(memory_dir=soong_env.home / "memory")
    store.catalog_path.write_text(render_catalog(store.records()), encoding="utf-8")
    return Harness(soong_env, tmp_path)


def test_definition_is_internal_readonly_parallel_with_limit_bound(
    soong_env: SoongEnv, tmp_path: Path
) -> None:
    adapter = Harness(soong_env, tmp_path, top_k=3).adapter
    assert isinstance(adapter, ToolAdapter)
    [definition] = adapter.definitions()
    assert definition.name == RECALL_TOOL and definition.permission == "readonly"
    assert definition.tags == ["internal", "readonly"] and definition.metadata["concurrency"] == "parallel"
    assert definition.input_schema["properties"]["limit"]["maximum"] == 3
    assert definition.input_schema["required"] == ["query"]


def _snapshot(env: SoongEnv) -> dict[str, tuple[bytes, int]]:
    return {
        str(p): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in (env.home / "memory").rglob("*")
        if p.is_file()
    }


async def test_two_selected_memories_one_node_files_untouched(harness: Harness) -> None:
    before = _snapshot(harness.env)
    harness.answers.append([IDS[2], "mem_20990101000000_ffffff", IDS[0]])
    result = await harness.call(query="indentation preferences")
    assert result == {
        "recalled_memory_ids": [IDS[2], IDS[0]],
        "already_recalled_ids": [],
        "memories": [
            {"id": IDS[2], "category": "reference", "summary": "about cccccc"},
            {"id": IDS[0], "category": "user", "summary": "about aaaaaa"},
        ],
    }
    [(_call_id, draft)] = harness.sink.context_nodes
    assert draft.node_type.value == "memory_context" and draft.role.value == "user"
    meta = draft.metadata
    assert meta["recalled_memory_ids"] == [IDS[2], IDS[0]]
    assert meta["categories"] == ["reference", "user"]
    assert meta["query"] == "indentation preferences"
    assert meta["selected_by_model"] == [IDS[2], IDS[0]]
    assert [Path(p).name for p in meta["source_paths"]] == [f"note-{IDS[2]}.md", f"note-{IDS[0]}.md"]
    text = draft.content[0].text  # type: ignore[union-attr]
    assert "BODY-2" in text and "BODY-0" in text and "BODY-1" not in text
    assert _snapshot(harness.env) == before
    prompt = harness.prompts[0]
    for tag in (
        "recall_query",
        "user_request",
        "recent_context",
        "memory_catalog",
        "memory_frontmatter",
        "limit",
    ):
        assert f"<{tag}>" in prompt
    assert "BODY-" not in prompt  # the selector never sees bodies


async def test_top_k_and_token_budget_limit_the_injected_bodies(soong_env: SoongEnv, tmp_path: Path) -> None:
    for i, memory_id in enumerate(IDS):
        _write(soong_env, memory_id, f"BODY-{i} " + "x" * (400 if i != 1 else 4000))
    records = {r.id: r for r in MemoryStore(memory_dir=soong_env.home / "memory").records()}
    small = DEFAULT_COUNTER.text(memory_section(records[IDS[0]]))
    h = Harness(soong_env, tmp_path, top_k=2, budget=small * 2 + 5)
    h.answers.append(list(IDS))
    result = await h.call(query="q")
    assert result["recalled_memory_ids"] == [IDS[0]]  # top-2 = ids 0 and 1; id 1 does not fit the budget
    h.answers.append([IDS[1], IDS[2], IDS[0]])
    h.sink.context_nodes.clear()
    result = await h.call(query="q", limit=2)
    assert result["recalled_memory_ids"] == [IDS[2]]  # 1 skipped (too big), 2 fits; 0 beyond the limit


async def test_repeat_is_already_recalled_until_the_file_changes(harness: Harness) -> None:
    """Case M8."""
    harness.answers.append([IDS[0]])
    await harness.call(query="q")
    harness.commit_nodes()
    harness.answers.append([IDS[0], IDS[1]])
    result = await harness.call(query="q")
    assert result["already_recalled_ids"] == [IDS[0]] and result["recalled_memory_ids"] == [IDS[1]]
    [(_, draft)] = harness.sink.context_nodes
    assert draft.metadata["recalled_memory_ids"] == [IDS[1]]
    harness.commit_nodes()
    harness.answers.append([IDS[0], IDS[1]])
    result = await harness.call(query="q")
    assert result["recalled_memory_ids"] == [] and result["already_recalled_ids"] == [IDS[0], IDS[1]]
    assert harness.sink.context_nodes == []
    _write(harness.env, IDS[0], "EDITED BODY")
    harness.answers.append([IDS[0]])
    result = await harness.call(query="q")
    assert result["recalled_memory_ids"] == [IDS[0]]
    assert "EDITED BODY" in harness.sink.context_nodes[0][1].content[0].text  # type: ignore[union-attr]


async def test_memory_context_covered_by_compaction_is_injected_again(harness: Harness) -> None:
    harness.answers.append([IDS[0]])
    await harness.call(query="q")
    harness.commit_nodes()
    kept = Node(
        node_id="node_kept",
        node_seq=50,
        session_id=harness.scope.session_id,
        agent_id=harness.scope.agent_id,
        role="user",
        node_type="message",
        content=[TextBlock(text="later")],
        created_at=utc_now(),
    )
    compaction = kept.model_copy(
        update={
            "node_id": "node_compaction",
            "node_seq": 51,
            "node_type": "compaction",
            "metadata": {"first_kept_node_id": "node_kept", "summary": "s"},
        }
    )
    harness.sink.path.extend([kept, compaction])
    harness.answers.append([IDS[0]])
    result = await harness.call(query="q")
    assert result["recalled_memory_ids"] == [IDS[0]] and result["already_recalled_ids"] == []


@pytest.mark.parametrize(
    "answer",
    [
        ProviderError(ErrorCode.provider_error, "scripted outage"),
        "not json",
        '{"ids": []}',
        '{"memory_ids": [1, 2]}',
    ],
)
async def test_selector_failure_is_memory_recall_failed(harness: Harness, answer: Any) -> None:
    """Case M21."""
    harness.answers.append(answer)
    with pytest.raises(AgentCoreError) as err:
        await harness.call(query="q")
    assert err.value.code == ErrorCode.memory_recall_failed
    assert harness.sink.context_nodes == []


async def test_no_memories_means_no_selector_call(soong_env: SoongEnv, tmp_path: Path) -> None:
    h = Harness(soong_env, tmp_path)
    assert await h.call(query="q") == {"recalled_memory_ids": [], "already_recalled_ids": [], "memories": []}
    assert h.prompts == []


@pytest.mark.parametrize("arguments", [{}, {"query": ""}, {"query": "q", "limit": 0}, {"query": "q", "limit": 9},
                                       {"query": "q", "other": 1}, {"query": "q", "limit": True}])  # fmt: skip
async def test_bad_arguments_are_validation_errors(harness: Harness, arguments: dict[str, Any]) -> None:
    with pytest.raises(AgentCoreError) as err:
        await harness.call(**arguments)
    assert err.value.code == ErrorCode.validation_error


def test_parse_selection_accepts_a_fenced_object_and_dedupes() -> None:
    assert parse_selection('```json\n{"memory_ids": ["a", "b", "a"]}\n```') == ["a", "b"]
    assert parse_selection('{"memory_ids": []}') == []
