"""ToolRegistry: names, namespaces, duplicates, schemas, the decorator and handler calling
(docs/tools.md#names-and-definitions, docs/tools.md#registering-python-tools)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from agent_core.errors import AgentCoreError, ErrorCode, SchemaError
from agent_core.tools.adapter import ToolAdapter
from agent_core.tools.context import ToolContext
from agent_core.tools.registry import ToolRegistry, call_handler
from agent_core.types.model import ToolCall
from agent_core.types.tools import ToolDefinition
from tests.fixtures.tool_sink import RecordingSink, make_ctx, make_scope

OBJ: dict[str, Any] = {"type": "object", "properties": {}}


def defn(name: str, **kw: Any) -> ToolDefinition:
    return ToolDefinition(
        name=name,
        description=kw.pop("description", "d"),
        input_schema=kw.pop("input_schema", OBJ),
        permission=kw.pop("permission", "readonly"),
        **kw,
    )


async def handler(args: dict[str, Any], ctx: ToolContext) -> str:
    return "ok"


class Adapter:
    def __init__(self, *defs: ToolDefinition) -> None:
        self._defs = list(defs)
        self.closed = 0

    def definitions(self) -> list[ToolDefinition]:
        return self._defs

    async def execute(self, call: ToolCall, ctx: ToolContext) -> Any:
        return call.name

    async def close(self) -> None:
        self.closed += 1


def test_duplicate_name_raises_and_keeps_first() -> None:
    """Case G26."""
    reg = ToolRegistry()
    first = defn("my.tool", description="first")
    reg.register_tool(first, handler)
    with pytest.raises(AgentCoreError) as info:
        reg.register_tool(defn("my.tool", description="second"), handler)
    assert info.value.code == ErrorCode.validation_error
    assert reg.definition("my.tool").description == "first"
    assert reg.names() == ["my.tool"]


def test_reserved_namespaces_for_user_registrations() -> None:
    reg = ToolRegistry()
    for name in ("agent.x", "internal.x", "mcp.x.y"):
        with pytest.raises(AgentCoreError) as info:
            reg.register_tool(defn(name), handler)
        assert info.value.code == ErrorCode.validation_error
        with pytest.raises(AgentCoreError):
            reg.register_adapter(Adapter(defn(name)))
    reg.register_tool(defn("code.my_tool"), handler)
    assert "code.my_tool" in reg


def test_internal_adapters_use_the_privileged_path() -> None:
    reg = ToolRegistry()
    adapter = Adapter(defn("agent.x", tags=["agent", "internal"]), defn("internal.y"), defn("mcp.s.t"))
    reg.register_adapter(adapter, internal=True)
    assert reg.names() == ["agent.x", "internal.y", "mcp.s.t"]
    assert all(e.internal and not e.python for e in reg.entries())
    assert reg.unregister_adapter(adapter) == ["agent.x", "internal.y", "mcp.s.t"]
    assert len(reg) == 0


@pytest.mark.parametrize(
    "name", ["nodot", "a..b", ".a", "a.", "a.b c", "a.b/c", "a.ü", "a.b*", "", "a.b.", "a. b", "a.b\n"]
)
def test_invalid_canonical_names(name: str) -> None:
    reg = ToolRegistry()
    with pytest.raises(AgentCoreError) as info:
        reg.register_tool(defn(name), handler)
    assert info.value.code == ErrorCode.validation_error


@pytest.mark.parametrize("name", ["a.b", "A-1.b_2", "x.y.z", "code.my_tool", "a_b.c-d.e"])
def test_valid_canonical_names(name: str) -> None:
    reg = ToolRegistry()
    reg.register_tool(defn(name), handler)
    assert reg.get(name) is not None


def test_tool_definition_forbids_unknown_fields() -> None:
    with pytest.raises(ValidationError):
        ToolDefinition(name="a.b", description="d", input_schema=OBJ, permission="readonly", unknown_field=1)  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        ToolDefinition(name="a.b", description="d", input_schema=OBJ, permission="admin")  # type: ignore[arg-type]


@pytest.mark.parametrize("keyword", ["oneOf", "anyOf", "allOf", "$ref", "if", "patternProperties"])
def test_out_of_subset_schema_rejected_at_registration(keyword: str) -> None:
    """Case G26."""
    reg = ToolRegistry()
    value: Any = "#/x" if keyword == "$ref" else {"^a": {}} if keyword == "patternProperties" else [{}]
    if keyword == "if":
        value = {"type": "string"}
    schema = {"type": "object", "properties": {"a": {keyword: value}}}
    with pytest.raises(SchemaError) as info:
        reg.register_tool(defn("my.tool", input_schema=schema), handler)
    assert info.value.code == ErrorCode.schema_error
    assert "my.tool" not in reg


def test_adapter_batch_is_atomic() -> None:
    reg = ToolRegistry()
    reg.register_tool(defn("x.taken"), handler)
    with pytest.raises(AgentCoreError):
        reg.register_adapter(Adapter(defn("x.new"), defn("x.taken")))
    assert reg.names() == ["x.taken"]
    with pytest.raises(AgentCoreError):
        reg.register_adapter(Adapter(defn("x.dup"), defn("x.dup")))
    assert "x.dup" not in reg


def test_tags_lowercase_and_timeout_validation() -> None:
    reg = ToolRegistry()
    with pytest.raises(AgentCoreError):
        reg.register_tool(defn("x.a", tags=["Network"]), handler)
    for bad in (0, -5, "100", True, 1.5):
        with pytest.raises(AgentCoreError):
            reg.register_tool(defn("x.b", metadata={"timeout_ms": bad}), handler)
    reg.register_tool(defn("x.b", metadata={"timeout_ms": 50}), handler)
    assert reg.definition("x.b").metadata == {"timeout_ms": 50, "source": "python"}


def test_non_callable_handler_and_non_adapter_rejected() -> None:
    reg = ToolRegistry()
    with pytest.raises(AgentCoreError):
        reg.register_tool(defn("x.a"), "not callable")  # type: ignore[arg-type]
    with pytest.raises(AgentCoreError):
        reg.register_adapter(object())  # type: ignore[arg-type]
    assert isinstance(Adapter(), ToolAdapter)


async def test_close_is_idempotent_and_refuses_registrations() -> None:
    reg = ToolRegistry()
    adapter = Adapter(defn("x.a"))
    reg.register_adapter(adapter)
    await reg.close()
    await reg.close()
    assert adapter.closed == 1
    with pytest.raises(AgentCoreError):
        reg.register_tool(defn("x.b"), handler)


def test_unknown_definition_is_tool_not_available() -> None:
    with pytest.raises(AgentCoreError) as info:
        ToolRegistry().definition("no.such")
    assert info.value.code == ErrorCode.tool_not_available


# -- decorator --------------------------------------------------------------------------------------


async def test_decorator_signature_docstring_and_context(tmp_path: Path) -> None:
    reg = ToolRegistry()
    seen: list[Any] = []

    @reg.tool("my.greet", permission="write", tags=["demo", "demo"], metadata={"concurrency": "serial"})
    async def greet(name: str, ctx: ToolContext, times: int = 1, loud: bool | None = None) -> str:
        """Greets someone.

        Second paragraph is not part of the description.
        """
        seen.append(ctx)
        return ("hi " + name) * times

    assert greet.__name__ == "greet"  # returned unchanged
    d = reg.definition("my.greet")
    assert d.description == "Greets someone."
    assert d.permission == "write"
    assert d.tags == ["demo"]
    assert d.metadata == {"source": "python", "concurrency": "serial"}
    assert d.input_schema["required"] == ["name"]
    assert set(d.input_schema["properties"]) == {"name", "times", "loud"}
    assert "ctx" not in d.input_schema["properties"]
    assert d.input_schema["properties"]["loud"] == {"type": "boolean"}
    assert d.input_schema["additionalProperties"] is False

    scope = make_scope(tmp_path, tmp_path)
    sink = RecordingSink(tmp_path / "art")
    ctx = make_ctx(scope, sink, "my.greet")
    entry = reg.get("my.greet")
    assert entry is not None and entry.python
    out = await entry.adapter.execute(
        ToolCall(tool_call_id="c1", name="my.greet", arguments={"name": "bo", "times": 2}), ctx
    )
    assert out == "hi bohi bo"
    assert seen == [ctx]


class Args(BaseModel):
    path: str
    count: int = 1


async def test_decorator_with_input_model_receives_instance(tmp_path: Path) -> None:
    reg = ToolRegistry()
    got: list[Any] = []

    @reg.tool("my.model", description="explicit", input_model=Args)
    def run(args: Args, ctx: ToolContext) -> dict[str, Any]:
        got.append((args, ctx.tool_name))
        return {"path": args.path, "count": args.count}

    d = reg.definition("my.model")
    assert d.description == "explicit"
    assert d.input_schema["required"] == ["path"]
    entry = reg.get("my.model")
    assert entry is not None
    ctx = make_ctx(make_scope(tmp_path, tmp_path), RecordingSink(tmp_path), "my.model")
    out = await entry.adapter.execute(
        ToolCall(tool_call_id="c", name="my.model", arguments={"path": "p"}), ctx
    )
    assert out == {"path": "p", "count": 1}
    assert isinstance(got[0][0], Args) and got[0][1] == "my.model"


def test_decorator_errors() -> None:
    reg = ToolRegistry()

    def nodoc(a: int) -> None:
        return None

    with pytest.raises(AgentCoreError) as info:
        reg.tool("my.nodoc")(nodoc)
    assert info.value.code == ErrorCode.validation_error

    def unannotated(a) -> None:  # type: ignore[no-untyped-def]
        """Doc."""

    with pytest.raises(AgentCoreError):
        reg.tool("my.unannotated")(unannotated)

    def star(*args: int) -> None:
        """Doc."""

    with pytest.raises(AgentCoreError):
        reg.tool("my.star")(star)

    def two(a: Args, b: int) -> None:
        """Doc."""

    with pytest.raises(AgentCoreError):
        reg.tool("my.two", input_model=Args)(two)

    def union(a: int | str) -> None:
        """Doc."""

    with pytest.raises(SchemaError):
        reg.tool("my.union")(union)
    with pytest.raises(AgentCoreError):
        reg.tool("internal.nope", description="d")(nodoc)
    assert len(reg) == 0


async def test_decorated_handler_validates_with_pydantic(tmp_path: Path) -> None:
    reg = ToolRegistry()

    @reg.tool("my.count", description="d")
    def count(n: int) -> int:
        return n

    entry = reg.get("my.count")
    assert entry is not None
    ctx = make_ctx(make_scope(tmp_path, tmp_path), RecordingSink(tmp_path), "my.count")
    with pytest.raises(AgentCoreError) as info:
        await entry.adapter.execute(ToolCall(tool_call_id="c", name="my.count", arguments={"n": "x"}), ctx)
    assert info.value.code == ErrorCode.validation_error
    assert info.value.details["errors"][0]["path"] == "$.n"


# -- handler calling --------------------------------------------------------------------------------


async def test_sync_handlers_run_in_a_thread() -> None:
    main = threading.get_ident()

    def sync(args: dict[str, Any], ctx: Any) -> int:
        return threading.get_ident()

    assert await call_handler(sync, {}, None) != main

    class AsyncCallable:
        async def __call__(self, args: dict[str, Any], ctx: Any) -> str:
            return "async-object"

    assert await call_handler(AsyncCallable(), {}, None) == "async-object"

    async def inner() -> str:
        return "awaited"

    assert await call_handler(lambda a, c: inner(), {}, None) == "awaited"


async def test_sync_handler_cancellation_waits_for_the_thread() -> None:
    release = threading.Event()
    finished: list[bool] = []

    def slow(args: dict[str, Any], ctx: Any) -> str:
        release.wait(5)
        finished.append(True)
        return "late"

    task = asyncio.create_task(call_handler(slow, {}, None))
    await asyncio.sleep(0.05)
    task.cancel()
    await asyncio.sleep(0.05)
    assert not task.done()  # cancellation takes effect only when the thread returns
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert finished == [True]
