"""``code.web_fetch`` through the public API (issue 37 item 4), against local servers on 127.0.0.1 only.

The runs use the testing kit's FunctionModel: the first answer calls the tool, the second ends the run;
results are read back with ``replay_session``. 127.0.0.1 is reachable only because each test's config
lists it in ``[tools.network] allowed_private_networks``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_core import PermissionDecision, PermissionRequest
from agent_core.testing import CallTool, FunctionModel, ModelReply, open_runtime
from agent_core.types.content import JsonBlock, TextBlock, ToolResultBlock
from agent_core.types.model import ModelRequest
from tests.fixtures.web_pages import PageServer

LOCAL = {"allowed_private_networks": ["127.0.0.1/32"]}
ALLOWED = {"tools": {"network": {**LOCAL, "allowed_hosts": ["127.0.0.1"]}}}

ARTICLE = """<!doctype html><html><head><title>The  Title</title><style>p {color: red}</style>
<script>document.write("tracking")</script></head><body>
<h1>Release notes</h1><p>Version <b>2.0</b> adds <a href="/docs/fetch">web fetching</a>.</p>
<ul><li>one</li><li>two</li></ul></body></html>"""


def fetch_model(*calls: dict[str, Any]) -> FunctionModel:
    """Calls ``code.web_fetch`` once per ``calls`` entry (one per turn), then answers ``done``."""

    def reply(request: ModelRequest) -> str | ModelReply:
        turn = sum(1 for m in request.messages if m.role == "assistant")
        if turn < len(calls):
            return ModelReply(
                tool_calls=[CallTool("code.web_fetch", calls[turn], tool_call_id=f"call_{turn}")]
            )
        return "done"

    return FunctionModel(reply)


async def fetch_results(rt: Any, session_id: str) -> list[ToolResultBlock]:
    replay = await rt.replay_session(session_id, include_sensitive=True)
    blocks = [b for n in replay.nodes for b in n.content if isinstance(b, ToolResultBlock)]
    assert blocks, "no tool result was recorded"
    return blocks


def data_of(block: ToolResultBlock) -> dict[str, Any]:
    (data,) = [b.data for b in block.content if isinstance(b, JsonBlock)]
    assert isinstance(data, dict)
    return data


def text_of(block: ToolResultBlock) -> str:
    return " ".join(b.text for b in block.content if isinstance(b, TextBlock))


async def test_allowed_host_is_fetched_as_markdown_without_asking(
    tmp_path: Path, page_server: PageServer
) -> None:
    page_server.page("/notes", ARTICLE)
    asked: list[PermissionRequest] = []

    async def callback(request: PermissionRequest) -> PermissionDecision:
        asked.append(request)
        return PermissionDecision(decision="deny")

    model = fetch_model({"url": page_server.url("/notes")})
    async with open_runtime(model, project_dir=tmp_path, config=ALLOWED, permission_callback=callback) as rt:
        run = await rt.start("what is new?")
        await run.wait()
        assert run.status.value == "completed"
        (block,) = await fetch_results(rt, run.session_id)
    assert asked == []  # an allow-listed host is fetched without a prompt
    assert not block.is_error, text_of(block)
    data = data_of(block)
    assert data["status"] == 200 and data["format"] == "markdown"
    assert data["title"] == "The Title"
    content = data["content"]
    assert content.startswith("# Release notes\n")
    assert "Version **2.0** adds [web fetching](" + page_server.url("/docs/fetch") + ")." in content
    assert "- one\n- two" in content
    assert "tracking" not in content and "color" not in content  # scripts and styles dropped
    assert data["truncated"] is False and data["partial_content"] is False and data["artifact_id"] is None
    assert page_server.requests == ["/notes"]
    # the model got the same JSON
    sent = [
        b
        for m in model.requests[-1].messages
        for b in m.content
        if isinstance(b, ToolResultBlock) and b.tool_call_id == "call_0"
    ]
    assert [data_of(b)["title"] for b in sent] == ["The Title"]


async def test_a_host_not_allow_listed_asks_once_per_call(tmp_path: Path, page_server: PageServer) -> None:
    page_server.page("/", "<p>hello</p>")
    asked: list[PermissionRequest] = []

    async def callback(request: PermissionRequest) -> PermissionDecision:
        asked.append(request)
        return PermissionDecision(decision="allow_once")

    config = {"tools": {"network": LOCAL}}
    model = fetch_model({"url": page_server.url("/")})
    async with open_runtime(model, project_dir=tmp_path, config=config, permission_callback=callback) as rt:
        run = await rt.start("fetch it")
        await run.wait()
        (block,) = await fetch_results(rt, run.session_id)
    (request,) = asked
    assert request.tool_name == "code.web_fetch" and request.network_host == "127.0.0.1"
    assert request.metadata["reasons"] == ["network"]
    assert request.target_scope == "127.0.0.1"  # "allow for session" covers this host only
    assert data_of(block)["content"] == "hello\n"


async def test_without_a_callback_an_unlisted_host_is_denied(tmp_path: Path, page_server: PageServer) -> None:
    page_server.page("/", "<p>hello</p>")
    model = fetch_model({"url": page_server.url("/")})
    async with open_runtime(model, project_dir=tmp_path, config={"tools": {"network": LOCAL}}) as rt:
        run = await rt.start("fetch it")
        await run.wait()
        (block,) = await fetch_results(rt, run.session_id)
    assert block.is_error and "no permission callback" in text_of(block)
    assert page_server.requests == []


async def test_denied_domain_is_refused_without_asking_or_connecting(
    tmp_path: Path, page_server: PageServer
) -> None:
    page_server.page("/", "<p>secret</p>")
    asked: list[PermissionRequest] = []

    async def callback(request: PermissionRequest) -> PermissionDecision:
        asked.append(request)
        return PermissionDecision(decision="allow_once")

    # denied wins over the host allow-list and the permission callback
    config = {
        "tools": {"network": {**LOCAL, "allowed_hosts": ["localhost"], "denied_domains": ["localhost"]}}
    }
    model = fetch_model({"url": page_server.url("/", host="localhost")})
    async with open_runtime(model, project_dir=tmp_path, config=config, permission_callback=callback) as rt:
        run = await rt.start("fetch it")
        await run.wait()
        (block,) = await fetch_results(rt, run.session_id)
        replay = await rt.replay_session(run.session_id)
    assert block.is_error
    assert "tools.network.denied_domains" in text_of(block)
    assert asked == [] and page_server.requests == []
    (denied,) = [e for e in replay.events if e.event_type.value == "tool_denied"]
    assert denied.payload["denied_by"] == "permission"


async def test_redirect_to_a_private_address_is_refused(tmp_path: Path, page_server: PageServer) -> None:
    # 127.0.0.2 is loopback but outside the allowed 127.0.0.1/32; the host itself is allow-listed, so only
    # the address check of the redirect hop stands between the fetch and that address
    private = f"http://127.0.0.2:{page_server.port}/internal"
    page_server.page("/start", "", status=302, headers={"Location": private})
    config = {"tools": {"network": {**LOCAL, "allowed_hosts": ["127.0.0.1", "127.0.0.2"]}}}
    model = fetch_model({"url": page_server.url("/start")})
    async with open_runtime(model, project_dir=tmp_path, config=config) as rt:
        run = await rt.start("fetch it")
        await run.wait()
        (block,) = await fetch_results(rt, run.session_id)
    assert block.is_error
    assert block.content and "127.0.0.2 is a loopback address" in text_of(block)
    replay_error = json.loads(json.dumps(block.model_dump(mode="json")))
    assert "tools.network.allowed_private_networks" in json.dumps(replay_error)
    assert page_server.requests == ["/start"]


async def test_redirect_to_another_host_is_not_followed_unless_allow_listed(
    tmp_path: Path, page_server: PageServer
) -> None:
    page_server.page(
        "/start", "", status=301, headers={"Location": page_server.url("/end", host="localhost")}
    )
    page_server.page("/end", "<p>the end</p>")
    config = {"tools": {"network": {**LOCAL, "allowed_hosts": ["127.0.0.1"]}}}
    model = fetch_model({"url": page_server.url("/start")})
    async with open_runtime(model, project_dir=tmp_path, config=config) as rt:
        run = await rt.start("fetch it")
        await run.wait()
        (block,) = await fetch_results(rt, run.session_id)
    data = data_of(block)
    assert not block.is_error
    assert data["redirect_not_followed"] == page_server.url("/end", host="localhost")
    assert "not followed" in data["content"]
    assert page_server.requests == ["/start"]


async def test_redirect_on_the_same_host_is_followed(tmp_path: Path, page_server: PageServer) -> None:
    page_server.page("/old", "", status=308, headers={"Location": "/new"})
    page_server.page("/new", "<p>moved here</p>")
    model = fetch_model({"url": page_server.url("/old")})
    async with open_runtime(model, project_dir=tmp_path, config=ALLOWED) as rt:
        run = await rt.start("fetch it")
        await run.wait()
        (block,) = await fetch_results(rt, run.session_id)
    data = data_of(block)
    assert data["final_url"] == page_server.url("/new") and data["redirects"] == [page_server.url("/new")]
    assert data["content"] == "moved here\n"


async def test_oversized_body_is_cut_at_max_bytes(tmp_path: Path, page_server: PageServer) -> None:
    page_server.page("/big.txt", "x" * 50_000 + "TAIL", content_type="text/plain")
    model = fetch_model({"url": page_server.url("/big.txt"), "max_bytes": 1000})
    async with open_runtime(model, project_dir=tmp_path, config=ALLOWED) as rt:
        run = await rt.start("fetch it")
        await run.wait()
        (block,) = await fetch_results(rt, run.session_id)
    data = data_of(block)
    assert data["truncated"] is True and data["bytes"] == 1000
    assert data["content"] == "x" * 1000


async def test_large_page_is_stored_as_an_artifact(tmp_path: Path, page_server: PageServer) -> None:
    paragraphs = "".join(f"<p>paragraph {i} {'word ' * 20}</p>" for i in range(2000))
    page_server.page("/long", f"<html><body><h1>Long</h1>{paragraphs}<p>THE END</p></body></html>")
    model = fetch_model({"url": page_server.url("/long")})
    async with open_runtime(model, project_dir=tmp_path, config=ALLOWED) as rt:
        run = await rt.start("fetch it")
        await run.wait()
        (block,) = await fetch_results(rt, run.session_id)
        replay = await rt.replay_session(run.session_id)
        data = data_of(block)
        whole = Path(data["artifact_path"]).read_text(encoding="utf-8")  # the home goes with the runtime
    assert data["truncated"] is False and data["partial_content"] is True
    assert data["content"].startswith("# Long\n") and "THE END" not in data["content"]
    assert "read on with code.read_file from line" in data["content"]
    assert whole.startswith("# Long\n") and whole.rstrip().endswith("THE END")
    assert whole.count("\n") + 1 >= data["total_lines"] >= 4000
    assert data["artifact_id"] in {a.artifact_id for a in replay.artifacts}


async def test_http_error_status_is_an_error_result(tmp_path: Path, page_server: PageServer) -> None:
    model = fetch_model({"url": page_server.url("/missing")})
    async with open_runtime(model, project_dir=tmp_path, config=ALLOWED) as rt:
        run = await rt.start("fetch it")
        await run.wait()
        (block,) = await fetch_results(rt, run.session_id)
    assert block.is_error and "HTTP 404" in text_of(block)
    assert data_of(block)["content"] == "not found"


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("file:///etc/passwd", "only http:// and https://"),
        ("http://user:secret@127.0.0.1/", "credentials"),
    ],
)
async def test_invalid_urls_fail_before_asking(tmp_path: Path, url: str, problem: str) -> None:
    model = fetch_model({"url": url})
    async with open_runtime(model, project_dir=tmp_path, config=ALLOWED) as rt:
        run = await rt.start("fetch it")
        await run.wait()
        (block,) = await fetch_results(rt, run.session_id)
    assert block.is_error and problem in text_of(block)
    assert "secret" not in json.dumps(block.model_dump(mode="json"))
