"""The web UI of ``soong-agent serve`` in headless Chromium (docs/serve.md#the-web-ui): a real server
subprocess, the scripted Ollama server as the model, the browser signed in through the printed ``?token=``
URL."""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.cli import TurnScript, chat_requests, tool_messages
from tests.fixtures.env import SoongEnv
from tests.fixtures.scripted_servers import ScriptedOllamaServer
from tests.fixtures.serve import RuleModel, ServeProcess, start_serve, use_scripted_ollama

pytestmark = pytest.mark.browser

STATIC = Path(__file__).resolve().parents[2] / "src/agent_core/server/static"


@pytest.fixture
def served(soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer) -> Iterator[ServeProcess]:
    use_scripted_ollama(soong_env, scripted_ollama, RuleModel(frame_delay_s=0.05))
    server = start_serve(soong_env)
    try:
        yield server
    finally:
        assert server.stop() == 0


def open_ui(page: Any, server: ServeProcess) -> None:
    page.goto(server.stdout_line.split(" ", 1)[1].strip())
    assert page.url.rstrip("/").endswith(server.base_url.split("//", 1)[1]) or "token=" not in page.url
    page.wait_for_function("() => document.querySelector('#version').textContent.startsWith('v')")


def say(page: Any, text: str) -> None:
    """Sends ``text``; returns once the run is created and followed (the box empties in the same task)."""
    before = page.evaluate("state.lastRunId")
    page.fill("#message", text)
    page.press("#message", "Enter")
    page.wait_for_function("(before) => state.lastRunId !== before", arg=before)


def wait_run_finished(page: Any) -> None:
    page.wait_for_function("() => !state.live", timeout=15_000)


def test_type_a_message_and_see_the_streamed_reply(page: Any, served: ServeProcess) -> None:
    open_ui(page, served)
    page.click("#new-session")
    say(page, "hello browser")
    streaming = page.wait_for_selector(".msg.assistant")
    assert streaming is not None
    page.wait_for_selector(".msg.assistant:has-text('Echo: hello browser')")
    wait_run_finished(page)
    page.wait_for_selector("#session-list li:has-text('hello browser')")
    # after the run the conversation comes from storage and shows the same text
    assert page.locator("#conversation .msg.user").all_inner_texts()[-1].endswith("hello browser")
    assert "Echo: hello browser" in page.locator("#conversation").inner_text()
    # the raw event table (one click from the trace) lists the run's events, debug ones only when asked
    page.click("[data-view=trace]")
    page.click("#show-raw")
    page.wait_for_selector("#timeline tr[data-type=run_completed]")
    assert page.locator("#timeline tr[data-type=model_started]").count() == 0
    page.check("#debug-toggle")
    assert page.locator("#timeline tr[data-type=model_started]").count() >= 1
    page.fill("#filter-type", "tool_")
    assert page.locator("#timeline tbody tr").count() == 0
    assert page.js_errors == []


def test_the_run_shows_the_model_waiting_then_the_output_rate(page: Any, served: ServeProcess) -> None:
    """Issue 32: while the model reads the prompt the run status shows the model, the prompt size
    and the seconds waited (model_progress events, as the CLI's status line); then the rate."""
    open_ui(page, served)
    page.click("#new-session")
    page.evaluate(
        """() => {
            window.seenStatus = [];
            const record = () => {
                window.seenStatus.push(document.querySelector('#run-status').textContent);
                for (const rate of document.querySelectorAll('.msg .rate')) window.seenStatus.push(rate.textContent);
            };
            new MutationObserver(record).observe(document.body, {subtree: true, childList: true, characterData: true});
        }"""
    )
    say(page, "wait 4")
    page.wait_for_selector("#run-status:has-text('waiting for test-model')")
    status = page.locator("#run-status").inner_text()
    assert re.search(r"waiting for test-model · [\d,]+ prompt tokens · \d+ s", status), status
    page.wait_for_function(
        "() => /waiting for test-model .* [1-9]\\d* s/.test(document.querySelector('#run-status').textContent)"
    )  # the seconds count up
    page.wait_for_selector(".msg.assistant:has-text('Waited well.')")
    wait_run_finished(page)
    seen = page.evaluate("() => window.seenStatus")
    assert any(
        re.fullmatch(r"\d+ tokens at [\d.]+ tokens/s · first token after [\d.]+ s", t) for t in seen
    ), seen
    assert page.js_errors == []


