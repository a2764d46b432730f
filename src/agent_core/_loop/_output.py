"""Structured output of a run (docs/runs.md#structured-output): schema, request shaping, validation and
retries.

:class:`OutputSchema` is the target (a Pydantic model class or a core-subset JSON schema).
:class:`OutputPolicy` is what the loop driver consults for one run:

* :meth:`OutputPolicy.prepare` shapes every request: the provider's native JSON mode where it has one
  (OpenAI ``response_format`` json_schema, the Responses API's ``text.format``, Ollama ``format``), else a final ``output`` tool
  (Anthropic and every other adapter), plus one system block that states the contract;
* :meth:`OutputPolicy.settle` judges a completed model message: a turn that calls other tools is not an
  answer (``"tools"``); a valid answer is ``"accepted"`` (the value is kept on the policy); an invalid one
  goes back to the model (``"retry"``: a tool result with ``is_error`` for an ``output`` call, else a
  system note) until ``max_retries`` is spent, then the run fails with ``validation_error`` whose details
  carry the errors and the last invalid output.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from agent_core._loop.outcome import LoopOutcome
from agent_core._loop.recorder import RunRecorder
from agent_core.errors import ErrorCode, InvalidArgumentTypeError, SchemaError
from agent_core.types.content import ErrorPayload, TextBlock, ToolResultBlock, text_of
from agent_core.types.enums import EndReason, MessageRole, NodeType, RunStatus
from agent_core.types.model import ModelCompleted, ModelRequest, SystemBlock
from agent_core.types.tools import ToolDefinition

OUTPUT_TOOL_NAME = "output"
"""The final-answer tool offered when the provider has no native JSON mode."""
DEFAULT_OUTPUT_RETRIES = 2
"""Invalid answers sent back to the model before the run fails (``runtime.start(output_retries=...)``)."""
NATIVE_PROVIDERS = frozenset({"openai", "openai_responses", "ollama"})
_FENCE = re.compile(r"^\s*```(?:json)?\s*\n(.*?)\n?```\s*$", re.S)
_MAX_SHOWN_OUTPUT = 4000

Step = Literal["tools", "retry", "accepted"]


class OutputSchema:
    """A structured-output target: a Pydantic model class or a JSON schema (the core subset).

    Construction checks the schema: a JSON schema outside the subset or a Pydantic class that cannot be
    exported is a ``schema_error``; any other value is a ``validation_error``.
    """

    def __init__(self, target: type[BaseModel] | Mapping[str, Any]) -> None:
        from agent_core.tools._schema import check_schema, model_input_schema

        self.model: type[BaseModel] | None = None
        if isinstance(target, type) and issubclass(target, BaseModel):
            self.model = target
            self.name = target.__name__
            try:
                self.json_schema: dict[str, Any] = model_input_schema(target)
            except SchemaError:
                self.json_schema = target.model_json_schema()
        elif isinstance(target, Mapping):
            self.name = str(target.get("title") or "output")
            self.json_schema = json.loads(json.dumps(dict(target)))
            check_schema(self.json_schema, where="output_schema")
        else:
            raise InvalidArgumentTypeError(
                ErrorCode.validation_error,
                f"output_schema must be a Pydantic model class or a JSON schema dict, "
                f"got {type(target).__name__}",
            )

    def validate(self, value: Any) -> tuple[Any, list[dict[str, str]]]:
        """``(validated value, [])`` or ``(None, [{path, message}, ...])``."""
        if self.model is not None:
            try:
                return self.model.model_validate(value), []
            except ValidationError as exc:
                return None, [
                    {
                        "path": "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in e["loc"]),
                        "message": e["msg"],
                    }
                    for e in exc.errors()
                ]
        from agent_core.tools._schema import schema_errors

        errors = schema_errors(self.json_schema, value)
        return (None, errors) if errors else (value, [])

    def dump(self, value: Any) -> Any:
        """The JSON-compatible form of a validated value."""
        return value.model_dump(mode="json") if isinstance(value, BaseModel) else value


def parse_text(text: str) -> tuple[Any, str | None]:
    """Parses a text answer as JSON (one surrounding code fence is tolerated)."""
    fenced = _FENCE.match(text)
    body = fenced.group(1) if fenced else text
    if not body.strip():
        return None, "the answer is empty; a JSON value was expected"
    try:
        return json.loads(body), None
    except (json.JSONDecodeError, RecursionError) as exc:
        return None, f"the answer is not valid JSON: {exc}"


class OutputPolicy:
    """The structured-output state of one run (see the module docstring)."""

    def __init__(self, schema: OutputSchema, *, provider_key: str, max_retries: int) -> None:
        self.schema = schema
        self.provider_key = provider_key
        self.mode: Literal["native", "tool"] = "native" if provider_key in NATIVE_PROVIDERS else "tool"
        self.max_retries = max_retries
        self.attempts = 0
        self.accepted = False
        self.value: Any = None

    # -- requests ---------------------------------------------------------------------------------
    def tool_definition(self) -> ToolDefinition:
        return ToolDefinition(
            name=OUTPUT_TOOL_NAME,
            description="Give your final answer. Call this tool exactly once, alone, when you are done; "
            "its arguments are the answer.",
            input_schema=self.schema.json_schema,
            permission="readonly",
            metadata={"structured_output": True},
        )

    def prepare(self, request: ModelRequest) -> ModelRequest:
        """Adds the native JSON option or the ``output`` tool, and the contract's system block."""
        schema_text = json.dumps(self.schema.json_schema, sort_keys=True)
        update: dict[str, Any] = {}
        if self.mode == "tool":
            how = (
                f"When you have the final answer, call the `{OUTPUT_TOOL_NAME}` tool once, alone, with the "
                "answer as its arguments. Do not give the final answer as plain text."
            )
            update["tools"] = [*request.tools, self.tool_definition()]
        else:
            how = "Your final message must be only a JSON value matching the schema, with no other text."
            options = dict(request.provider_options.get(self.provider_key, {}))
            if self.provider_key == "openai":
                options["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {
                        "name": _schema_name(self.schema.name),
                        "schema": self.schema.json_schema,
                    },
                }
            elif self.provider_key == "openai_responses":
                options["text"] = {
                    "format": {
                        "type": "json_schema",
                        "name": _schema_name(self.schema.name),
                        "schema": self.schema.json_schema,
                    }
                }
            else:
                options["format"] = self.schema.json_schema
            update["provider_options"] = {**request.provider_options, self.provider_key: options}
        block = SystemBlock(
            block_id="structured_output",
            source="runtime:structured_output",
            content=f"# Structured output\n{how}\nJSON schema of the answer: {schema_text}",
        )
        update["system"] = [*request.system, block]
        return request.model_copy(update=update)

    # -- answers ----------------------------------------------------------------------------------
    async def settle(self, completed: ModelCompleted, rec: RunRecorder) -> Step | LoopOutcome:
        """Judges one completed message (see the module docstring); writes the feedback node on retry."""
        calls = completed.tool_calls
        output_calls = [c for c in calls if c.name == OUTPUT_TOOL_NAME]
        if self.mode == "tool" and output_calls and len(calls) == 1:
            call = calls[0]
            problem = call.metadata.get("arguments_error")
            raw: Any = call.metadata.get("raw_arguments") if problem else call.arguments
            errors = [{"path": "$", "message": str(problem)}] if problem else []
            value = None
            if not errors:
                value, errors = self.schema.validate(call.arguments)
            text = "output accepted" if not errors else _feedback(errors)
            await rec.write_node(
                role=MessageRole.tool,
                node_type=NodeType.message,
                content=[
                    ToolResultBlock(
                        tool_call_id=call.tool_call_id,
                        is_error=bool(errors),
                        content=[TextBlock(text=text)],
                    )
                ],
                metadata={"tool_name": OUTPUT_TOOL_NAME, "structured_output": True},
            )
            return self._judge(value, errors, raw)
        if calls:
            return "tools"
        if completed.stop_reason.reason == "max_tokens":
            return "tools"  # the driver asks the model to continue a cut answer
        text = text_of(completed.content)
        parsed, problem = parse_text(text)
        if problem is not None:
            errors = [{"path": "$", "message": problem}]
        else:
            parsed, errors = self.schema.validate(parsed)
        step = self._judge(parsed, errors, text)
        if step == "retry":
            await rec.write_node(
                role=MessageRole.user,
                node_type=NodeType.system_note,
                content=[TextBlock(text=_feedback(errors))],
                metadata={"synthetic": True, "source": "structured_output"},
            )
        return step

    def _judge(self, value: Any, errors: list[dict[str, str]], raw: Any) -> Step | LoopOutcome:
        if not errors:
            self.accepted, self.value = True, value
            return "accepted"
        self.attempts += 1
        if self.attempts <= self.max_retries:
            return "retry"
        shown = raw if not isinstance(raw, str) else raw[:_MAX_SHOWN_OUTPUT]
        error = ErrorPayload(
            code=ErrorCode.validation_error,
            message=f"the model's output did not match the output schema after {self.attempts} "
            f"attempt(s): " + "; ".join(f"{e['path']}: {e['message']}" for e in errors[:5]),
            details={
                "errors": errors,
                "last_output": shown,
                "attempts": self.attempts,
                "max_retries": self.max_retries,
                "config_key": "runtime.start(output_retries=...)",
            },
        )
        return LoopOutcome(RunStatus.failed, EndReason.failed, error=error)


def _schema_name(name: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64]
    return cleaned or "output"


def _feedback(errors: list[dict[str, str]]) -> str:
    lines = "\n".join(f"- {e['path']}: {e['message']}" for e in errors[:10])
    return (
        "Your answer does not match the required output schema:\n"
        f"{lines}\nFix these problems and give the complete answer again."
    )


def output_policy(schema: OutputSchema | None, retries: int | None, provider_key: str) -> OutputPolicy | None:
    """The policy of a run started with ``output_schema``, else ``None``."""
    if schema is None:
        return None
    return OutputPolicy(
        schema, provider_key=provider_key, max_retries=DEFAULT_OUTPUT_RETRIES if retries is None else retries
    )
