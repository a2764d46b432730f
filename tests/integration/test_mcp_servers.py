"""McpManager against real MCP server processes (``tests/fixtures/mcp_server.py``, stdio and HTTP).

Covers N1–N8 at manager + tool-pipeline level and docs/hooks-and-mcp.md; plus
transport failures during a call, call timeouts, progress and pagination.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from agent_core._hooks import HooksDispatcher, load_hooks
from agent_core._hooks.config import HOOKS_FILENAME
from agent_core._mcp import McpManager, load_mcp_catalog
from agent_core._mcp.catalog import MCP_FILENAME
from agent_core._redaction import Redactor
from agent_core.config.loader import LoadedConfig, load_config
from agent_core.tools._effective import EffectiveTools, compute_effective_tools
from agent_core.tools._pipeline import ToolExecutor
from agent_core.tools.context import RunScope
from agent_core.tools.registry import ToolRegistry
from agent_core.types.content import ArtifactRefBlock, JsonBlock, TextBlock
from agent_core.types.enums import AgentRole, EventType
from tests.fixtures.env import SoongEnv
from tests.fixtures.tool_pipeline import PermissionRecorder, make_executor, tool_call
from tests.fixtures.tool_sink import RecordingSink, make_scope

SERVER = str(Path(__file__).resolve().parents[1] / "fixtures" / "mcp_server.py")
HOOK_SCRIPT = str(Path(__file__).resolve().parents[1] / "fixtures" / "hook_script.py")
ECHO: dict[str, Any] = {"name": "echo"}
WRITE_NOTE: dict[str, Any] = {"name": "write_note", "annotations": {"readOnlyHint": False}}
READ_ONLY: dict[str, Any] = {"name": "lookup", "annotations": {"readOnlyHint": True}}


def stdio(tools: list[dict[str, Any]], log: Path | None = None, *extra: str, **entry: Any) -> dict[str, Any]:
    args = [SERVER, "--tools", json.dumps(tools), *extra]
    if log is not None:
        args += ["--log", str(log)]
    return {"command": sys.executable, "args": args, **entry}


def methods(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def starts(log: Path) -> list[int]:
    return [int(line.split()[1]) for line in methods(log) if line.startswith("start ")]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class McpHarness:
    """mcp.json + config + registry + manager for one test; closed at teardown."""

    def __init__(
        self,
        env: SoongEnv,
        tmp_path: Path,
        servers: dict[str, Any],
        hooks: dict[str, Any] | None,
        **config: Any,
    ) -> None:
        env.write_home(MCP_FILENAME, json.dumps({"mcpServers": servers}))
        if hooks is not None:
            env.write_home(HOOKS_FILENAME, json.dumps({"version": 1, "hooks": hooks}))
        env.write_config(**config)
        self.env = env
        self.config: LoadedConfig = load_config(home_dir=env.home, project_dir=env.project)
        self.registry = ToolRegistry()
        self.redactor = Redactor()
        self.clock = FakeClock()
        self.manager = McpManager(
            load_mcp_catalog(self.config),
            self.config.settings,
            registry=self.registry,
            redactor=self.redactor,
            clock=self.clock,
        )
        self.sink = RecordingSink(tmp_path / "artifacts")

    async def start_run(
        self, role: AgentRole = AgentRole.main, needed: bool = True
    ) -> tuple[RunScope, EffectiveTools, set[str]]:
        failed = await self.manager.ensure_connected(needed, self.sink.emit)
        effective = compute_effective_tools(
            self.registry.definitions(), self.config.settings, role, failed_mcp_servers=failed
        )
        scope = make_scope(self.env.project, self.env.home, role=role, effective_tools=effective.names)
        return scope, effective, failed

    def executor(self, callback: Any = None) -> ToolExecutor:
        hooks = load_hooks(self.config, redactor=self.redactor)
        executor, _ = make_executor(
            self.registry, self.config.settings, callback=callback, hooks=hooks, redactor=self.redactor
        )
        return executor

    def failures(self) -> list[dict[str, Any]]:
        return [e.payload for e in self.sink.of_type(EventType.mcp_server_failed)]


@pytest.fixture
async def harness(soong_env: SoongEnv, tmp_path: Path) -> AsyncIterator[Callable[..., McpHarness]]:
    made: list[McpHarness] = []

    def make(servers: dict[str, Any], hooks: dict[str, Any] | None = None, **config: Any) -> McpHarness:
        h = McpHarness(soong_env, tmp_path, servers, hooks, **config)
        made.append(h)
        return h

    yield make
    for h in made:
        await h.manager.close()


async def test_lazy_connect_then_discovery(
    harness: Callable[..., McpHarness], soong_env: SoongEnv, tmp_path: Path
) -> None:
    """Case N1."""
    log, project_log = tmp_path / "srv.log", tmp_path / "proj.log"
    project_entry = {"mcpServers": {"proj": stdio([ECHO], project_log)}}
    soong_env.write_project(".soong-agent/mcp.json", json.dumps(project_entry))
    soong_env.write_project(".mcp.json", json.dumps(project_entry))
    h = harness({"srv": stdio([ECHO, WRITE_NOTE], log)})
    assert not log.exists(), "nothing starts at startup"
    scope, effective, failed = await h.start_run(needed=False)
    assert not log.exists() and failed == {"srv"} and not any(n.startswith("mcp.") for n in effective.names)
    scope, effective, failed = await h.start_run()
    assert failed == set()
    assert methods(log)[1:] == ["initialize", "notifications/initialized", "tools/list"]
    assert {"mcp.srv.echo", "mcp.srv.write_note"} <= effective.names
    assert not project_log.exists()
    allow = PermissionRecorder.always("allow_once")
    result = (
        await h.executor(allow).execute_turn([tool_call("mcp.srv.echo", "e1", text="hi")], scope, h.sink)
    ).results[0]
    assert not result.is_error and result.content == [TextBlock(text='{"text": "hi"}')]
    assert methods(log)[-1] == "tools/call"


async def test_broken_server_is_isolated(harness: Callable[..., McpHarness], tmp_path: Path) -> None:
    """Cases N2, N6."""
    broken_log = tmp_path / "broken.log"
    h = harness(
        {
            "one": stdio([ECHO]),
            "two": stdio([ECHO]),
            "broken": stdio([ECHO], broken_log, "--broken"),
        }
    )
    scope, effective, failed = await h.start_run()
    assert failed == {"broken"}
    assert {"mcp.one.echo", "mcp.two.echo"} <= effective.names
    assert not any(n.startswith("mcp.broken.") for n in effective.names)
    assert not any(d.name.startswith("mcp.broken.") for d in effective.definitions), (
        "hidden from the provider schema"
    )
    (failure,) = h.failures()
    assert failure["server_id"] == "broken" and failure["phase"] == "connect"
    assert "broken mode" in failure["error"]["message"] and failure["error"]["redacted"] is True
    assert starts(broken_log), "the broken server was actually launched"
    calls = [
        tool_call("mcp.broken.echo", "b1"),
        tool_call("mcp.one.echo", "o1", text="1"),
        tool_call("mcp.two.echo", "t1", text="2"),
    ]
    outcome = await h.executor(PermissionRecorder.always("allow_once")).execute_turn(calls, scope, h.sink)
    broken, one, two = outcome.results
    assert broken.is_error and broken.error is not None and broken.error.code == "tool_not_available"
    assert not one.is_error and not two.is_error
    # retried at the next run start that needs it
    await h.start_run()
    assert len(starts(broken_log)) == 2 and len(h.failures()) == 2


async def test_disabled_server_never_starts(harness: Callable[..., McpHarness], tmp_path: Path) -> None:
    """Case N3."""
    log = tmp_path / "srv.log"
    h = harness({"srv": stdio([ECHO], log)}, tools={"mcp": {"disabled_servers": ["srv"]}})
    scope, effective, failed = await h.start_run()
    assert failed == set() and not log.exists()
    assert not any(n.startswith("mcp.") for n in effective.names)
    outcome = await h.executor().execute_turn([tool_call("mcp.srv.echo", "d1")], scope, h.sink)
    assert outcome.results[0].error is not None and outcome.results[0].error.code == "tool_not_available"


async def test_disabled_tool(harness: Callable[..., McpHarness], tmp_path: Path) -> None:
    """Case N4."""
    log = tmp_path / "srv.log"
    h = harness(
        {"srv": stdio([ECHO, WRITE_NOTE], log)}, tools={"mcp": {"disabled_tools": ["mcp.srv.write_note"]}}
    )
    _, effective, _ = await h.start_run()
    assert "mcp.srv.echo" in effective.names and "mcp.srv.write_note" not in effective.names
    assert "mcp.srv.write_note" in h.registry and starts(log)


async def test_discovery_cache_ttl_and_shared_attempts(
    harness: Callable[..., McpHarness], tmp_path: Path
) -> None:
    """Case N8."""
    log = tmp_path / "srv.log"
    h = harness({"srv": stdio([ECHO], log)}, tools={"mcp": {"discovery_cache_ttl_ms": 1000}})
    await asyncio.gather(h.start_run(), h.start_run())
    assert methods(log).count("tools/list") == 1 and len(starts(log)) == 1, (
        "concurrent run starts share one attempt"
    )
    h.clock.now += 0.5
    await h.start_run()
    assert methods(log).count("tools/list") == 1, "within the TTL nothing is re-listed"
    h.clock.now += 1.0
    _, effective, _ = await h.start_run()
    assert methods(log).count("tools/list") == 2 and len(starts(log)) == 1, "refreshed on the live session"
    assert "mcp.srv.echo" in effective.names


async def test_permissions(harness: Callable[..., McpHarness]) -> None:
    """Cases N5, N7."""
    h = harness({"srv": stdio([WRITE_NOTE, READ_ONLY])})
    scope, _, _ = await h.start_run()
    assert h.registry.definition("mcp.srv.write_note").permission == "write"
    assert h.registry.definition("mcp.srv.lookup").permission == "readonly"
    denied = await h.executor(None).execute_turn(
        [tool_call("mcp.srv.write_note", "w0", text="x")], scope, h.sink
    )
    assert denied.results[0].error is not None and denied.results[0].error.code == "permission_denied"
    recorder = PermissionRecorder.always("allow_once")
    outcome = await h.executor(recorder).execute_turn(
        [tool_call("mcp.srv.lookup", "r1", text="q"), tool_call("mcp.srv.write_note", "w1", text="note")],
        scope,
        h.sink,
    )
    assert not any(r.is_error for r in outcome.results)
    (request,) = recorder.requests
    assert request.tool_name == "mcp.srv.write_note" and request.permission == "write"
    assert request.target_scope is None and request.network_host is None
    assert request.metadata["allow_for_session_available"] is False


async def test_overrides(harness: Callable[..., McpHarness]) -> None:
    """Case N7."""
    overrides = {
        "mcp.srv.*": {"tags": ["network"]},
        "mcp.srv.write_note": {"permission": "readonly", "tags": ["notes"]},
        "mcp.srv.lookup": {"tags": ["dangerous"]},
    }
    h = harness(
        {"srv": stdio([WRITE_NOTE, READ_ONLY, ECHO])},
        tools={"mcp": {"tool_overrides": overrides}},
        permissions={"network_policy": {"default": "allow"}},
    )
    scope, _, _ = await h.start_run()
    note, lookup, echo = (h.registry.definition(f"mcp.srv.{n}") for n in ("write_note", "lookup", "echo"))
    assert note.permission == "readonly" and note.tags == ["mcp", "notes"]
    assert lookup.tags == ["mcp", "dangerous"] and echo.tags == ["mcp", "network"]
    recorder = PermissionRecorder.always("allow_once")
    outcome = await h.executor(recorder).execute_turn(
        [tool_call("mcp.srv.write_note", "n1"), tool_call("mcp.srv.lookup", "l1")], scope, h.sink
    )
    assert not any(r.is_error for r in outcome.results)
    assert [r.tool_name for r in recorder.requests] == ["mcp.srv.lookup"], (
        "dangerous asks, readonly override does not"
    )


async def test_server_network_tag_and_policy(harness: Callable[..., McpHarness]) -> None:
    servers = {"net": stdio([READ_ONLY], tags=["network"]), "local": stdio([READ_ONLY])}
    h = harness(servers, permissions={"network_policy": {"default": "deny"}})
    _, effective, _ = await h.start_run()
    assert h.registry.definition("mcp.net.lookup").tags == ["mcp", "network"]
    assert "mcp.net.lookup" not in effective.names and "mcp.local.lookup" in effective.names


async def test_network_confirm_asks(harness: Callable[..., McpHarness]) -> None:
    h = harness({"net": stdio([READ_ONLY], tags=["network"])})
    scope, effective, _ = await h.start_run()
    assert "mcp.net.lookup" in effective.names
    recorder = PermissionRecorder.always("deny")
    outcome = await h.executor(recorder).execute_turn([tool_call("mcp.net.lookup", "q1")], scope, h.sink)
    assert outcome.results[0].is_error and recorder.requests[0].metadata["reasons"] == ["network"]


async def test_pre_tool_use_hook_blocks_mcp_calls(harness: Callable[..., McpHarness], tmp_path: Path) -> None:
    """Case N5."""
    log = tmp_path / "srv.log"
    hook_cmd = " ".join(
        shlex.quote(a) for a in (sys.executable, HOOK_SCRIPT, "--decision", "deny", "--reason", "no notes")
    )
    hooks = {
        "PreToolUse": [
            {
                "matcher": {"tool_name": "mcp.srv.write_note"},
                "hooks": [{"type": "command", "command": hook_cmd}],
            }
        ]
    }
    h = harness({"srv": stdio([WRITE_NOTE, ECHO], log)}, hooks=hooks)
    assert isinstance(load_hooks(h.config), HooksDispatcher)
    scope, _, _ = await h.start_run()
    recorder = PermissionRecorder.always("allow_once")
    outcome = await h.executor(recorder).execute_turn(
        [tool_call("mcp.srv.write_note", "w1", text="x"), tool_call("mcp.srv.echo", "e1")], scope, h.sink
    )
    denied, skipped = outcome.results
    assert (
        denied.error is not None and denied.error.type == "hook_denied" and "no notes" in denied.error.message
    )
    assert skipped.error is not None and skipped.error.code == "cancelled", "a write deny skips the rest"
    assert recorder.requests == [] and "tools/call" not in methods(log)
    assert h.sink.of_type(EventType.hook_denied) and h.sink.of_type(EventType.tool_denied)


async def test_large_result_error_and_redaction(
    harness: Callable[..., McpHarness], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Case N5."""
    monkeypatch.setenv("SOONG_TEST_MCP_TOKEN", "mcp-secret-token-0042")
    tools = [
        {"name": "big", "behavior": "big", "size": 20000, "annotations": {"readOnlyHint": True}},
        {"name": "fail", "behavior": "error", "annotations": {"readOnlyHint": True}},
        {
            "name": "secret",
            "behavior": "env",
            "env": "SOONG_TEST_MCP_TOKEN",
            "annotations": {"readOnlyHint": True},
        },
    ]
    h = harness(
        {"srv": stdio(tools, env_allowlist=["SOONG_TEST_MCP_TOKEN"])}, tools={"result_limit_bytes": 4000}
    )
    scope, _, _ = await h.start_run()
    calls = [
        tool_call("mcp.srv.big", "g1"),
        tool_call("mcp.srv.fail", "f1", text="x"),
        tool_call("mcp.srv.secret", "s1"),
    ]
    big, fail, secret = (await h.executor().execute_turn(calls, scope, h.sink)).results
    refs = [b for b in big.content if isinstance(b, ArtifactRefBlock)]
    assert not big.is_error and refs, big.content
    assert "B" * 20000 in h.sink.artifacts[refs[0].artifact_id].read_text()
    assert len(json.dumps(big.model_dump(mode="json"))) < 4000
    assert fail.is_error and fail.error is not None
    assert (
        fail.error.code == "internal_error"
        and fail.error.type == "mcp_tool_error"
        and "tool failed" in fail.error.message
    )
    assert secret.content == [TextBlock(text="[REDACTED]")]
    assert "mcp-secret-token-0042" not in json.dumps([e.payload for e in h.sink.events], default=str)