def test_approve_a_write_from_the_card_and_see_the_file_written(
    page: Any, served: ServeProcess, soong_env: SoongEnv
) -> None:
    open_ui(page, served)
    page.click("#new-session")
    say(page, "write from-ui.txt written-by-the-browser")
    card = page.wait_for_selector(".approval")
    assert card is not None
    text = card.inner_text()
    assert "code.write_file" in text and "from-ui.txt" in text
    # the request's fields are rows of a definition list, not stringified element arrays
    assert "[object" not in text
    assert page.inner_text(".approval dl dt:first-child") == "agent"
    page.wait_for_selector(".approval pre.diff .add:has-text('+written-by-the-browser')")
    assert not (soong_env.project / "from-ui.txt").exists()
    page.click(".approval button[data-decision=allow_once]")
    page.wait_for_selector("#conversation .tool.ok")
    page.wait_for_selector(".msg.assistant:has-text('Done:')")
    assert (soong_env.project / "from-ui.txt").read_text() == "written-by-the-browser"
    wait_run_finished(page)
    page.wait_for_function("() => document.querySelectorAll('.approval').length === 0")
    # a denied write leaves nothing behind
    say(page, "write denied.txt nope")
    page.wait_for_selector(".approval")
    page.click(".approval button[data-decision=deny]")
    page.wait_for_selector("#conversation .tool.denied")
    wait_run_finished(page)
    assert not (soong_env.project / "denied.txt").exists()
    assert page.js_errors == []


def test_switch_a_branch_in_the_tree_and_fork(page: Any, served: ServeProcess) -> None:
    open_ui(page, served)
    page.click("#new-session")
    say(page, "first question")
    page.wait_for_selector(".msg.assistant:has-text('Echo: first question')")
    wait_run_finished(page)
    say(page, "second question")
    page.wait_for_selector(".msg.assistant:has-text('Echo: second question')")
    wait_run_finished(page)
    page.click("[data-view=tree]")
    first_reply = page.locator(".node:has-text('Echo: first question')")
    first_reply.locator("button.switch").click()
    page.wait_for_selector(".node.active-leaf:has-text('Echo: first question')")
    page.click("[data-view=conversation]")
    assert "second question" not in page.locator("#conversation").inner_text()
    say(page, "branch question")
    page.wait_for_selector(".msg.assistant:has-text('Echo: branch question')")
    wait_run_finished(page)
    page.click("[data-view=tree]")
    # two branches now hang below the first reply
    first_reply = page.evaluate(
        "() => state.replay.nodes.find((n) => JSON.stringify(n.content).includes('Echo: first question')).node_id"
    )
    assert page.locator(f".branches[data-at='{first_reply}'] > .branch").count() == 2
    assert page.locator(".node.on-path:has-text('branch question')").count() == 2  # message and reply
    assert page.locator(".node.on-path:has-text('second question')").count() == 0
    # switch back to the other branch
    page.locator(".node:has-text('Echo: second question') button.switch").click()
    page.wait_for_selector(".node.active-leaf:has-text('Echo: second question')")
    # fork from a user message: a new session with the path up to it
    page.locator(".node:has-text('second question'):not(:has-text('Echo')) button.fork").click()
    page.wait_for_function("() => document.querySelectorAll('#session-list li').length === 2")
    page.wait_for_selector("#session-list li.active .fork-mark")
    page.click("[data-view=conversation]")
    conversation = page.locator("#conversation").inner_text()
    assert "first question" in conversation and "second question" in conversation
    assert "branch question" not in conversation
    assert page.js_errors == []


def test_model_html_renders_as_text(page: Any, served: ServeProcess) -> None:
    open_ui(page, served)
    page.click("#new-session")
    payload = '<script>window.pwned=1</script><img src=x onerror="window.pwned=2"><b>bold</b>'
    say(page, f"reply {payload}")
    page.wait_for_selector(".msg.assistant:has-text('<img src=x')")
    wait_run_finished(page)
    assistant = page.locator(".msg.assistant").last
    assert payload in assistant.inner_text()
    assert assistant.locator("script, img, b").count() == 0
    assert page.locator("#conversation img, #conversation script").count() == 0
    time.sleep(0.3)
    assert page.evaluate("window.pwned") is None
    page.click("[data-view=tree]")
    assert page.locator("#tree img, #tree script").count() == 0
    page.click("[data-view=trace]")
    page.click("#show-raw")
    assert page.locator("#timeline img, #timeline script").count() == 0
    assert page.js_errors == []


