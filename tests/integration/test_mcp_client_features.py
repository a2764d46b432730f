"""The complete MCP client against a server written with the official SDK (FastMCP, stdio) through the
public API (issue 38 item 4): resources (listed, read by the user and by the model's
``mcp.<server>.read_resource``), prompts, roots (the project), sampling on the calling run's model
(asked unless trusted, charged to ``[limits]``) and elicitation through the permission callback."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from agent_core import AgentRuntime
from agent_core.testing import CallTool, FunctionModel, ModelReply, open_runtime, tool_results
from agent_core.types.content import ArtifactRefBlock, TextBlock
from agent_core.types.enums import RunStatus
from agent_core.types.model import ModelRequest
from agent_core.types.permissions import PermissionDecision, PermissionRequest
from tests.fixtures.env import SoongEnv

SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_full_server.py"


def write_mcp(home: Path, **entry: Any) -> None:
    home.mkdir(parents=True, exist_ok=True)
    server = {"command": sys.executable, "args": [str(SERVER)], "startup_timeout_ms": 60000, **entry}
    (home / "mcp.json").write_text(json.dumps({"mcpServers": {"full": server}}))


class Gate:
    """Records every permission request; answers tools with allow, the MCP requests as told."""

    def __init__(self, sampling: str = "allow_once", elicitation: dict[str, Any] | None = None) -> None:
        self.requests: list[PermissionRequest] = []
        self.sampling = sampling
        self.delay_s = 0.0
        self.elicitation = elicitation or {
            "decision": "allow_once",
            "metadata": {"content": {"name": "Ada", "age": 36}},
        }

    async def __call__(self, request: PermissionRequest) -> PermissionDecision:
        self.requests.append(request)
        kind = request.metadata.get("mcp_request")
        if kind == "sampling":
            return PermissionDecision(decision=self.sampling)  # type: ignore[arg-type]
        if kind == "elicitation":
            await asyncio.sleep(self.delay_s)  # a user taking their time
            return PermissionDecision.model_validate(self.elicitation)
        return PermissionDecision(decision="allow_once")

    def of(self, kind: str) -> list[PermissionRequest]:
        return [r for r in self.requests if r.metadata.get("mcp_request") == kind]


def calling(*calls: CallTool, sampled: str = "SAMPLED") -> FunctionModel:
    """Calls ``calls`` in one turn, then answers with the tool results; a sampling request gets ``sampled``."""

    def reply(request: ModelRequest) -> str | ModelReply:
        if request.metadata.get("purpose") == "mcp_sampling":
            return sampled
        if request.messages[-1].role == "tool":
            return json.dumps(tool_results(request), sort_keys=True)
        return ModelReply(tool_calls=list(calls))

    return FunctionModel(reply)


@asynccontextmanager
async def runtime_with(
    env: SoongEnv, model: FunctionModel, gate: Gate, config: dict[str, Any] | None = None, **entry: Any
) -> AsyncIterator[AgentRuntime]:
    write_mcp(env.home, **entry)
    async with open_runtime(
        model, project_dir=env.project, home_dir=env.home, permission_callback=gate, config=config
    ) as runtime:
        yield runtime


async def final_results(runtime: AgentRuntime, message: str) -> dict[str, str]:
    run = await runtime.start(message)
    assert await run.wait() == RunStatus.completed, run.error
    replay = await runtime.replay_run(run.run_id)
    finals = [
        e for e in replay.events if e.event_type == "message_completed" and not e.payload["has_tool_calls"]
    ]
    return json.loads(finals[-1].payload["text"])  # type: ignore[no-any-return]


async def test_resources_prompts_and_roots(soong_env: SoongEnv) -> None:
    model = calling(
        CallTool("mcp.full.list_resources", {}, "c_list"),
        CallTool("mcp.full.read_resource", {"uri": "notes://readme"}, "c_read"),
        CallTool("mcp.full.read_resource", {"uri": "notes://logo"}, "c_logo"),
        CallTool("mcp.full.read_resource", {"uri": "notes://missing"}, "c_missing"),
        CallTool("mcp.full.roots", {}, "c_roots"),
    )
    gate = Gate()
    async with runtime_with(soong_env, model, gate) as runtime:
        resources = {r.uri: r for r in await runtime.mcp_resources("full")}
        assert (
            resources["notes://readme"].mime_type == "text/markdown"
            and not resources["notes://readme"].template
        )
        assert resources["notes://item/{name}"].template
        blocks = await runtime.read_mcp_resource("full", "notes://item/pear")
        assert [b.text for b in blocks if isinstance(b, TextBlock)] == ["item pear"]
        logo = await runtime.read_mcp_resource("full", "notes://logo")
        assert "binary content not shown" in logo[0].text  # type: ignore[union-attr]

        prompts = await runtime.mcp_prompts()
        review = next(p for p in prompts if p.name == "review")
        assert review.server_id == "full"
        assert [(a.name, a.required) for a in review.arguments] == [("path", True), ("focus", False)]
        messages = await runtime.get_mcp_prompt("full", "review", {"path": "app.py"})
        assert [(m.role, m.text) for m in messages] == [("user", "Review app.py for bugs.")]

        results = await final_results(runtime, "look at the notes")
        assert (
            "resource notes://readme [" in results["c_list"]
            and "template notes://item/{name}" in results["c_list"]
        )
        assert results["c_read"] == "# Notes\nhello from a resource"
        assert "missing" in results["c_missing"].lower() or "unknown" in results["c_missing"].lower()
        assert json.loads(results["c_roots"]) == [soong_env.project.as_uri()]
        # the resource tools are read-only: only the server's own tool (roots) asked
        assert [r.tool_name for r in gate.requests] == ["mcp.full.roots"]
        replay = await runtime.replay_session((await runtime.list_sessions())[0].session_id)
        tool_nodes = [n for n in replay.nodes if n.role == "tool"]
        logo_block = next(
            b.content[0] for n in tool_nodes for b in n.content if getattr(b, "tool_call_id", "") == "c_logo"
        )
        assert isinstance(logo_block, ArtifactRefBlock) and logo_block.mime_type == "image/png"


async def test_sampling_is_asked_runs_on_the_session_model_and_can_be_declined(soong_env: SoongEnv) -> None:
    model = calling(CallTool("mcp.full.summarize", {"text": "a long text"}, "c_sum"))
    gate = Gate()
    async with runtime_with(soong_env, model, gate) as runtime:
        results = await final_results(runtime, "summarize it")
        assert results["c_sum"] == "summary: SAMPLED (model test-model)" or results["c_sum"].startswith(
            "summary: SAMPLED"
        )
        (asked,) = gate.of("sampling")
        assert asked.tool_name == "mcp.full.sampling" and "Summarize: a long text" in asked.args_summary
        sampling = [r for r in model.requests if r.metadata.get("purpose") == "mcp_sampling"]
        assert len(sampling) == 1 and sampling[0].tools == []
        assert sampling[0].system[0].content == "Be short." and sampling[0].max_output_tokens == 50

        gate.sampling = "deny"
        results = await final_results(runtime, "summarize it again")
        assert "declined" in results["c_sum"]
        assert len([r for r in model.requests if r.metadata.get("purpose") == "mcp_sampling"]) == 1


async def test_a_trusted_server_samples_without_asking(soong_env: SoongEnv) -> None:
    model = calling(CallTool("mcp.full.summarize", {"text": "x"}, "c_sum"))
    gate = Gate(sampling="deny")
    async with runtime_with(soong_env, model, gate, trusted=True) as runtime:
        results = await final_results(runtime, "summarize")
        assert results["c_sum"].startswith("summary: SAMPLED")
        assert gate.of("sampling") == []


async def test_sampling_is_charged_to_the_limits(soong_env: SoongEnv, tmp_path: Path) -> None:
    big = "word " * 4000  # ~5000 estimated output tokens
    model = calling(CallTool("mcp.full.summarize", {"text": "x"}, "c_sum"), sampled=big)
    async with runtime_with(
        soong_env, model, Gate(), config={"limits": {"max_total_tokens": 4000}}
    ) as runtime:
        run = await runtime.start("summarize")
        await run.wait()
        assert run.end_reason == "limit_reached", (run.status, run.end_reason)
    # the same run without the sampling's tokens stays under the limit
    home = tmp_path / "home2"
    small = calling(CallTool("mcp.full.summarize", {"text": "x"}, "c_sum"), sampled="ok")
    env2 = SoongEnv(home=home, project=soong_env.project)
    async with runtime_with(env2, small, Gate(), config={"limits": {"max_total_tokens": 4000}}) as runtime:
        run = await runtime.start("summarize")
        assert await run.wait() == RunStatus.completed, (run.end_reason, run.error)


async def test_elicitation_goes_through_the_permission_callback(soong_env: SoongEnv) -> None:
    model = calling(CallTool("mcp.full.ask_name", {}, "c_ask"))
    gate = Gate()
    gate.delay_s = 2.5  # longer than the call's timeout: time spent answering the server does not count
    async with runtime_with(soong_env, model, gate, timeout_ms=1500) as runtime:
        results = await final_results(runtime, "who am I")
        gate.delay_s = 0.0
        assert results["c_ask"] == "accept: Ada is 36"
        (asked,) = gate.of("elicitation")
        assert asked.tool_name == "mcp.full.elicitation" and asked.metadata["message"] == "Who are you?"
        assert set(asked.metadata["requested_schema"]["properties"]) == {"name", "age"}

        gate.elicitation = {"decision": "deny"}
        assert (await final_results(runtime, "again"))["c_ask"] == "decline"
        gate.elicitation = {"decision": "deny", "metadata": {"elicitation": "cancel"}}
        assert (await final_results(runtime, "once more"))["c_ask"] == "cancel"
