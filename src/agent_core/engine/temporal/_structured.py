"""Structured output (``output_schema``, docs/runs.md#structured-output) of a run on the temporal engine.

The loop judges answers inside its model step (``answer_step`` → ``OutputPolicy.settle``), so a run with
an output schema needs only three things to cross processes, all through the shared store:

* the schema and ``output_retries`` travel in the run row's metadata (:func:`record_output_schema`); a
  worker rebuilds the :class:`OutputSchema` from it (:func:`output_schema_of`) — the Pydantic class
  itself when the worker can import it, else its JSON schema;
* the attempts already spent are counted from the run's stored feedback nodes when a run moves to
  another worker (:func:`restore_attempts`);
* the accepted value is read back from the run's stored final answer by the starting runtime
  (:func:`stored_output`), validated with the caller's own schema (a model instance for a Pydantic class).
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from agent_core._jsontext import compact_json
from agent_core._loop._output import OUTPUT_TOOL_NAME, OutputSchema, parse_text
from agent_core._loop.spec import LoopSpec
from agent_core._storage.protocol import SessionStore
from agent_core.types.content import ToolCallBlock, ToolResultBlock, text_of
from agent_core.types.enums import MessageRole, NodeType
from agent_core.types.runtime import Node

SCHEMA_KEY = "output_schema"
RETRIES_KEY = "output_retries"


async def record_output_schema(
    storage: SessionStore, run_id: str, schema: OutputSchema, retries: int | None
) -> None:
    """Adds the run's output schema and retries to its row's metadata (before its workflow starts)."""
    row = await storage.get_run(run_id)
    meta = json.loads(row.metadata_json or "{}") if row is not None else {}
    model = schema.model
    meta[SCHEMA_KEY] = {
        "name": schema.name,
        "json_schema": schema.json_schema,
        "model": f"{model.__module__}:{model.__qualname__}" if model is not None else None,
    }
    meta[RETRIES_KEY] = retries
    await storage.update_run(run_id, metadata_json=compact_json(meta))


def output_schema_of(meta: dict[str, Any]) -> OutputSchema | None:
    """The run's :class:`OutputSchema` as recorded by :func:`record_output_schema`, else ``None``."""
    stored = meta.get(SCHEMA_KEY)
    if not isinstance(stored, dict):
        return None
    model = _import_model(stored.get("model"))
    if model is not None:
        return OutputSchema(model)
    schema = OutputSchema.__new__(OutputSchema)  # the schema as the caller's process exported it
    schema.model = None
    schema.name = str(stored.get("name") or "output")
    schema.json_schema = dict(stored.get("json_schema") or {})
    return schema


def _import_model(path: object) -> type[BaseModel] | None:
    if not isinstance(path, str) or ":" not in path:
        return None
    module_name, qualname = path.split(":", 1)
    try:
        target: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError):
        return None
    return target if isinstance(target, type) and issubclass(target, BaseModel) else None


def restore_attempts(loop: LoopSpec, run_id: str) -> None:
    """The invalid answers this run already got feedback for (a run continued on another worker)."""
    if loop.output is None:
        return
    loop.output.attempts = sum(1 for node in loop.recorder.cursor.path if _feedback(node, run_id))


def _feedback(node: Node, run_id: str) -> bool:
    if node.run_id != run_id:
        return False
    if node.node_type == NodeType.system_note:
        return node.metadata.get("source") == "structured_output"
    if node.role == MessageRole.tool and node.metadata.get("structured_output"):
        return any(isinstance(b, ToolResultBlock) and b.is_error for b in node.content)
    return False


def stored_output(schema: OutputSchema, nodes: Sequence[Node]) -> tuple[bool, Any]:
    """``(True, value)`` from a completed run's stored final answer (its accepted ``output`` call, else
    its final JSON text), validated with ``schema``; ``(False, None)`` when there is none."""
    accepted = [
        b.tool_call_id
        for n in nodes
        if n.role == MessageRole.tool and n.metadata.get("structured_output")
        for b in n.content
        if isinstance(b, ToolResultBlock) and not b.is_error
    ]
    answers = [n for n in nodes if n.role == MessageRole.assistant and not n.metadata.get("partial")]
    if accepted:
        for node in reversed(answers):
            for block in node.content:
                if isinstance(block, ToolCallBlock) and block.tool_call_id == accepted[-1]:
                    if block.name != OUTPUT_TOOL_NAME:
                        return False, None
                    value, errors = schema.validate(block.arguments)
                    return (not errors, value)
        return False, None
    if not answers:
        return False, None
    parsed, problem = parse_text(text_of(answers[-1].content))
    if problem is not None:
        return False, None
    value, errors = schema.validate(parsed)
    return (not errors, value)