def test_static_assets_never_insert_html() -> None:
    """The UI's own modules never parse HTML (only markdown.js hands Markdown to the vendored sanitiser),
    and the page loads nothing from another origin."""
    modules = sorted((STATIC / "js").glob("*.js"))
    assert len(modules) >= 10
    for module in modules:
        code = module.read_text()
        assert not re.search(
            r"\.(innerHTML|outerHTML)\s*=|\.insertAdjacentHTML\(|document\.write\(|\beval\(|new Function\(",
            code,
        ), module.name
        assert len(code.splitlines()) < 600, module.name
    parsers = [m.name for m in modules if "sanitize(" in m.read_text() or "md.render(" in m.read_text()]
    assert parsers == ["markdown.js"]
    index = (STATIC / "index.html").read_text()
    assert not re.search(r"(src|href)=\"(https?:)?//", index)
    assert re.findall(r'<script[^>]*src="([^"]+)"', index) == [
        "/static/vendor/markdown-it.min.js",
        "/static/vendor/purify.min.js",
        "/static/vendor/highlight.min.js",
        "/static/js/main.js",
    ]
    assert "<script>" not in index and " style=" not in index and "onclick=" not in index


def test_child_agent_activity_nests_under_its_tool_call(
    page: Any, served: ServeProcess, soong_env: SoongEnv
) -> None:
    soong_env.write_project("readme.md", "hello\n")
    open_ui(page, served)
    page.click("#new-session")
    say(page, "delegate look around")
    parent = ".toolbox:has(> .tool:has-text('agent.create_sub_agent'))"
    # live: the child's tool call and its reply stream inside the parent's tool call
    page.wait_for_selector(f"{parent} > .nested .child-head")
    page.wait_for_selector(f"{parent} > .nested .toolbox .tool:has-text('code.list_dir')")
    page.wait_for_selector(f"{parent} > .nested .msg.assistant:has-text('child saw')")
    wait_run_finished(page)
    # stored: the same nesting rebuilt from the session (the child's events replayed from its stream)
    page.wait_for_selector(f"{parent} > .nested .child-activity .tool:has-text('code.list_dir')")
    assert "child saw" in page.inner_text(f"{parent} > .nested .child-activity .msg.assistant")
    assert "completed" in page.inner_text(f"{parent} > .nested")
    assert page.locator("#conversation > .msg.assistant:has-text('child saw')").count() == 0
    assert page.locator("#conversation > .msg.assistant:has-text('Done:')").count() == 1
    # after a reload the child's activity is one click away, still under its tool call
    page.reload()
    page.wait_for_selector(f"{parent} > .nested button.show-activity").click()
    page.wait_for_selector(f"{parent} > .nested .child-activity .tool:has-text('code.list_dir')")
    assert page.js_errors == []


def test_a_pushed_approval_card_disappears_on_a_second_client(
    page: Any, browser: Any, served: ServeProcess, soong_env: SoongEnv
) -> None:
    other_context = browser.new_context(viewport={"width": 1280, "height": 800})
    other = other_context.new_page()
    other.set_default_timeout(15_000)
    polled: list[str] = []
    other.on("request", lambda r: polled.append(r.url) if r.url.endswith("/api/approvals") else None)
    try:
        open_ui(page, served)
        open_ui(other, served)
        page.click("#new-session")
        say(page, "write pushed.txt by-the-first-client")
        page.wait_for_selector(".approval")
        session_id = page.evaluate("state.sessionId")
        # the second client sees the request pushed: first as the header badge, then as the card
        other.wait_for_selector("#other-approvals:has-text('1 approval')")
        other.click("#other-approvals")
        other.wait_for_selector(".approval[data-request]:has-text('pushed.txt')")
        assert other.evaluate("state.sessionId") == session_id
        page.click(".approval button[data-decision=allow_once]")
        # answered on the first client: the card disappears on the second without any polling
        other.wait_for_function("() => document.querySelectorAll('.approval').length === 0", timeout=5_000)
        wait_run_finished(page)
        assert (soong_env.project / "pushed.txt").read_text() == "by-the-first-client"
        assert polled == []  # the list endpoint was never polled: approvals come over the push stream
    finally:
        other_context.close()
    assert page.js_errors == []


