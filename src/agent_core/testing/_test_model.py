"""``TestModel``: calls every offered tool once with schema-valid arguments, then answers.

Arguments are generated from each tool's JSON schema (the core subset): every property is filled
(``enum``/``default``/``examples`` first, then the smallest value that satisfies the bounds), and the
result is checked against the schema. When the run asks for structured output through the ``output``
tool, that tool is kept for last: the final answer is a schema-valid ``output`` call.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from agent_core._loop._output import OUTPUT_TOOL_NAME
from agent_core.errors import ErrorCode, InvalidArgumentError
from agent_core.testing._models import DEFAULT_PROVIDER_KEY, CallTool, InProcessModel, ModelReply
from agent_core.tools._schema import schema_errors
from agent_core.types.model import ModelRequest
from agent_core.types.tools import ToolDefinition


def example_value(schema: Mapping[str, Any]) -> Any:
    """A value valid against ``schema`` (core subset); ``validation_error`` when none can be built."""
    for key in ("enum", "examples"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            return options[0]
    if "default" in schema:
        return schema["default"]
    kind = schema.get("type", "object")
    if kind == "object":
        props = schema.get("properties") or {}
        return {name: example_value(sub) for name, sub in props.items()}
    if kind == "array":
        count = int(schema.get("minItems", 0) or 0) or 1
        items = schema.get("items") or {"type": "string"}
        return [example_value(items) for _ in range(count)]
    if kind == "string":
        if "pattern" in schema:
            raise InvalidArgumentError(
                ErrorCode.validation_error,
                "TestModel cannot generate a string for a 'pattern' without 'examples' or 'default'",
                details={"schema": dict(schema)},
            )
        return "a" * max(1, int(schema.get("minLength", 1) or 1))
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum"))
        value = 0 if low is None else int(low) + (1 if "exclusiveMinimum" in schema else 0)
        if low is not None and value < low:
            value += 1
        return value if kind == "integer" else float(value)
    if kind == "boolean":
        return False
    raise InvalidArgumentError(
        ErrorCode.validation_error, f"TestModel cannot generate a value of type {kind!r}"
    )


def tool_arguments(tool: ToolDefinition) -> dict[str, Any]:
    """Schema-valid arguments for ``tool``."""
    value = example_value(tool.input_schema)
    errors = schema_errors(tool.input_schema, value)
    if errors or not isinstance(value, dict):
        raise InvalidArgumentError(
            ErrorCode.validation_error,
            f"TestModel could not build valid arguments for {tool.name!r}: {errors}",
            details={"tool": tool.name, "errors": errors},
        )
    return value


class TestModel(InProcessModel):
    """First reply: one call of every offered tool (``tools`` limits which, by name); then ``final_text``.

    The calls come in one turn, read-only tools first (the runtime skips the calls after a failed write
    call of a turn, e.g. a denied one). Only the model's first request calls tools; every later request
    (a child agent's included) gets the answer.

    ``calls`` lists every call made, as ``(tool name, arguments)``.
    """

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        *,
        tools: Collection[str] | None = None,
        final_text: str = "TestModel: done",
        provider_key: str = DEFAULT_PROVIDER_KEY,
    ) -> None:
        super().__init__(provider_key=provider_key)
        self.only = set(tools) if tools is not None else None
        self.final_text = final_text
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self._called = False

    async def reply(self, request: ModelRequest) -> ModelReply:
        offered = [t for t in request.tools if t.name != OUTPUT_TOOL_NAME]
        if self.only is not None:
            offered = [t for t in offered if t.name in self.only]
        if not self._called and offered:
            self._called = True
            # read-only tools first: the runtime skips the rest of a turn after a failed write call
            ordered = sorted(offered, key=lambda t: t.permission != "readonly")
            return self._call([(t.name, tool_arguments(t)) for t in ordered])
        output = next((t for t in request.tools if t.name == OUTPUT_TOOL_NAME), None)
        if output is not None:
            return self._call([(output.name, tool_arguments(output))])
        return ModelReply(text=self.final_text)

    def _call(self, calls: list[tuple[str, dict[str, Any]]]) -> ModelReply:
        self.calls.extend(calls)
        return ModelReply(tool_calls=[CallTool(name, args) for name, args in calls])