async def test_missing_env_var_fails_the_server(harness: Callable[..., McpHarness], tmp_path: Path) -> None:
    log = tmp_path / "srv.log"
    h = harness({"srv": stdio([ECHO], log, env_allowlist=["SOONG_TEST_ABSENT_VAR"]), "ok": stdio([ECHO])})
    _, effective, failed = await h.start_run()
    assert failed == {"srv"} and "mcp.ok.echo" in effective.names and not log.exists()
    (failure,) = h.failures()
    assert failure["error"]["code"] == "config_error" and failure["phase"] == "connect"
    message = failure["error"]["message"]
    assert "SOONG_TEST_ABSENT_VAR" in message and "srv" in message and "mcp.json" in message


async def test_close_terminates_processes_and_is_idempotent(
    harness: Callable[..., McpHarness], tmp_path: Path
) -> None:
    log = tmp_path / "srv.log"
    h = harness({"srv": stdio([ECHO], log)})
    await h.start_run()
    (pid,) = starts(log)
    assert Path(f"/proc/{pid}").exists()
    await h.manager.close()
    await h.manager.close()
    deadline = time.monotonic() + 3
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not Path(f"/proc/{pid}").exists()
    _, _, failed = await h.start_run()
    assert failed == {"srv"} and len(starts(log)) == 1, "a closed manager connects nothing"


