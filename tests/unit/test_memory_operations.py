"""``memory_writer.submit`` schema and validation (docs/context.md#extraction; cases M10, M18)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from agent_core._memory.files import MemoryFrontmatter, MemoryRecord, MemoryStore, parse_memory_text
from agent_core._memory.operations import PlanContext, parse_submit, plan_commit
from agent_core._memory.writer import MemoryWriter
from agent_core._redaction import Redactor
from agent_core.errors import AgentCoreError, ErrorCode, SchemaError
from agent_core.types.base import utc_now
from agent_core.types.content import TextBlock
from agent_core.types.runtime import Node
from tests.fixtures.env import SoongEnv

ROOT = "agent_root"
CHILD = "agent_child"
NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)


def _node(node_id: str, role: str, agent_id: str = ROOT, node_type: str = "message") -> Node:
    return Node(
        node_id=node_id,
        node_seq=1,
        session_id="sess_t",
        agent_id=agent_id,
        role=role,
        node_type=node_type,
        content=[TextBlock(text="x")],
        created_at=utc_now(),
    )


NODES = {
    n.node_id: n
    for n in (
        _node("node_user", "user"),
        _node("node_asst", "assistant"),
        _node("node_child_user", "user", agent_id=CHILD),
        _node("node_tool", "tool"),
    )
}


def _create(**over: Any) -> dict[str, Any]:
    op: dict[str, Any] = {
        "op": "create",
        "category": "user",
        "name": "prefers-tabs",
        "summary": "Prefers tabs for indentation",
        "tags": ["style"],
        "body": "The user prefers tabs.",
        "source_node_ids": ["node_user"],
    }
    op.update(over)
    return {k: v for k, v in op.items() if v is not None}


def _payload(*ops: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "operations": list(ops),
        "ignored_candidates": [],
        "duplicate_decisions": [],
        "conflicts": [],
        **extra,
    }


def _ctx(
    env: SoongEnv, existing: dict[str, MemoryRecord] | None = None, categories: set[str] | None = None
) -> PlanContext:
    return PlanContext(
        session_id="sess_t",
        root_agent_id=ROOT,
        nodes=NODES,
        categories=frozenset(categories or {"user", "feedback", "reference"}),
        existing=existing or {},
        writer=MemoryWriter(env.home / "memory", redactor=Redactor()),
        now=NOW,
    )


def _plan(env: SoongEnv, payload: dict[str, Any], **ctx: Any) -> Any:
    return plan_commit(parse_submit(payload), _ctx(env, **ctx))


def test_create_without_source_node_ids_fails_schema_validation() -> None:
    """Case M10."""
    for bad in (_create(source_node_ids=None), _create(source_node_ids=[])):
        with pytest.raises(SchemaError) as err:
            parse_submit(_payload(bad))
        assert err.value.code == ErrorCode.schema_error
        assert "operations.0.create.source_node_ids" in err.value.message


@pytest.mark.parametrize(
    "payload",
    [
        {"operations": []},
        _payload(_create(extra="x")),
        _payload({"op": "delete", "memory_id": "mem_x"}),
        _payload(_create(category=None)),
        _payload({**_create(), "op": "update", "memory_id": "mem_20240101000000_aaaaaa"}),
        _payload(unexpected=[]),
    ],
)
def test_submit_shape_errors_are_schema_errors(payload: dict[str, Any]) -> None:
    with pytest.raises(SchemaError):
        parse_submit(payload)


def test_create_plan_renders_file_then_catalog(soong_env: SoongEnv) -> None:
    plan = _plan(soong_env, _payload(_create()))
    [memory_id] = plan.created_ids
    assert memory_id.startswith("mem_20250601120000_")
    (rel, text), (catalog_rel, catalog) = plan.files
    assert rel == f"user/prefers-tabs-20250601-{memory_id}.md" and catalog_rel == "MEMORY.md"
    front, body = parse_memory_text(text)
    assert front.source_session_id == "sess_t" and front.source_node_ids == ["node_user"]
    assert front.created_at == front.updated_at == "2025-06-01T12:00:00.000000Z"
    assert body == "The user prefers tabs.\n"
    assert f"[{memory_id}]({rel})" in catalog
    assert plan.files_changed == [rel, "MEMORY.md"] and plan.source_node_ids == ["node_user"]


def test_ignore_only_plan_writes_nothing(soong_env: SoongEnv) -> None:
    payload = _payload(
        ignored_candidates=[{"description": "one-off", "reason": "task", "source_node_ids": ["node_user"]}]
    )
    plan = _plan(soong_env, payload)
    assert plan.files == [] and plan.created_ids == [] and plan.updated_ids == []


@pytest.mark.parametrize(
    ("op", "fragment"),
    [
        (_create(category="feedback", source_node_ids=["node_asst"]), "must cite at least one user message"),
        (_create(source_node_ids=["node_tool"]), "must cite at least one user message"),
        (_create(source_node_ids=["node_child_user"]), "belongs to a child agent"),
        (_create(source_node_ids=["node_user", "node_nope"]), "does not exist"),
        (_create(category="reference", source_node_ids=["node_asst"]), "confirming user message or carry evidence"),
        (_create(evidence={"source": "x"}), "evidence is only allowed on reference"),
        (_create(category="project"), "category 'project' is not allowed"),
        (_create(name="Bad_Name"), "name must match"),
        (_create(name="a" * 65), "name must match"),
        (_create(summary="two\nlines"), "summary must be one non-empty line"),
        (_create(summary="x" * 201), "summary must be one non-empty line"),
        (_create(summary="  "), "summary must be one non-empty line"),
        (_create(tags=[str(i) for i in range(11)]), "at most 10 tags"),
        (_create(tags=["t" * 41]), "each tag"),
        (_create(body="   "), "body must not be empty"),
        (_create(body="x" * (16 * 1024 + 1)), "body exceeds"),
        (_create(body="-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----"), "private key"),
        (_create(summary="login with password=swordfish1"), "credential assignment"),
        ({"op": "update", "memory_id": "mem_20240101000000_ffffff", "summary": "s", "tags": [], "body": "b",
          "source_node_ids": ["node_user"]}, "does not exist"),
    ],
)  # fmt: skip
def test_invalid_operations_fail_the_whole_plan(
    soong_env: SoongEnv, op: dict[str, Any], fragment: str
) -> None:
    """Case M18."""
    good = _create(name="other-note")
    with pytest.raises(AgentCoreError) as err:
        _plan(soong_env, _payload(good, op))
    assert err.value.code == ErrorCode.memory_write_failed
    assert fragment in err.value.message
    assert "swordfish1" not in err.value.message and "MIIE" not in err.value.message


def test_reference_memory_with_evidence_needs_no_user_source(soong_env: SoongEnv) -> None:
    plan = _plan(
        soong_env,
        _payload(
            _create(category="reference", source_node_ids=["node_asst"], evidence={"source": "docs/x.md"})
        ),
    )
    front, _ = parse_memory_text(plan.files[0][1])
    assert front.category == "reference" and front.evidence == {"source": "docs/x.md"}


def test_categories_config_restricts_creation(soong_env: SoongEnv) -> None:
    with pytest.raises(AgentCoreError) as err:
        _plan(soong_env, _payload(_create()), categories={"feedback"})
    assert "not allowed" in err.value.message


def _existing(env: SoongEnv) -> MemoryRecord:
    writer = MemoryWriter(env.home / "memory", redactor=Redactor())
    front = MemoryFrontmatter.model_validate(
        {
            "id": "mem_20240101000000_aaaaaa",
            "category": "feedback",
            "summary": "old summary",
            "tags": ["old"],
            "created_at": "2024-01-01T00:00:00Z",
            "updated_at": "2024-01-01T00:00:00Z",
            "source_session_id": "sess_old",
            "source_node_ids": ["node_old"],
        }
    )
    from agent_core._memory.files import render_memory_file

    writer.commit(
        [("feedback/old-20240101-mem_20240101000000_aaaaaa.md", render_memory_file(front, "old body"))]
    )
    return MemoryStore(memory_dir=env.home / "memory").records()[0]


def test_update_keeps_id_path_and_created_at_and_replaces_sources(soong_env: SoongEnv) -> None:
    old = _existing(soong_env)
    update = {
        "op": "update",
        "memory_id": old.id,
        "summary": "new summary",
        "tags": ["new"],
        "body": "new body",
        "source_node_ids": ["node_user"],
    }
    plan = _plan(soong_env, _payload(update), existing={old.id: old})
    assert plan.updated_ids == [old.id] and plan.created_ids == []
    rel, text = plan.files[0]
    assert rel == old.relpath
    front, body = parse_memory_text(text)
    assert front.id == old.id and front.category == "feedback"
    assert front.created_at == old.front.created_at and front.updated_at == "2025-06-01T12:00:00.000000Z"
    assert front.source_node_ids == ["node_user"] and front.summary == "new summary" and body == "new body\n"
    with pytest.raises(AgentCoreError, match="of the update target is not allowed"):
        _plan(soong_env, _payload(update), existing={old.id: old}, categories={"user"})
    with pytest.raises(AgentCoreError, match="updated twice"):
        _plan(soong_env, _payload(update, update), existing={old.id: old})
    with pytest.raises(SchemaError):
        parse_submit(_payload({**update, "category": "user"}))
