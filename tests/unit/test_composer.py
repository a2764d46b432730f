"""Prompt composer budget, grouping and trimming (docs/compaction.md#the-conversation,
docs/compaction.md#budget-and-trimming; docs/context.md#static-blocks, docs/context.md#dynamic-blocks,
docs/context.md#messages)."""

from __future__ import annotations

from itertools import count
from typing import Any

from agent_core._context.composer import ComposeInput, ComposeLimits, block_key, compose
from agent_core._context.render import RenderCache
from agent_core.types.base import utc_now
from agent_core.types.content import ContentBlock, TextBlock, ToolCallBlock, ToolResultBlock
from agent_core.types.model import SystemBlock
from agent_core.types.runtime import Node

_seq = count(1)


def node(
    role: str,
    content: list[ContentBlock] | str,
    *,
    node_type: str = "message",
    run_id: str | None = "run_old",
    metadata: dict[str, Any] | None = None,
    node_id: str | None = None,
) -> Node:
    n = next(_seq)
    blocks = [TextBlock(text=content)] if isinstance(content, str) else content
    return Node(
        node_id=node_id or f"node_{n}",
        node_seq=n,
        session_id="sess_x",
        agent_id="agent_x",
        run_id=run_id,
        role=role,
        node_type=node_type,
        content=blocks,
        metadata=metadata or {},
        created_at=utc_now(),
    )


def call(cid: str, name: str = "code.read_file") -> ToolCallBlock:
    return ToolCallBlock(tool_call_id=cid, name=name, arguments={"path": "a"})


def result(cid: str, text: str = "ok") -> ToolResultBlock:
    return ToolResultBlock(tool_call_id=cid, content=[TextBlock(text=text)])


def limits(window: int = 100_000, reserve: int = 100, dyn: int = 1000, **kw: Any) -> ComposeLimits:
    return ComposeLimits(
        context_window=window, reserve_output_tokens=reserve, dynamic_system_budget=dyn, **kw
    )


def static(*names: str) -> list[SystemBlock]:
    return [
        SystemBlock(block_id=n, source="core", content=f"# {n}", priority=i * 10) for i, n in enumerate(names)
    ]


def run(path: list[Node], **kw: Any) -> Any:
    inp = ComposeInput(
        static_blocks=kw.pop("static_blocks", static("system.core")),
        dynamic_blocks=kw.pop("dynamic_blocks", []),
        path=path,
        limits=kw.pop("limits", limits()),
        **kw,
    )
    return compose(inp, RenderCache())


def test_static_blocks_keep_order_and_never_trim() -> None:
    blocks = static("system.core", "system.tool_protocol", "system.todo", "system.permissions")
    comp = run([node("user", "hi")], static_blocks=blocks)
    assert [b.block_id for b in comp.system] == [
        "system.core",
        "system.tool_protocol",
        "system.todo",
        "system.permissions",
    ]
    assert comp.fits


def test_static_overflow_is_prompt_too_long_without_compaction() -> None:
    big = [SystemBlock(block_id="system.core", source="core", content="x" * 4000)]
    comp = run([node("user", "hi")], static_blocks=big, limits=limits(window=1000, reserve=100))
    assert comp.static_overflow and not comp.fits


def test_dynamic_blocks_trimmed_from_highest_priority_number() -> None:
    dyn = [
        SystemBlock(
            block_id="agent_definition:a",
            source="agent_definition",
            content="a" * 400,
            priority=100,
            dynamic=True,
        ),
        SystemBlock(
            block_id="runtime_state", source="runtime_state", content="r" * 400, priority=140, dynamic=True
        ),
        SystemBlock(
            block_id="skill_catalog", source="skill_catalog", content="s" * 4000, priority=120, dynamic=True
        ),
    ]
    comp = run([node("user", "hi")], dynamic_blocks=dyn, limits=limits(dyn=300))
    selected = {r.block_id: (r.selected, r.reason) for r in comp.system_reports if r.dynamic}
    assert selected["agent_definition:a"] == (True, "selected")
    assert selected["skill_catalog"] == (True, "truncated")
    assert selected["runtime_state"] == (False, "budget")
    assert comp.budget.dynamic_system_tokens <= 300


