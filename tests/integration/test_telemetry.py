"""OpenTelemetry GenAI spans from the event bus (docs/runs.md#telemetry): span tree, attributes, content
capture and redaction; exporters: in-memory (SDK), a real OTLP/HTTP receiver on 127.0.0.1, and the JSONL
file."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agent_core import AgentCoreError, AgentRuntime, ErrorCode, RunStatus, ToolDefinition
from agent_core.telemetry import _setup
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, text, tool_calls
from tests.fixtures.multi_agent import ChildRouter, child_done, routed_fake
from tests.fixtures.runtime import collect, open_runtime

SECRET = "s3cr3t-value-7f6e5d4c3b2a"
ECHO = ToolDefinition(
    name="demo.echo",
    description="Echo x.",
    input_schema={"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]},
    permission="readonly",
)
CONTENT_KEYS = {
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
}


def register_echo(rt: AgentRuntime) -> None:
    async def handler(args: dict[str, Any], ctx: object) -> str:
        return f"echo {args['x']}"

    rt.register_tool(ECHO, handler)


def tree_fake() -> tuple[FakeProvider, ChildRouter]:
    """Parent: echo, then a sub-agent (which echoes once), then an answer: two tools and a sub-agent."""
    router = ChildRouter().add(
        "MARK-TEL", tool_calls(("demo.echo", {"x": "child"}, "call_child_echo")), child_done("child ok")
    )
    fake = routed_fake(
        router,
        tool_calls(("demo.echo", {"x": "parent"}, "call_echo")),
        tool_calls(("agent.create_sub_agent", {"task": "MARK-TEL look"}, "call_sub")),
        text("all done"),
    )
    return fake, router


@pytest.fixture
def memory_exporter(monkeypatch: pytest.MonkeyPatch) -> InMemorySpanExporter:
    """The runtime's own tracer provider and batch processor, exporting into memory."""
    exporter = InMemorySpanExporter()
    monkeypatch.setattr(_setup, "span_exporter", lambda section: exporter)
    return exporter


def telemetry(**extra: Any) -> dict[str, Any]:
    return {"telemetry": {"enabled": True, **extra}}


async def run_tree(env: SoongEnv, config: dict[str, Any], prompt: str = "trace this") -> str:
    fake, _router = tree_fake()
    async with open_runtime(env, fake, config=config) as rt:
        register_echo(rt)
        run = await rt.start(prompt)
        await collect(run)
        assert run.status == RunStatus.completed, run.error
        return run.run_id


def by_name(spans: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


async def test_span_tree_attributes_and_no_content_by_default(
    soong_env: SoongEnv, memory_exporter: InMemorySpanExporter
) -> None:
    run_id = await run_tree(soong_env, telemetry())
    spans = list(memory_exporter.get_finished_spans())
    ids = {s.context.span_id: s for s in spans}
    root = by_name(spans, "invoke_agent main")
    assert len(root) == 1 and root[0].parent is None
    root_span = root[0]
    assert root_span.attributes["soong.run_id"] == run_id
    assert root_span.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root_span.attributes["gen_ai.request.model"] == "test-model"
    assert root_span.attributes["soong.end_reason"] == "completed"
    assert len({s.context.trace_id for s in spans}) == 1

    def children(span: ReadableSpan) -> list[str]:
        return sorted(s.name for s in spans if s.parent and s.parent.span_id == span.context.span_id)

    assert children(root_span) == [
        "chat test-model",
        "chat test-model",
        "chat test-model",
        "execute_tool agent.create_sub_agent",
        "execute_tool demo.echo",
    ]
    agent_tool = by_name(spans, "execute_tool agent.create_sub_agent")[0]
    [child] = [s for s in spans if s.name.startswith("invoke_agent") and s is not root_span]
    assert child.parent is not None and ids[child.parent.span_id] is agent_tool
    assert child.attributes["soong.parent_tool_call_id"] == "call_sub"
    assert children(child) == ["chat test-model", "chat test-model", "execute_tool demo.echo"]
    assert children(agent_tool) == [child.name]

    chats = by_name(spans, "chat test-model")
    assert len(chats) == 5
    first_chat = min(chats, key=lambda s: s.start_time or 0)
    assert dict(first_chat.attributes) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "fake",
        "gen_ai.request.model": "test-model",
        "gen_ai.usage.input_tokens": 10,
        "gen_ai.usage.output_tokens": 5,
        "gen_ai.response.finish_reasons": ("tool_use",),
    }
    last_chat = max(chats, key=lambda s: s.start_time or 0)
    assert last_chat.attributes["gen_ai.response.finish_reasons"] == ("end_turn",)
    echo = next(s for s in spans if s.attributes.get("gen_ai.tool.call.id") == "call_echo")
    assert dict(echo.attributes) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "demo.echo",
        "gen_ai.tool.call.id": "call_echo",
        "soong.tool.outcome": "completed",
    }
    assert root_span.attributes["gen_ai.usage.input_tokens"] == 30
    for span in spans:
        assert not CONTENT_KEYS & set(span.attributes or {}), span.name
        assert span.end_time is not None and span.start_time is not None
        assert span.end_time >= span.start_time


