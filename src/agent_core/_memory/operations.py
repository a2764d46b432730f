"""The ``memory_writer.submit`` payload: schema, validation and the resulting commit plan
(docs/context.md#extraction; shape in the ``agent_core._asset_loader`` docstring).

:func:`parse_submit` checks the shape (``schema_error``, listing field paths only). :func:`plan_commit`
validates every operation against the session and the existing memories before anything is written and
returns the files to write (memory files first, then the regenerated ``MEMORY.md``). Any violation raises
``AgentCoreError(memory_write_failed)`` and nothing is written. Error messages never quote content.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter, ValidationError

from agent_core._memory.files import (
    BODY_MAX_BYTES,
    CATALOG_FILE,
    MEMORY_ID_RE,
    NAME_MAX,
    NAME_RE,
    SUMMARY_MAX,
    TAG_MAX_CHARS,
    TAGS_MAX,
    MemoryFrontmatter,
    MemoryRecord,
    memory_relpath,
    new_memory_id,
    render_catalog,
    render_memory_file,
)
from agent_core._memory.writer import MemoryWriter
from agent_core.errors import AgentCoreError, ErrorCode, MemoryOperationError, SchemaError
from agent_core.types.base import StrictModel, format_ts
from agent_core.types.enums import MessageRole, NodeType
from agent_core.types.runtime import Node

SourceIds = Annotated[list[str], Field(min_length=1)]


class CreateOp(StrictModel):
    op: Literal["create"]
    category: str
    name: str
    summary: str
    tags: list[str]
    body: str
    source_node_ids: SourceIds
    evidence: dict[str, str] | None = None


class UpdateOp(StrictModel):
    op: Literal["update"]
    memory_id: str
    summary: str
    tags: list[str]
    body: str
    source_node_ids: SourceIds
    evidence: dict[str, str] | None = None


Operation = Annotated[CreateOp | UpdateOp, Field(discriminator="op")]


class IgnoredCandidate(StrictModel):
    description: str
    reason: str
    source_node_ids: list[str] = Field(default_factory=list)


class DuplicateDecision(StrictModel):
    description: str
    memory_id: str
    source_node_ids: list[str] = Field(default_factory=list)


class ConflictEntry(StrictModel):
    memory_id: str
    description: str
    source_node_ids: list[str] = Field(default_factory=list)


class SubmitPayload(StrictModel):
    operations: list[Operation]
    ignored_candidates: list[IgnoredCandidate]
    duplicate_decisions: list[DuplicateDecision]
    conflicts: list[ConflictEntry]


_SUBMIT = TypeAdapter(SubmitPayload)


def parse_submit(arguments: Mapping[str, Any]) -> SubmitPayload:
    """Validates the ``submit`` arguments' shape; raises ``SchemaError(schema_error)``."""
    try:
        return _SUBMIT.validate_python(dict(arguments))
    except ValidationError as exc:
        errors = [
            {"path": ".".join(str(p) for p in e["loc"]) or "(root)", "message": e["type"]}
            for e in exc.errors(include_input=False, include_url=False)
        ]
        paths = ", ".join(sorted({e["path"] for e in errors}))
        raise SchemaError(
            ErrorCode.schema_error,
            f"memory_writer.submit arguments do not match the schema (fields: {paths})",
            details={"errors": errors[:20]},
        ) from None


@dataclass(kw_only=True, slots=True)
class CommitPlan:
    """What :func:`plan_commit` decided: files in write order and the ids/paths affected."""

    files: list[tuple[str, str]] = field(default_factory=list)
    created_ids: list[str] = field(default_factory=list)
    updated_ids: list[str] = field(default_factory=list)
    source_node_ids: list[str] = field(default_factory=list)

    @property
    def files_changed(self) -> list[str]:
        return [rel for rel, _ in self.files]


@dataclass(kw_only=True, slots=True)
class PlanContext:
    """Facts the validation needs: the session, its root agent, its nodes and the existing memories."""

    session_id: str
    root_agent_id: str
    nodes: Mapping[str, Node]
    """Every node of the session by id (sources must exist here)."""
    categories: frozenset[str]
    """Categories the job may create (``memory.categories``)."""
    existing: Mapping[str, MemoryRecord]
    writer: MemoryWriter
    now: datetime


def _fail(message: str) -> AgentCoreError:
    return MemoryOperationError(ErrorCode.memory_write_failed, message)


def _check_text_fields(where: str, op: CreateOp | UpdateOp, ctx: PlanContext) -> None:
    summary = op.summary
    if not summary.strip() or "\n" in summary or "\r" in summary or len(summary) > SUMMARY_MAX:
        raise _fail(f"{where}: summary must be one non-empty line of at most {SUMMARY_MAX} characters")
    if len(op.tags) > TAGS_MAX:
        raise _fail(f"{where}: at most {TAGS_MAX} tags are allowed")
    for tag in op.tags:
        if not tag.strip() or len(tag) > TAG_MAX_CHARS or "\n" in tag or "," in tag:
            raise _fail(f"{where}: each tag must be one non-empty line of at most {TAG_MAX_CHARS} characters")
    if not op.body.strip():
        raise _fail(f"{where}: body must not be empty")
    if len(op.body.encode("utf-8")) > BODY_MAX_BYTES:
        raise _fail(f"{where}: body exceeds {BODY_MAX_BYTES} bytes")
    texts = [("summary", summary), ("body", op.body), *(("tags", t) for t in op.tags)]
    texts += [("evidence", f"{k}: {v}") for k, v in (op.evidence or {}).items()]
    for label, text in texts:
        ctx.writer.check_content(f"{where} {label}", text)