async def test_transport_failure_during_a_call(harness: Callable[..., McpHarness], tmp_path: Path) -> None:
    log = tmp_path / "srv.log"
    tools = [{"name": "crash", "behavior": "crash", "annotations": {"readOnlyHint": True}}, READ_ONLY]
    h = harness({"srv": stdio(tools, log)})
    scope, _, _ = await h.start_run()
    executor = h.executor()
    crash = (await executor.execute_turn([tool_call("mcp.srv.crash", "c1")], scope, h.sink)).results[0]
    assert crash.is_error and crash.error is not None
    assert crash.error.code == "internal_error" and crash.error.type == "mcp_transport_error"
    (failure,) = h.failures()
    assert failure["phase"] == "call" and failure["server_id"] == "srv"
    assert not any(n.startswith("mcp.srv.") for n in scope.effective_tools), "removed for the rest of the run"
    later = (await executor.execute_turn([tool_call("mcp.srv.lookup", "l1")], scope, h.sink)).results[0]
    assert later.error is not None and later.error.code == "tool_not_available"
    # the next run reconnects
    scope2, effective, failed = await h.start_run()
    assert failed == set() and len(starts(log)) == 2 and "mcp.srv.lookup" in effective.names
    ok = (await executor.execute_turn([tool_call("mcp.srv.lookup", "l2")], scope2, h.sink)).results[0]
    assert not ok.is_error