def test_tool_results_follow_call_order_and_context_nodes_follow_results() -> None:
    u = node("user", "go")
    a = node("assistant", [call("c1"), call("c2")])
    r2 = node("tool", [result("c2")])
    r1 = node("tool", [result("c1")])
    skill = node(
        "user",
        "body",
        node_type="skill_context",
        metadata={"loaded_by_tool_call_id": "c1", "skill_name": "s"},
    )
    final = node("assistant", "done")
    comp = run([u, a, r2, r1, skill, final])
    roles = [m.role for m in comp.messages]
    assert roles == ["user", "assistant", "tool", "tool", "user", "assistant"]
    ids = [m.content[0].tool_call_id for m in comp.messages if m.role == "tool"]  # type: ignore[union-attr]
    assert ids == ["c1", "c2"]
    assert comp.messages[4].metadata["synthetic"] is True
    assert comp.messages[4].content[0].text.startswith('<skill name="s">')  # type: ignore[union-attr]


def test_unpaired_calls_and_orphan_results_are_repaired() -> None:
    u = node("user", "go")
    a = node("assistant", [TextBlock(text="let me look"), call("c1"), call("c2")])
    r1 = node("tool", [result("c1")])
    orphan = node("tool", [result("zz")])
    comp = run([u, a, r1, orphan])
    assert comp.unpaired_tool_call_ids == ["c2", "zz"]
    assistant = comp.messages[1]
    assert [b.tool_call_id for b in assistant.content if isinstance(b, ToolCallBlock)] == ["c1"]
    assert sum(1 for m in comp.messages if m.role == "tool") == 1


def test_partial_and_failed_assistant_nodes_are_skipped() -> None:
    u = node("user", "go")
    p = node("assistant", "half", metadata={"partial": True, "aborted": True})
    f = node("assistant", "oops", metadata={"partial": True, "failed": True})
    u2 = node("user", "again")
    comp = run([u, p, f, u2])
    assert [m.role for m in comp.messages] == ["user", "user"]
    assert comp.excluded_reasons[p.node_id] == "partial"
    assert comp.excluded_reasons[f.node_id] == "failed"


def test_trimming_drops_oldest_unprotected_groups_never_splitting_pairs() -> None:
    path: list[Node] = []
    for i in range(20):
        path.append(node("user", f"question {i} " + "q" * 200))
        path.append(node("assistant", [call(f"c{i}")]))
        path.append(node("tool", [result(f"c{i}", "r" * 200)]))
        path.append(node("assistant", f"answer {i}"))
    current = node("user", "now", run_id="run_now")
    path.append(current)
    comp = run(
        path,
        limits=limits(window=1200, reserve=100),
        current_run_id="run_now",
        current_user_node_id=current.node_id,
    )
    assert comp.fits
    assert comp.messages[-1].content[0].text == "now"  # type: ignore[union-attr]
    assert comp.messages[0].role == "user"
    calls = {b.tool_call_id for m in comp.messages for b in m.content if isinstance(b, ToolCallBlock)}
    results = {b.tool_call_id for m in comp.messages for b in m.content if isinstance(b, ToolResultBlock)}
    assert calls == results and calls  # pairs kept together
    assert "budget" in comp.excluded_reasons.values()
    assert path[0].node_id in comp.excluded_reasons


def test_current_run_is_protected_and_reports_overflow_with_degradable_blocks() -> None:
    u = node("user", "go", run_id="run_now")
    a = node("assistant", [call("c1")], run_id="run_now")
    r = node("tool", [result("c1", "z" * 20000)], run_id="run_now")
    comp = run(
        [u, a, r],
        limits=limits(window=2000, reserve=100),
        current_run_id="run_now",
        current_user_node_id=u.node_id,
    )
    assert not comp.fits
    assert comp.degradable and comp.degradable[0].key == block_key(r.node_id, 0, 0)
    sub = {comp.degradable[0].key: TextBlock(text="[artifact artifact_1: big output]")}
    again = run(
        [u, a, r],
        limits=limits(window=2000, reserve=100),
        current_run_id="run_now",
        current_user_node_id=u.node_id,
        substitutions=sub,
    )
    assert again.fits
    tool_msg = next(m for m in again.messages if m.role == "tool")
    assert tool_msg.content[0].content[0].text.startswith("[artifact")  # type: ignore[union-attr]


def test_compaction_summary_first_then_kept_tail() -> None:
    old_u = node("user", "old question")
    old_a = node("assistant", "old answer")
    kept_u = node("user", "kept question")
    kept_a = node("assistant", "kept answer")
    comp_node = node(
        "user", "## Goal\nsummary", node_type="compaction", metadata={"first_kept_node_id": kept_u.node_id}
    )
    new_u = node("user", "new question")
    comp = run([old_u, old_a, kept_u, kept_a, comp_node, new_u])
    texts = [m.content[0].text for m in comp.messages]  # type: ignore[union-attr]
    assert texts[0].startswith(f'<compaction_summary first_kept_node_id="{kept_u.node_id}">')
    assert texts[1:] == ["kept question", "kept answer", "new question"]
    assert comp.compaction_node_id == comp_node.node_id
    assert comp.excluded_reasons[old_u.node_id] == "compacted"