def _is_user_message(node: Node) -> bool:
    return node.role == MessageRole.user.value and node.node_type == NodeType.message.value


def _check_sources(where: str, category: str, op: CreateOp | UpdateOp, ctx: PlanContext) -> None:
    has_user_message = False
    for node_id in op.source_node_ids:
        node = ctx.nodes.get(node_id)
        if node is None:
            raise _fail(f"{where}: source node {node_id!r} does not exist in this session")
        if node.agent_id != ctx.root_agent_id:
            raise _fail(
                f"{where}: source node {node_id!r} belongs to a child agent; only main/Orchestrator "
                "context can be a memory source"
            )
        has_user_message = has_user_message or _is_user_message(node)
    if category in ("user", "feedback") and not has_user_message:
        raise _fail(f"{where}: a {category} memory must cite at least one user message in source_node_ids")
    if category == "reference" and not has_user_message and not op.evidence:
        raise _fail(f"{where}: a reference memory must cite the confirming user message or carry evidence")
    if op.evidence and category != "reference":
        raise _fail(f"{where}: evidence is only allowed on reference memories")


def plan_commit(payload: SubmitPayload, ctx: PlanContext) -> CommitPlan:
    """Validates every operation (nothing written yet) and renders the files to write."""
    plan = CommitPlan()
    records: dict[str, MemoryRecord] = dict(ctx.existing)
    taken_ids = set(records)
    timestamp = format_ts(ctx.now)
    sources: list[str] = []
    for index, op in enumerate(payload.operations):
        where = f"operation {index} ({op.op})"
        if isinstance(op, CreateOp):
            if op.category not in ctx.categories:
                raise _fail(
                    f"{where}: category {op.category!r} is not allowed ({', '.join(sorted(ctx.categories))})"
                )
            if not NAME_RE.match(op.name) or len(op.name) > NAME_MAX:
                raise _fail(
                    f"{where}: name must match {NAME_RE.pattern} and have at most {NAME_MAX} characters"
                )
            category = op.category
        else:
            if not MEMORY_ID_RE.match(op.memory_id) or op.memory_id not in ctx.existing:
                raise _fail(f"{where}: update target {op.memory_id!r} does not exist")
            if op.memory_id in plan.updated_ids:
                raise _fail(f"{where}: memory {op.memory_id!r} is updated twice")
            category = ctx.existing[op.memory_id].category
            if category not in ctx.categories:
                raise _fail(f"{where}: category {category!r} of the update target is not allowed")
        _check_text_fields(where, op, ctx)
        _check_sources(where, category, op, ctx)
        if isinstance(op, CreateOp):
            memory_id = new_memory_id(ctx.now)
            while memory_id in taken_ids:
                memory_id = new_memory_id(ctx.now)
            taken_ids.add(memory_id)
            relpath = memory_relpath(category, op.name, ctx.now, memory_id)
            path = ctx.writer.target(relpath)
            if path.exists() or path.is_symlink():
                raise _fail(f"{where}: memory file {relpath!r} already exists")
            front = MemoryFrontmatter(
                id=memory_id,
                category=category,
                summary=op.summary,
                tags=list(op.tags),
                created_at=timestamp,
                updated_at=timestamp,
                source_session_id=ctx.session_id,
                source_node_ids=list(op.source_node_ids),
                evidence=dict(op.evidence) if op.evidence else None,
            )
            plan.created_ids.append(memory_id)
        else:
            old = ctx.existing[op.memory_id]
            relpath, path = old.relpath, ctx.writer.target(old.relpath)
            front = old.front.model_copy(
                update={
                    "summary": op.summary,
                    "tags": list(op.tags),
                    "updated_at": timestamp,
                    "source_session_id": ctx.session_id,
                    "source_node_ids": list(op.source_node_ids),
                    "evidence": dict(op.evidence) if op.evidence else None,
                }
            )
            memory_id = op.memory_id
            plan.updated_ids.append(memory_id)
        text = render_memory_file(front, op.body)
        plan.files.append((relpath, text))
        records[memory_id] = MemoryRecord(
            front=front, body=op.body, path=path, relpath=relpath, hash="", mtime_ns=0, size=len(text)
        )
        for node_id in op.source_node_ids:
            if node_id not in sources:
                sources.append(node_id)
    if plan.files:
        plan.files.append((CATALOG_FILE, render_catalog(list(records.values()))))
    plan.source_node_ids = sources
    return plan