async def test_call_timeout_and_cancellation(harness: Callable[..., McpHarness]) -> None:
    tools = [
        {"name": "slow", "behavior": "sleep", "sleep": 30, "annotations": {"readOnlyHint": True}},
        READ_ONLY,
    ]
    h = harness({"srv": stdio(tools, timeout_ms=300)})
    scope, _, _ = await h.start_run()
    executor = h.executor()
    started = time.monotonic()
    slow = (await executor.execute_turn([tool_call("mcp.srv.slow", "s1")], scope, h.sink)).results[0]
    assert time.monotonic() - started < 3
    assert slow.error is not None and slow.error.code == "timeout"
    assert not h.failures(), "a timeout does not fail the server"
    ok = (await executor.execute_turn([tool_call("mcp.srv.lookup", "l1")], scope, h.sink)).results[0]
    assert not ok.is_error

    h2 = harness({"srv": stdio(tools)})
    scope2, _, _ = await h2.start_run()
    task = asyncio.create_task(h2.executor().execute_turn([tool_call("mcp.srv.slow", "s2")], scope2, h2.sink))
    await asyncio.sleep(0.5)
    scope2.cancel_event.set()
    outcome = await asyncio.wait_for(task, 5)
    assert outcome.aborted and outcome.results[0].metadata["aborted"] is True


