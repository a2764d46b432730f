"""The Memory Extraction Job (docs/context.md#extraction): a core-internal background job, not an agent.

Contracts:

- No ``agents``/``runs`` rows, no ``agent_id``/``run_id``, no AgentDefinition, no child slot. The model is
  ``resolve_purpose_model(config, "memory_extraction")`` (``memory.extract_model_profile``, else exactly
  ``[model]``), called directly through its provider adapter with ``metadata.purpose="memory_extraction"``.
- Protocol: a tool loop of at most :data:`MAX_TURNS` model turns with the two job-only tools
  :data:`READ_TOOL` and :data:`SUBMIT_TOOL` (never registered in the ``ToolRegistry``). ``submit`` ends
  the job; ending without it (or a provider without tool support) fails the job.
- Every submitted operation is validated before anything is written (:mod:`.operations`); the Memory
  Writer then commits memory files and the regenerated ``MEMORY.md`` atomically.
- Events ``memory_extraction_started`` / ``_completed`` / ``_failed`` are persisted through
  ``storage.append`` with ``agent_id=None``/``run_id=None``, carrying ``reason`` and ``source_range``.
  Payloads hold ids, paths and short (secret-masked) descriptions only, never transcripts or raw output.
- The scan cursor (``sessions.metadata_json.memory_scan_cursor``) advances in the same transaction as
  the ``completed`` event, i.e. only after every write succeeded; any failure leaves it unchanged.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from agent_core._asset_loader import AssetLoader
from agent_core._memory.files import MemoryRecord, MemoryStore
from agent_core._memory.llm import complete, job_request
from agent_core._memory.operations import (
    ConflictEntry,
    DuplicateDecision,
    IgnoredCandidate,
    PlanContext,
    SubmitPayload,
    parse_submit,
    plan_commit,
)
from agent_core._memory.scan import CURSOR_KEY, ScanInput, job_prompt, load_scan
from agent_core._memory.sensitive import mask_secrets
from agent_core._memory.writer import MemoryWriter
from agent_core._redaction import Redactor
from agent_core._storage.drafts import EventDraft
from agent_core._storage.protocol import SessionStore
from agent_core.config._profiles import resolve_purpose_model
from agent_core.config.loader import LoadedConfig
from agent_core.config.model import ResolvedModelConfig
from agent_core.errors import AgentCoreError, ErrorCode, SchemaError
from agent_core.providers.base import ProviderAdapter
from agent_core.types import events as ev
from agent_core.types.base import utc_now
from agent_core.types.content import (
    ContentBlock,
    ErrorPayload,
    JsonBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from agent_core.types.model import ModelCompleted, ModelMessage, ToolCall
from agent_core.types.tools import ToolDefinition

log = logging.getLogger("agent_core._memory")

PURPOSE = "memory_extraction"
READ_TOOL = "memory_writer.read_memory"
SUBMIT_TOOL = "memory_writer.submit"
MAX_TURNS = 8
REASONS = ("explicit", "message_backlog", "token_backlog", "idle")

_ID_LIST = {"type": "array", "items": {"type": "string"}}
_OPERATION = {
    "type": "object",
    "properties": {
        "op": {"type": "string", "enum": ["create", "update"]},
        "category": {"type": "string", "enum": ["user", "feedback", "reference"]},
        "name": {"type": "string", "description": "create only: lowercase-hyphen slug, <= 64 chars"},
        "memory_id": {"type": "string", "description": "update only: id of the existing memory"},
        "summary": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "body": {"type": "string"},
        "source_node_ids": _ID_LIST,
        "evidence": {"type": "object", "additionalProperties": {"type": "string"}},
    },
    "required": ["op", "summary", "tags", "body", "source_node_ids"],
}


def _entry(*required: str) -> dict[str, Any]:
    props: dict[str, Any] = {name: {"type": "string"} for name in required}
    props["source_node_ids"] = _ID_LIST
    return {"type": "object", "properties": props, "required": list(required)}


def job_tools() -> list[ToolDefinition]:
    """The two job-only tools (never in any registry or effective set)."""
    return [
        ToolDefinition(
            name=READ_TOOL,
            description="Read one existing memory (frontmatter and full body) by its id.",
            input_schema={
                "type": "object",
                "properties": {"memory_id": {"type": "string"}},
                "required": ["memory_id"],
                "additionalProperties": False,
            },
            permission="readonly",
            tags=["internal", "readonly"],
        ),
        ToolDefinition(
            name=SUBMIT_TOOL,
            description="Submit all memory decisions of this job; this ends the job. Call exactly once.",
            input_schema={
                "type": "object",
                "properties": {
                    "operations": {"type": "array", "items": _OPERATION},
                    "ignored_candidates": {"type": "array", "items": _entry("description", "reason")},
                    "duplicate_decisions": {"type": "array", "items": _entry("description", "memory_id")},
                    "conflicts": {"type": "array", "items": _entry("memory_id", "description")},
                },
                "required": ["operations", "ignored_candidates", "duplicate_decisions", "conflicts"],
                "additionalProperties": False,
            },
            permission="write",
            tags=["internal"],
        ),
    ]


@dataclass(kw_only=True, slots=True)
class ExtractionOutcome:
    """What one job did (``skipped`` = nothing unscanned; no events were written)."""

    status: Literal["completed", "failed", "skipped"]
    reason: str
    created_memory_ids: list[str] = field(default_factory=list)
    updated_memory_ids: list[str] = field(default_factory=list)
    files_changed: list[str] = field(default_factory=list)
    error: ErrorPayload | None = None


class MemoryExtractor:
    """Runs extraction jobs for sessions of one runtime."""

    def __init__(
        self,
        *,
        config: LoadedConfig,
        storage: SessionStore,
        store: MemoryStore,
        writer: MemoryWriter,
        assets: AssetLoader,
        adapter_for: Callable[[ResolvedModelConfig], ProviderAdapter],
        redactor: Redactor,
    ) -> None:
        self.config = config
        self.storage = storage
        self.store = store
        self.writer = writer
        self.assets = assets
        self.adapter_for = adapter_for
        self.redactor = redactor

    @property
    def categories(self) -> list[str]:
        return list(self.config.settings.memory.categories)

    async def run(self, session_id: str, reason: str) -> ExtractionOutcome:
        """One job for ``session_id``; never raises except on cancellation."""
        scan = await load_scan(self.storage, session_id)
        if scan is None or not scan.candidates:
            return ExtractionOutcome(status="skipped", reason=reason)
        base = {"reason": reason, "source_range": scan.source_range}
        await self._event(session_id, ev.MemoryExtractionStarted(reason, scan.source_range))
        try:
            return await self._extract(scan, reason, base)
        except asyncio.CancelledError:
            error = ErrorPayload(
                code=ErrorCode.cancelled, message="memory extraction cancelled (runtime closed)"
            )
            try:
                await self._failed(session_id, base, error)
            except Exception:
                log.debug("could not record the cancelled memory extraction of %s", session_id)
            raise
        except AgentCoreError as exc:
            error = exc.to_payload(self.redactor)
        except Exception as exc:
            log.exception("memory extraction for session %s failed", session_id)
            error = ErrorPayload(
                code=ErrorCode.internal_error, message=f"internal error ({type(exc).__name__})"
            )
        error = _masked_error(error, self.redactor)
        try:
            await self._failed(session_id, base, error)
        except Exception:
            log.exception("could not record the failed memory extraction of %s", session_id)
        return ExtractionOutcome(status="failed", reason=reason, error=error)

    # ---- the job --------------------------------------------------------------------------------
    async def _extract(self, scan: ScanInput, reason: str, base: dict[str, Any]) -> ExtractionOutcome:
        model = resolve_purpose_model(self.config, PURPOSE)
        adapter = self.adapter_for(model)
        records = self.store.records()
        prompt = job_prompt(
            scan, categories=self.categories, catalog=self.store.read_catalog(), records=records
        )
        submitted = await self._tool_loop(scan.session_id, model, adapter, prompt, {r.id: r for r in records})
        nodes = {n.node_id: n for n in await self.storage.list_nodes(scan.session_id)}
        # No await between planning and committing: concurrent jobs never interleave their writes.
        plan = plan_commit(
            submitted,
            PlanContext(
                session_id=scan.session_id,
                root_agent_id=scan.root_agent_id,
                nodes=nodes,
                categories=frozenset(self.categories),
                existing=self.store.by_id(),
                writer=self.writer,
                now=utc_now(),
            ),
        )
        if plan.files:
            self.writer.commit(plan.files)
        cursor = scan.next_cursor
        assert cursor is not None
        cited = list(plan.source_node_ids)
        entries: list[IgnoredCandidate | DuplicateDecision | ConflictEntry] = [
            *submitted.ignored_candidates,
            *submitted.duplicate_decisions,
            *submitted.conflicts,
        ]
        for entry in entries:
            for node_id in entry.source_node_ids:
                if node_id not in cited:
                    cited.append(node_id)
        completed = ev.MemoryExtractionCompleted(
            reason=reason,
            source_range=base["source_range"],
            created_memory_ids=plan.created_ids,
            updated_memory_ids=plan.updated_ids,
            ignored_candidates=self._masked([e.model_dump() for e in submitted.ignored_candidates]),
            duplicate_decisions=self._masked([e.model_dump() for e in submitted.duplicate_decisions]),
            conflicts=self._masked([e.model_dump() for e in submitted.conflicts]),
            source_node_ids=cited,
            files_changed=plan.files_changed,
            scan_cursor=cursor.as_dict(),
        )
        await self.storage.append(
            scan.session_id,
            events=[EventDraft.of(completed, agent_id=None, run_id=None)],
            session_metadata={CURSOR_KEY: cursor.as_dict()},
        )
        return ExtractionOutcome(
            status="completed",
            reason=reason,
            created_memory_ids=plan.created_ids,
            updated_memory_ids=plan.updated_ids,
            files_changed=plan.files_changed,
        )

    async def _tool_loop(
        self,
        session_id: str,
        model: ResolvedModelConfig,
        adapter: ProviderAdapter,
        prompt: str,
        records: dict[str, MemoryRecord],
    ) -> SubmitPayload:
        messages = [ModelMessage(role="user", content=[TextBlock(text=prompt)])]
        tools = job_tools()
        for _turn in range(MAX_TURNS):
            request = job_request(
                model=model,
                assets=self.assets,
                asset_id="memory.extraction",
                session_id=session_id,
                purpose=PURPOSE,
                messages=messages,
                tools=tools,
            )
            completed = await complete(adapter, request)
            if not completed.tool_calls:
                raise SchemaError(
                    ErrorCode.schema_error,
                    f"the extraction model ended without calling {SUBMIT_TOOL}",
                )
            messages.append(ModelMessage(role="assistant", content=_assistant_blocks(completed)))
            for call in completed.tool_calls:
                if call.name == SUBMIT_TOOL:
                    return parse_submit(call.arguments)
            for call in completed.tool_calls:
                messages.append(ModelMessage(role="tool", content=[_tool_result(call, records)]))
        raise SchemaError(
            ErrorCode.schema_error,
            f"the extraction model did not call {SUBMIT_TOOL} within {MAX_TURNS} turns",
        )

    # ---- events ---------------------------------------------------------------------------------
    def _masked(self, value: Any) -> Any:
        if isinstance(value, str):
            return mask_secrets(value, self.redactor)
        if isinstance(value, list):
            return [self._masked(v) for v in value]
        if isinstance(value, dict):
            return {k: self._masked(v) for k, v in value.items()}
        return value

    async def _failed(self, session_id: str, base: dict[str, Any], error: ErrorPayload) -> None:
        failed = ev.MemoryExtractionFailed(
            reason=base["reason"], source_range=base["source_range"], error=error.model_dump(mode="json")
        )
        await self._event(session_id, failed)

    async def _event(self, session_id: str, event: ev.EventPayload) -> None:
        await self.storage.append(session_id, events=[EventDraft.of(event, agent_id=None, run_id=None)])


def _masked_error(error: ErrorPayload, redactor: Redactor) -> ErrorPayload:
    redacted = error.redacted_copy(redactor)
    return redacted.model_copy(update={"message": mask_secrets(redacted.message, redactor)})


def _assistant_blocks(completed: ModelCompleted) -> list[ContentBlock]:
    blocks: list[ContentBlock] = [
        b
        for b in completed.content
        if isinstance(b, TextBlock | JsonBlock) and not (isinstance(b, TextBlock) and not b.text)
    ]
    blocks += [
        ToolCallBlock(tool_call_id=c.tool_call_id, name=c.name, arguments=c.arguments)
        for c in completed.tool_calls
    ]
    return blocks


def _tool_result(call: ToolCall, records: dict[str, MemoryRecord]) -> ToolResultBlock:
    if call.name != READ_TOOL:
        message = f"tool '{call.name}' is not available in this job; use {READ_TOOL} or {SUBMIT_TOOL}"
        return _error_result(call, ErrorCode.tool_not_available, message)
    memory_id = call.arguments.get("memory_id")
    record = records.get(memory_id) if isinstance(memory_id, str) else None
    if record is None:
        return _error_result(
            call, ErrorCode.validation_error, "unknown memory_id; copy an id from the catalog"
        )
    text = json.dumps({"frontmatter": record.front.dump(), "body": record.body}, ensure_ascii=False)
    return ToolResultBlock(tool_call_id=call.tool_call_id, content=[TextBlock(text=text)])


def _error_result(call: ToolCall, code: ErrorCode, message: str) -> ToolResultBlock:
    return ToolResultBlock(
        tool_call_id=call.tool_call_id,
        is_error=True,
        content=[TextBlock(text=message)],
        error=ErrorPayload(code=code, message=message),
    )