def test_worker_pools_view_and_addressing_a_worker(page: Any, served: ServeProcess) -> None:
    open_ui(page, served)
    page.click("#new-session")
    page.select_option("#new-mode", "orchestrator")
    page.click("[data-view=pools]")
    row = page.wait_for_selector("#pools .pool[data-pool=default] tr[data-worker=w1]")
    assert row is not None
    assert page.inner_text("#pools tr[data-worker=w1] .status") == "idle"
    assert "default" in page.inner_text("#pools .pool[data-pool=default] h4")
    page.click("#pools tr[data-worker=w1] button.address")
    assert page.input_value("#message") == "@w1 "
    page.type("#message", "fix the bug")
    page.press("#message", "Enter")
    dispatch = ".toolbox:has(> .tool:has-text('agent.dispatch_worker'))"
    page.wait_for_selector(f"{dispatch} > .nested .child-head:has-text('worker @w1')")
    page.wait_for_selector(f"{dispatch} > .nested .msg.assistant:has-text('Worker did: @w1 fix the bug')")
    page.wait_for_selector(".msg.assistant:has-text('Orchestrated: Worker did: @w1 fix the bug')")
    wait_run_finished(page)
    page.wait_for_selector("#conversation .msg.user .chip:has-text('→ @w1')")
    page.click("[data-view=pools]")
    page.wait_for_selector("#pools:has-text('in this session') tr[data-worker=w1] .status:has-text('idle')")
    assert page.js_errors == []