async def test_result_kinds_progress_and_pagination(
    harness: Callable[..., McpHarness], tmp_path: Path
) -> None:
    log = tmp_path / "srv.log"
    ro = {"readOnlyHint": True}
    tools = [
        {"name": "structured", "behavior": "structured", "annotations": ro},
        {"name": "image", "behavior": "image", "annotations": ro},
        {"name": "resource", "behavior": "resource", "annotations": ro},
        {"name": "progress", "behavior": "progress", "annotations": ro},
        {
            "name": "union",
            "inputSchema": {"type": "object", "properties": {"v": {"anyOf": [{"type": "string"}]}}},
        },
    ]
    h = harness({"srv": stdio(tools, log, "--page-size", "2")})
    scope, effective, _ = await h.start_run()
    assert methods(log).count("tools/list") == 3, "pagination followed to the end"
    assert "mcp.srv.union" not in h.registry and "mcp.srv.progress" in effective.names
    assert [s["tool_name"] for s in h.manager.skipped_tools("srv")] == ["union"]
    (debug,) = h.sink.of_type(EventType.provider_debug)
    assert (
        debug.payload["kind"] == "mcp_discovery" and debug.payload["skipped_tools"][0]["tool_name"] == "union"
    )
    calls = [tool_call(f"mcp.srv.{n}", n) for n in ("structured", "image", "resource", "progress")]
    structured, image, resource, progress = (await h.executor().execute_turn(calls, scope, h.sink)).results
    assert structured.content == [TextBlock(text="structured"), JsonBlock(data={"answer": 42, "args": {}})]
    (ref,) = image.content
    assert isinstance(ref, ArtifactRefBlock) and ref.mime_type == "image/png"
    assert h.sink.artifacts[ref.artifact_id].read_bytes().startswith(b"\x89PNG")
    assert resource.content[0] == TextBlock(text="embedded text") and isinstance(
        resource.content[1], ArtifactRefBlock
    )
    assert not progress.is_error
    updates = [e.payload["progress"] for e in h.sink.of_type(EventType.tool_progress)]
    assert updates == [
        {"progress": 1.0, "total": 2.0, "message": "step 1"},
        {"progress": 2.0, "total": 2.0, "message": "step 2"},
    ]