async def test_content_capture_is_redacted(
    soong_env: SoongEnv, memory_exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOONG_TEST_SECRET_KEY", SECRET)
    fake = FakeProvider(tool_calls(("demo.echo", {"x": f"use {SECRET}"}, "call_s")), text(f"key {SECRET} ok"))
    config = {**telemetry(capture_content=True), "model": {"api_key_env": "SOONG_TEST_SECRET_KEY"}}
    async with open_runtime(soong_env, fake, config=config) as rt:
        register_echo(rt)
        run = await rt.start(f"my key is {SECRET}")
        await collect(run)
    spans = list(memory_exporter.get_finished_spans())
    dumped = json.dumps([dict(s.attributes or {}) for s in spans], default=str)
    assert SECRET not in dumped and "[REDACTED]" in dumped
    root = by_name(spans, "invoke_agent main")[0]
    assert json.loads(str(root.attributes["gen_ai.input.messages"])) == [
        {"role": "user", "parts": [{"type": "text", "content": "my key is [REDACTED]"}]}
    ]
    tool = by_name(spans, "execute_tool demo.echo")[0]
    assert "[REDACTED]" in str(tool.attributes["gen_ai.tool.call.arguments"])
    assert "echo use [REDACTED]" in str(tool.attributes["gen_ai.tool.call.result"])
    final = max(by_name(spans, "chat test-model"), key=lambda s: s.start_time or 0)
    assert "key [REDACTED] ok" in str(final.attributes["gen_ai.output.messages"])


class _Receiver(BaseHTTPRequestHandler):
    bodies: list[tuple[str, str, bytes]]

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", "0"))
        self.bodies.append((self.path, self.headers.get("content-type", ""), self.rfile.read(length)))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture
def otlp_receiver() -> Iterator[tuple[str, list[tuple[str, str, bytes]]]]:
    bodies: list[tuple[str, str, bytes]] = []
    handler = type("Handler", (_Receiver,), {"bodies": bodies})
    server = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", bodies
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _attrs(span: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in span.attributes:
        value = kv.value
        kind = value.WhichOneof("value")
        if kind == "array_value":
            out[kv.key] = tuple(v.string_value for v in value.array_value.values)
        else:
            out[kv.key] = getattr(value, kind)
    return out


async def test_otlp_http_export_to_a_real_receiver(
    soong_env: SoongEnv, otlp_receiver: tuple[str, list[tuple[str, str, bytes]]]
) -> None:
    endpoint, bodies = otlp_receiver
    run_id = await run_tree(soong_env, telemetry(exporter="otlp", endpoint=endpoint))
    assert bodies, "the runtime's close flushes the batch to the receiver"
    spans = []
    for path, content_type, body in bodies:
        assert path == "/v1/traces" and content_type == "application/x-protobuf"
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource_spans in request.resource_spans:
            service = {kv.key: kv.value.string_value for kv in resource_spans.resource.attributes}
            assert service["service.name"] == "soong-agent"
            for scope_spans in resource_spans.scope_spans:
                spans.extend(scope_spans.spans)
    names = sorted(s.name for s in spans)
    assert names.count("chat test-model") == 5 and names.count("execute_tool demo.echo") == 2
    by_id = {s.span_id: s for s in spans}
    root = next(s for s in spans if s.name == "invoke_agent main")
    assert root.parent_span_id == b"" and _attrs(root)["soong.run_id"] == run_id
    child = next(s for s in spans if s.name.startswith("invoke_agent") and s is not root)
    assert by_id[child.parent_span_id].name == "execute_tool agent.create_sub_agent"
    assert by_id[by_id[child.parent_span_id].parent_span_id] is root
    chat = next(s for s in spans if s.name == "chat test-model")
    attrs = _attrs(chat)
    assert attrs["gen_ai.operation.name"] == "chat" and attrs["gen_ai.provider.name"] == "fake"
    assert attrs["gen_ai.usage.input_tokens"] == 10 and attrs["gen_ai.usage.output_tokens"] == 5
    assert attrs["gen_ai.response.finish_reasons"] in {("tool_use",), ("end_turn",)}
    tool = next(s for s in spans if _attrs(s).get("gen_ai.tool.call.id") == "call_child_echo")
    assert by_id[tool.parent_span_id] is child and _attrs(tool)["soong.tool.outcome"] == "completed"
    for span in spans:
        assert not CONTENT_KEYS & set(_attrs(span))


async def test_jsonl_exporter_writes_one_span_per_line(soong_env: SoongEnv) -> None:
    await run_tree(soong_env, telemetry(exporter="jsonl"))
    path = soong_env.home / "traces.jsonl"
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 10  # 2 runs + 5 chats + 3 tools
    assert {line["name"] for line in lines} >= {"invoke_agent main", "chat test-model"}
    assert path.stat().st_mode & 0o077 == 0


async def test_missing_otel_extra_is_a_config_error(
    soong_env: SoongEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "agent_core.telemetry._setup", None)  # as if opentelemetry were absent
    with pytest.raises(AgentCoreError) as info:
        async with open_runtime(soong_env, FakeProvider(), config=telemetry()) as rt:
            await rt.start("hello")
    assert info.value.code == ErrorCode.config_error
    assert "telemetry.enabled" in info.value.message and "soong-agent[otel]" in info.value.message
    assert info.value.details["key"] == "telemetry.enabled"


def test_telemetry_off_imports_no_opentelemetry(soong_env: SoongEnv) -> None:
    soong_env.write_config()
    script = (
        "import asyncio, sys\n"
        "from agent_core import AgentRuntime, ProviderRegistry\n"
        "from tests.fixtures.fake_provider import FakeProvider, text\n"
        "async def main():\n"
        "    fake = FakeProvider(text('hi'))\n"
        f"    async with AgentRuntime(project_dir={str(soong_env.project)!r},"
        " provider_registry=ProviderRegistry({'fake': fake.factory})) as rt:\n"
        "        run = await rt.start('hello')\n"
        "        await run.wait()\n"
        "        assert run.status == 'completed', run.error\n"
        "asyncio.run(main())\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(('opentelemetry', 'agent_core.telemetry')))\n"
        "print(loaded)\n"
    )
    env = {
        "SOONG_AGENT_HOME": str(soong_env.home),
        "HOME": str(soong_env.home.parent),
        "PATH": "/usr/bin:/bin",
    }
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60, cwd=root
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