def test_the_timeline_shows_a_prompt_cache_break(
    page: Any, soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    # one tool call spends the limit: the final answer call goes without tools, which breaks the prefix
    use_scripted_ollama(soong_env, scripted_ollama, RuleModel(frame_delay_s=0.01))
    soong_env.write_config(
        model={"provider": "ollama", "base_url": scripted_ollama.base_url, "context_window": 65536},
        limits={"max_tool_calls": 1},
    )
    server = start_serve(soong_env)
    try:
        open_ui(page, server)
        page.click("#new-session")
        say(page, "write cached.txt body")
        page.wait_for_selector(".approval")
        page.click(".approval button[data-decision=allow_once]")
        wait_run_finished(page)
        # the waterfall marks the model call whose request broke the cached prefix
        page.click("[data-view=trace]")
        model = page.locator(".wf-row[data-kind=model]:has(.badge.cache-break)")
        model.wait_for()  # a locator: the view redraws when the trace is reloaded
        assert "turn 2" in model.inner_text()
        model.click()
        assert "tools at tool:removed" in page.inner_text(".wf-more:not([hidden])")
        assert page.locator(".wf-row[data-kind=run] .wf-mark[data-kind=prompt_cache_break]").count() == 1
        # and the raw event table highlights the event
        page.click("#show-raw")
        page.wait_for_selector("#timeline tr[data-type=run_completed]")
        assert page.locator("#timeline tr[data-type=prompt_cache_break]").count() == 0  # a debug event
        page.check("#debug-toggle")
        row = page.wait_for_selector("#timeline tr.cache-break[data-type=prompt_cache_break]")
        assert row is not None
        assert "prompt cache break in tools at tool:removed, turn 2" in row.inner_text()
        assert page.js_errors == []
    finally:
        assert server.stop() == 0


def test_agents_view_lists_teammates_with_state_and_inbox(
    page: Any, soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    use_scripted_ollama(soong_env, scripted_ollama, RuleModel(frame_delay_s=0.02))
    soong_env.write_config(
        model={"provider": "ollama", "base_url": scripted_ollama.base_url, "context_window": 65536},
        agents={"max_teammates_per_session": 2},
    )
    server = start_serve(soong_env)
    try:
        open_ui(page, server)
        page.click("#new-session")
        say(page, "spawn alice <b>hi</b>")
        page.wait_for_function("() => state.sessionId", timeout=15_000)  # the run has started
        wait_run_finished(page)
        lead = page.evaluate("state.sessionId")
        page.click("[data-view=agents]")
        row = "#team-table tr.teammate[data-name=alice]"
        page.wait_for_selector(f"{row} td.state-idle", timeout=15_000)  # refreshed while the view is open
        assert "0 unread" in page.inner_text(row) and "resident, shared" in page.inner_text(row)
        page.click(f"{row} a")  # opens the teammate's own session
        page.wait_for_function(f"() => state.sessionId && state.sessionId !== {lead!r}")
        page.click("[data-view=conversation]")
        page.wait_for_selector("#conversation:has-text('Echo:')")
        assert page.locator("#conversation b").count() == 0  # the task text stays text
        assert page.js_errors == []
    finally:
        assert server.stop() == 0


def _session_with_reasoning_and_image(env: SoongEnv) -> str:
    """A stored session: the user sent an image, the answer has reasoning (made in a thread: the
    Playwright sync API owns this thread's event loop)."""
    import asyncio
    import threading

    from agent_core import UserMessage
    from tests.fixtures.real_models import png
    from tests.fixtures.runtime import collect, open_runtime
    from tests.fixtures.scripted_servers import OllamaWire, stream

    found: list[str] = []

    async def make() -> None:
        with ScriptedOllamaServer(capabilities=("completion", "tools", "vision", "thinking")) as model:
            thought = OllamaWire.thinking("secret <b>plan</b>")
            model.enqueue(stream([thought, OllamaWire.content("A red square."), OllamaWire.done()]))
            config = {
                "model": {
                    "provider": "ollama",
                    "base_url": model.base_url,
                    "input_modalities": ["text", "image"],
                    "thinking_budget_tokens": 1024,
                }
            }
            async with open_runtime(env, config=config) as rt:
                run = await rt.start(UserMessage.with_files("what is this?", png(30, 20)))
                await collect(run)
                await run.wait()
                found.append(run.session_id)

    worker = threading.Thread(target=lambda: asyncio.run(make()))
    worker.start()
    worker.join(60)
    return found[0]


def test_reasoning_is_collapsed_and_images_are_shown(page: Any, soong_env: SoongEnv) -> None:
    """Issue 34: a stored answer's reasoning is a collapsed section (opened on click), and the user's
    image is shown through /api/artifacts."""
    session_id = _session_with_reasoning_and_image(soong_env)
    server = start_serve(soong_env)
    try:
        open_ui(page, server)
        page.click(f"#session-list li[data-session='{session_id}']")
        details = page.wait_for_selector("#conversation details.reasoning")
        assert details is not None and details.get_attribute("open") is None
        assert page.locator("#conversation details.reasoning b").count() == 0  # inserted as text
        page.click("#conversation details.reasoning summary")
        assert "secret <b>plan</b>" in page.locator("#conversation details.reasoning").inner_text()
        page.wait_for_function(
            "() => { const i = document.querySelector('#conversation img.attachment'); "
            "return i && i.complete && i.naturalWidth === 30; }"
        )
        assert page.js_errors == []
    finally:
        assert server.stop() == 0


def test_an_mcp_servers_question_is_a_form(
    page: Any, soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    """Issue 38: an MCP elicitation request is an approval card with one input per schema field;
    Send answers with the typed values (the integer as a number), which reach the MCP server."""
    soong_env.write_config(model={"provider": "ollama", "base_url": scripted_ollama.base_url})
    entry = {
        "command": sys.executable,
        "args": [str(STATIC.parents[3] / "tests/fixtures/mcp_full_server.py")],
    }
    soong_env.write_home(
        "mcp.json", json.dumps({"mcpServers": {"full": {**entry, "startup_timeout_ms": 60000}}})
    )
    scripted_ollama.handler(TurnScript(lambda r: [("ask_name", {})], lambda r: "thanks"))
    server = start_serve(soong_env)
    try:
        open_ui(page, server)
        page.click("#new-session")
        say(page, "who am I?")
        page.wait_for_selector(".approval:has-text('mcp.full.ask_name')", timeout=60_000)
        page.click(".approval button[data-decision=allow_once]")
        card = page.wait_for_selector(".approval.elicitation", timeout=60_000)
        assert card is not None
        assert "MCP server full asks" in card.inner_text() and "Who are you?" in card.inner_text()
        page.fill(".approval.elicitation input[name=name]", "Ada <b>")
        page.fill(".approval.elicitation input[name=age]", "36")
        page.click(".approval.elicitation button[data-decision=allow_once]")
        page.wait_for_selector(".msg.assistant:has-text('thanks')", timeout=30_000)
        results = tool_messages(chat_requests(scripted_ollama)[-1])
        assert any("accept: Ada <b> is 36" in str(m.get("content")) for m in results), results
        assert page.js_errors == []
    finally:
        assert server.stop() == 0