async def test_stdio_env_is_exactly_the_allowlist(
    harness: Callable[..., McpHarness], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOONG_TEST_PARENT_SECRET", "parent-only-value-77")
    monkeypatch.setenv("USER", "someone")
    tools = [
        {"name": f"env_{name}", "behavior": "env", "env": name, "annotations": {"readOnlyHint": True}}
        for name in ("SOONG_TEST_PARENT_SECRET", "USER", "PATH", "LITERAL")
    ]
    h = harness({"srv": stdio(tools, env={"LITERAL": "lit"})}, tools={"env_allowlist": ["PATH"]})
    scope, _, _ = await h.start_run()
    calls = [
        tool_call(f"mcp.srv.env_{n}", n) for n in ("SOONG_TEST_PARENT_SECRET", "USER", "PATH", "LITERAL")
    ]
    results = (await h.executor().execute_turn(calls, scope, h.sink)).results
    assert [r.content for r in results] == [
        [TextBlock(text="<unset>")],
        [TextBlock(text="<unset>")],
        [TextBlock(text=os.environ["PATH"])],
        [TextBlock(text="lit")],
    ]


async def test_streamable_http_server(
    harness: Callable[..., McpHarness], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port_file = tmp_path / "port"
    log = tmp_path / "http.log"
    proc = await asyncio.create_subprocess_exec(
        *(
            sys.executable,
            SERVER,
            "--tools",
            json.dumps([READ_ONLY]),
            "--log",
            str(log),
            "--http",
            str(port_file),
        ),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        # generous: the server imports the mcp SDK first, which takes seconds on a loaded 2-core machine
        deadline = time.monotonic() + 30
        while not port_file.exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        port = int(port_file.read_text())
        monkeypatch.setenv("SOONG_TEST_HTTP_AUTH", "Bearer http-secret-9")
        entry = {
            "type": "http",
            "url": f"http://127.0.0.1:{port}/mcp",
            "headers": {"X-Client": "soong"},
            "headers_env": {"Authorization": "SOONG_TEST_HTTP_AUTH"},
        }
        h = harness(
            {"web": entry, "nokey": {**entry, "headers_env": {"Authorization": "SOONG_TEST_HTTP_MISSING"}}}
        )
        scope, effective, failed = await h.start_run()
        assert failed == {"nokey"} and "mcp.web.lookup" in effective.names
        assert "SOONG_TEST_HTTP_MISSING" in h.failures()[0]["error"]["message"]
        recorder = PermissionRecorder.never()
        result = (
            await h.executor(recorder).execute_turn(
                [tool_call("mcp.web.lookup", "h1", text="q")], scope, h.sink
            )
        ).results[0]
        assert not result.is_error and result.content == [TextBlock(text='{"text": "q"}')]
        assert any(line.startswith("http POST") for line in methods(log))
        await h.manager.close()
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 5)


async def test_startup_timeout_fails_only_that_server(
    harness: Callable[..., McpHarness], tmp_path: Path
) -> None:
    pid_file = tmp_path / "mute.pid"
    mute = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(120)"
    servers = {
        "mute": {"command": sys.executable, "args": ["-c", mute, str(pid_file)], "startup_timeout_ms": 500},
        "ok": stdio([READ_ONLY]),
    }
    h = harness(servers)
    started = time.monotonic()
    _, effective, failed = await h.start_run()
    # far below the mute server's 120 s sleep, with room for the "ok" server's start on a loaded machine
    assert time.monotonic() - started < 20, "the run start does not wait for the dead server to be reaped"
    assert failed == {"mute"} and "mcp.ok.lookup" in effective.names
    (failure,) = h.failures()
    assert failure["phase"] == "connect" and failure["error"]["code"] == "timeout"
    # found by its argv, not by the pid it writes: on a loaded machine the 500 ms may end before the
    # interpreter even got that far (the process must be stopped all the same)
    deadline = time.monotonic() + 5
    while _running_with_argument(str(pid_file)) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not _running_with_argument(str(pid_file)), "the unresponsive server process was stopped"


def _running_with_argument(argument: str) -> list[int]:
    """Live (not zombie) processes with ``argument`` among their command-line arguments."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if argument.encode() in argv and state != "Z":
            found.append(int(entry.name))
    return found


async def test_refresh_reconnects_a_session_that_died_while_idle(
    harness: Callable[..., McpHarness], tmp_path: Path
) -> None:
    log = tmp_path / "srv.log"
    h = harness({"srv": stdio([READ_ONLY], log)}, tools={"mcp": {"discovery_cache_ttl_ms": 1000}})
    await h.start_run()
    (pid,) = starts(log)
    os.kill(pid, 9)
    deadline = time.monotonic() + 3
    while Path(f"/proc/{pid}/status").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text():
        if time.monotonic() > deadline:
            break
        await asyncio.sleep(0.05)
    h.clock.now += 2.0
    scope, effective, failed = await h.start_run()
    assert failed == set() and not h.failures()
    assert len(starts(log)) == 2 and "mcp.srv.lookup" in effective.names
    ok = (await h.executor().execute_turn([tool_call("mcp.srv.lookup", "l1")], scope, h.sink)).results[0]
    assert not ok.is_error


async def test_an_mcp_image_reaches_a_model_that_reads_images(harness: Callable[..., McpHarness]) -> None:
    """Issue 34: with the run's model reading images, an MCP image result is an image block on its
    artifact (the model sees it); without, it stays an artifact reference."""
    from agent_core._media import MediaPolicy
    from agent_core.types.content import ImageBlock

    h = harness(
        {"srv": stdio([{"name": "image", "behavior": "image", "annotations": {"readOnlyHint": True}}])}
    )
    scope, _, _ = await h.start_run()
    scope.media = MediaPolicy(("text", "image"))
    (result,) = (await h.executor().execute_turn([tool_call("mcp.srv.image", "i1")], scope, h.sink)).results
    (block,) = result.content
    assert isinstance(block, ImageBlock) and block.mime_type == "image/png"
    assert h.sink.artifacts[block.artifact_id].read_bytes().startswith(b"\x89PNG")
    scope.media = MediaPolicy(("text",))
    (plain,) = (await h.executor().execute_turn([tool_call("mcp.srv.image", "i2")], scope, h.sink)).results
    assert isinstance(plain.content[0], ArtifactRefBlock)