def test_invalid_compaction_is_ignored() -> None:
    u = node("user", "q")
    bad = node("user", "summary", node_type="compaction", metadata={"first_kept_node_id": "node_missing"})
    comp = run([u, bad, node("user", "next")])
    assert comp.compaction_node_id is None
    assert comp.excluded_reasons[bad.node_id] == "compacted"


def test_instruction_context_and_never_render_nodes_are_not_messages() -> None:
    root = node("user", "root", node_type="system_note", metadata={"never_render": True})
    ins = node("system", "rules", node_type="instruction_context", metadata={"path": "/p/CLAUDE.md"})
    comp = run([root, ins, node("user", "hi")])
    assert [m.content[0].text for m in comp.messages] == ["hi"]  # type: ignore[union-attr]


def test_task_board_is_last_and_capped() -> None:
    comp = run([node("user", "hi")], task_board="b" * 20000, limits=limits(task_board_token_budget=100))
    last = comp.messages[-1]
    assert last.metadata == {"synthetic": True, "source": "task_board"}
    assert last.content[0].text.startswith("<task_board>")  # type: ignore[union-attr]
    assert len(last.content[0].text) < 600  # type: ignore[union-attr]


def test_incremental_composition_equals_a_full_build_as_the_path_grows() -> None:
    """The compose memo must never change what the model receives (performance issue, composer fast path)."""
    from agent_core._context.conversation import ComposeMemo

    memo = ComposeMemo()
    cache = RenderCache()
    path: list[Node] = []

    def both() -> None:
        with_memo = compose(
            ComposeInput(
                static_blocks=static("system.core"), dynamic_blocks=[], path=path, limits=limits(), memo=memo
            ),
            cache,
        )
        plain = compose(
            ComposeInput(static_blocks=static("system.core"), dynamic_blocks=[], path=path, limits=limits()),
            RenderCache(),
        )
        assert [m.model_dump() for m in with_memo.messages] == [m.model_dump() for m in plain.messages]
        assert with_memo.included_node_ids == plain.included_node_ids
        assert with_memo.excluded_reasons == plain.excluded_reasons
        assert with_memo.unpaired_tool_call_ids == plain.unpaired_tool_call_ids
        assert with_memo.budget == plain.budget

    for turn in range(12):
        path.append(node("user", f"question {turn}"))
        both()
        path.append(node("assistant", [call(f"a{turn}"), call(f"b{turn}")]))
        both()
        path.append(node("tool", [result(f"b{turn}")]))
        both()
        path.append(node("tool", [result(f"a{turn}")]))
        if turn % 3 == 0:
            path.append(
                node(
                    "user",
                    "skill",
                    node_type="skill_context",
                    metadata={"loaded_by_tool_call_id": f"a{turn}", "skill_name": "s"},
                )
            )
        both()
        if turn % 4 == 1:
            path.append(node("assistant", "half", metadata={"partial": True, "failed": True}))
            both()
        path.append(node("assistant", f"answer {turn}"))
        both()
    assert memo.path is path  # the fast path was in use
    path[:] = path[:7]  # a rewritten path falls back to a full build
    path.append(node("user", "after a switch"))
    both()


def test_rendered_messages_equal_validated_messages() -> None:
    """The render cache builds its messages without validation (issue 16 target 4): each equals the
    validated ``ModelMessage`` of the same values, field by field, fields set and dumps included, and a
    node's ``MessageRole`` member becomes the plain role string."""
    from agent_core._context.render import render_node
    from agent_core.types.enums import MessageRole
    from agent_core.types.model import ModelMessage

    nodes = [
        node(MessageRole.user, "hello"),
        node("assistant", [TextBlock(text="look"), call("c1")]),
        node("tool", [result("c1")]),
        node("system", "odd role"),
        node("user", "kept in memory", node_type="memory_context", metadata={"recalled_memory_ids": ["m1"]}),
    ]
    for n in nodes:
        message = render_node(n)
        assert message is not None
        expected = ModelMessage(role=message.role, content=list(message.content), metadata=message.metadata)
        assert type(message.role) is str and message.role in ("user", "assistant", "tool")
        assert message == expected and message.model_fields_set == expected.model_fields_set
        assert message.model_dump() == expected.model_dump()
        assert message.model_dump_json() == expected.model_dump_json()
        assert message.model_copy(update={"content": []}).content == []
        assert ModelMessage.model_validate(message.model_dump()) == message
    assert [render_node(n).role for n in nodes] == ["user", "assistant", "tool", "user", "user"]  # type: ignore[union-attr]
