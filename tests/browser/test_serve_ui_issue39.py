"""The web UI a person would live in (issue 39), in headless Chromium against a real ``soong-agent serve``:
Markdown rendered and sanitised, tool calls as folded cards, the run's state and the stop button, the trace
waterfall with a child run and a retry, the node tree that indents only at a branch point, the header and
settings panel, the 420 px layout, the dark theme and the keyboard shortcuts."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.browser.test_serve_ui import open_ui, say, wait_run_finished
from tests.fixtures.env import SoongEnv
from tests.fixtures.scripted_servers import ScriptedOllamaServer
from tests.fixtures.serve import RuleModel, ServeProcess, start_serve, use_scripted_ollama

pytestmark = pytest.mark.browser

ROOMY = {"context_window": 65536, "retry": {"initial_backoff_ms": 10}}


@pytest.fixture
def served(soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer) -> Iterator[ServeProcess]:
    use_scripted_ollama(soong_env, scripted_ollama, RuleModel(frame_delay_s=0.02))
    soong_env.write_config(
        model={
            "provider": "ollama",
            "base_url": scripted_ollama.base_url,
            "price_input_per_mtok": 3.0,
            **ROOMY,
        }
    )
    server = start_serve(soong_env)
    try:
        yield server
    finally:
        assert server.stop() == 0


def no_page_scroll(page: Any) -> bool:
    return bool(
        page.evaluate(
            "() => document.documentElement.scrollWidth <= window.innerWidth"
            " && document.body.scrollWidth <= window.innerWidth"
        )
    )


MARKDOWN = "\n".join(
    [
        "# Findings",
        "Some **bold** text, a [docs link](https://example.com/guide) and https://example.org/plain.",
        "",
        "```python",
        "def answer():",
        "    return 42",
        "```",
        "",
        "- first point",
        "- second point",
        "",
        "<script>window.pwned = 1</script>",
        '<img src=x onerror="window.pwned = 2">',
        "[click me](javascript:window.pwned=3)",
        '<a href="javascript:window.pwned=4">raw link</a>',
        "![tracker](https://example.com/pixel.png)",
    ]
)


def test_markdown_is_rendered_and_what_could_run_stays_inert(page: Any, served: ServeProcess) -> None:
    open_ui(page, served)
    page.click("#new-session")
    say(page, "reply " + MARKDOWN)
    wait_run_finished(page)
    reply = page.locator("#conversation .msg.assistant").last
    body = reply.locator(".md")
    assert body.locator("h1").inner_text() == "Findings"
    assert body.locator("strong").inner_text() == "bold"
    assert body.locator("ul > li").all_inner_texts() == ["first point", "second point"]
    # the code block is highlighted (highlight.js spans), its text intact
    code = body.locator("pre > code.hljs")
    assert "def answer():" in code.inner_text()
    assert body.locator("pre > code .hljs-keyword").count() >= 1
    # links: a new tab without opener or referrer, the target shown when the text says something else
    link = body.locator("a:has-text('docs link')")
    assert link.get_attribute("href") == "https://example.com/guide"
    assert link.get_attribute("target") == "_blank"
    assert link.get_attribute("rel") == "noopener noreferrer nofollow"
    assert "example.com/guide" in body.locator(".link-target").first.inner_text()
    assert body.locator("a[href='https://example.org/plain']").count() == 1  # a bare URL is linked
    # what could run stays text: no script, no image, no javascript: link, no handler ran
    text = reply.inner_text()
    assert "<script>window.pwned = 1</script>" in text
    assert 'onerror="window.pwned = 2"' in text
    assert "[click me](javascript:window.pwned=3)" in text
    for selector in ("script", "img", "iframe", "[onerror]", "a[href^='javascript']", "a:not([href])"):
        assert page.locator(f"#conversation {selector}").count() == 0, selector
    # a Markdown image loads nothing: it is a link, its target shown
    image = body.locator("a:has-text('tracker')")
    assert image.get_attribute("href") == "https://example.com/pixel.png"
    assert "example.com/pixel.png" in image.locator("xpath=following-sibling::span[1]").inner_text()
    assert page.locator("#conversation a").count() == 3
    page.wait_for_timeout(300)
    assert page.evaluate("window.pwned") is None
    # the user's own message is shown as typed (text, not Markdown)
    assert "**bold**" in page.locator("#conversation .msg.user").last.inner_text()
    assert page.js_errors == []


def test_a_tool_card_folds_and_unfolds(page: Any, served: ServeProcess, soong_env: SoongEnv) -> None:
    open_ui(page, served)
    page.click("#new-session")
    say(page, "write notes.md first line of the notes")
    page.wait_for_selector("#run-state[data-state=approval]")
    page.click(".approval button[data-decision=allow_once]")
    wait_run_finished(page)
    card = page.locator("#conversation .toolbox[data-tool='code.write_file']")
    header = card.locator("> .tool")
    assert "notes.md · 23 characters" in header.inner_text()
    assert card.get_attribute("data-status") == "ok"
    assert re.search(r"\d+ ms", header.locator(".tdur").inner_text())
    body = card.locator("> .tool-body")
    assert body.is_hidden() and header.get_attribute("aria-expanded") == "false"
    header.click()
    assert body.is_visible() and header.get_attribute("aria-expanded") == "true"
    assert "first line of the notes" in body.locator(".tool-args pre.code").first.inner_text()
    result = json.loads(body.locator(".tool-result pre.json").inner_text())
    assert result["bytes_written"] == 23 and result["created"] is True
    header.click()
    assert body.is_hidden()
    # a command: its argv one argument per line; unfolded, its exit status and output as text
    say(page, "command " + json.dumps(["echo", "hello from the card"]))
    page.wait_for_selector(".approval")
    page.click(".approval button[data-decision=allow_once]")
    wait_run_finished(page)
    command = page.locator("#conversation .toolbox[data-tool='code.run_command']")
    assert 'echo "hello from the card"' in command.locator("> .tool .targs").inner_text()
    command.locator("> .tool").press("Enter")  # a card is a button: the keyboard unfolds it too
    assert command.locator(".tool-args ol.argv > li").all_inner_texts() == ["echo", "hello from the card"]
    assert "exit status 0" in command.locator(".command-result").inner_text()
    assert command.locator("pre.stdout").inner_text().strip() == "hello from the card"
    assert (soong_env.project / "notes.md").read_text() == "first line of the notes"
    assert page.js_errors == []


def test_the_run_state_the_stop_button_and_the_keyboard(
    page: Any, served: ServeProcess, soong_env: SoongEnv
) -> None:
    open_ui(page, served)
    page.click("#new-session")
    # streaming, with the output so far and its rate; Esc stops the run
    say(page, "slow 60")
    page.wait_for_selector("#run-state[data-state=streaming]")
    page.wait_for_function(
        "() => /≈\\d+ tokens · [\\d.]+ tokens\\/s/.test(document.querySelector('#run-status').textContent)"
    )
    assert page.is_visible("#cancel-run")
    page.keyboard.press("Escape")
    page.wait_for_selector("#run-state[data-state=cancelled]")
    wait_run_finished(page)
    assert page.is_hidden("#cancel-run")
    # a second message while a run is going on waits in the queue, and says so
    say(page, "slow 15")
    page.wait_for_selector("#run-state[data-state=streaming]")
    page.fill("#message", "queued after the slow one")
    page.keyboard.press("Control+Enter")  # sends from anywhere
    page.wait_for_selector("#run-state[data-state=queued]")
    assert "position 1" in page.inner_text("#run-status")
    page.wait_for_selector(".msg.assistant:has-text('Echo: queued after the slow one')", timeout=20_000)
    wait_run_finished(page)
    assert page.get_attribute("#run-state", "data-state") == "completed"
    # awaiting approval, answered from the keyboard (Alt+1: allow once)
    say(page, "write keyed.txt by-the-keyboard")
    page.wait_for_selector("#run-state[data-state=approval]")
    assert "code.write_file" in page.inner_text("#run-status")
    page.evaluate("document.activeElement.blur()")
    page.keyboard.press("Alt+1")
    page.wait_for_selector("#conversation .tool.ok")
    wait_run_finished(page)
    assert (soong_env.project / "keyed.txt").read_text() == "by-the-keyboard"
    # "/" goes to the message box
    page.evaluate("document.activeElement.blur()")
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "message"
    assert page.js_errors == []


def test_a_reasoning_model_shows_its_state_and_folded_reasoning_live(page: Any, served: ServeProcess) -> None:
    """While the model reasons the run says so (with the output rate), the reasoning streams into a folded
    section, and the chip turns to streaming when the answer begins."""
    open_ui(page, served)
    page.click("#new-session")
    say(page, "think 25")
    page.wait_for_selector("#run-state[data-state=thinking]")
    assert page.inner_text("#run-state") == "reasoning"
    page.wait_for_function(
        "() => /is reasoning · ≈\\d+ tokens · [\\d.]+ tokens\\/s/.test(document.querySelector('#run-status').textContent)"
    )
    live = page.locator("#conversation details.reasoning")
    assert live.count() == 1 and live.get_attribute("open") is None  # folded while it streams
    page.wait_for_function(
        "() => document.querySelector('#conversation details.reasoning').textContent.includes('step 3,')"
    )
    page.wait_for_selector("#run-state[data-state=streaming]")
    wait_run_finished(page)
    assert page.get_attribute("#run-state", "data-state") == "completed"
    # the stored answer: the reasoning folded above the reply
    page.wait_for_selector("#conversation .msg.assistant:has-text('Thought it through.')")
    stored = page.locator("#conversation details.reasoning")
    assert stored.count() == 1 and stored.get_attribute("open") is None
    stored.locator("summary").click()
    assert "step 24," in stored.inner_text()
    assert page.js_errors == []


def test_the_waterfall_shows_a_child_run_and_a_retry(
    page: Any, served: ServeProcess, soong_env: SoongEnv
) -> None:
    soong_env.write_project("readme.md", "hello\n")
    open_ui(page, served)
    page.click("#new-session")
    say(page, "delegate look around")
    wait_run_finished(page)
    say(page, "flaky once more")
    wait_run_finished(page)
    page.click("[data-view=trace]")
    # the latest run first: its model call was retried after a 429
    # (locators, not element handles: the view redraws when the trace is reloaded)
    model = page.locator(".wf-row[data-kind=model]:has(.badge.retry)")
    model.wait_for()
    assert "↻ 1" in model.inner_text()
    assert page.locator(".wf-row[data-kind=run] .wf-mark[data-kind=retry]").count() == 1
    model.click()
    detail = page.inner_text(".wf-more:not([hidden])")
    assert "429" in detail and "input tokens" in detail and "cost" in detail
    # the first run: the child run nested under the call that started it, its own calls below it
    page.select_option("#trace-run", index=0)
    page.wait_for_selector(".wf-row[data-kind=tool][data-tool='agent.create_sub_agent'][data-depth='1']")
    child = page.locator(".wf-row[data-kind=run][data-depth='2']")
    assert child.count() == 1 and "sub" in child.inner_text()
    rows = page.locator(".wf-row:not(.wf-axis)")
    kinds = [(r.get_attribute("data-kind"), r.get_attribute("data-depth")) for r in rows.all()]
    assert kinds == [
        ("run", "0"),
        ("model", "1"),
        ("tool", "1"),
        ("run", "2"),
        ("model", "3"),
        ("tool", "3"),
        ("model", "3"),
        ("model", "1"),
    ]
    assert page.locator(".wf-row[data-kind=tool][data-tool='code.list_dir'][data-depth='3']").count() == 1
    # bars lie on one time axis: the child's bar inside its tool call's bar
    call = page.locator(".wf-row[data-tool='agent.create_sub_agent'] .wf-bar").bounding_box()
    inner = child.locator(".wf-bar").bounding_box()
    assert call is not None and inner is not None
    assert call["x"] - 1 <= inner["x"] and inner["x"] + inner["width"] <= call["x"] + call["width"] + 1
    # usage and cost per model call (a price is configured)
    assert re.search(r"\$0\.\d{4}", page.inner_text(".wf-row[data-kind=run][data-depth='0'] .wf-figs"))
    # the raw event table is one click away
    page.click("#show-raw")
    page.wait_for_selector("#timeline tr[data-type=child_agent_created]")
    page.click("#show-waterfall")
    page.wait_for_selector(".wf-row[data-kind=run]")
    assert page.js_errors == []


def test_the_tree_of_30_nodes_with_one_branch_indents_once(page: Any, served: ServeProcess) -> None:
    with served.client() as client:
        session_id = None
        for i in range(14):  # 14 runs: 28 nodes in one line
            body: dict[str, Any] = {"message": f"message {i}"}
            if session_id:
                body["session_id"] = session_id
            created = client.post("/api/runs", json=body).json()
            session_id = created["session_id"]
            assert [m.event for m in served.events(created["run_id"])][-1] == "run_completed"
        nodes = client.get(f"/api/sessions/{session_id}").json()["nodes"]
        assert len(nodes) == 28
        fork_point = nodes[19]["node_id"]  # the reply to message 9
        assert (
            client.post(f"/api/sessions/{session_id}/active", json={"node_id": fork_point}).status_code == 200
        )
        created = client.post(
            "/api/runs", json={"message": "a second branch", "session_id": session_id}
        ).json()
        assert [m.event for m in served.events(created["run_id"])][-1] == "run_completed"
    open_ui(page, served)
    page.click(f"#session-list li[data-session='{session_id}']")
    page.click("[data-view=tree]")
    page.wait_for_selector(".tree-summary:has-text('30 nodes · 1 branch point')")
    assert page.locator(".branches").count() == 1
    assert page.locator(f".branches[data-at='{fork_point}'] > .branch").count() == 2

    def columns() -> list[float]:
        lefts = page.evaluate(
            "() => [...document.querySelectorAll('#tree .node')].map((n) => n.getBoundingClientRect().left)"
        )
        return sorted({round(x) for x in lefts})

    # the long linear run is folded to its ends
    folded = page.locator("#tree button.collapsed-run")
    assert folded.count() >= 1
    assert len(columns()) == 2  # the main line, and one step in for the two branches
    while page.locator("#tree button.collapsed-run").count():
        page.locator("#tree button.collapsed-run").first.click()
    assert page.locator("#tree .node").count() == 30
    steps = columns()
    assert len(steps) == 2 and 8 <= steps[1] - steps[0] <= 40
    # the active path: the new branch, highlighted down to its leaf
    assert page.locator("#tree .node.on-path").count() == 22
    assert "Echo: a second branch" in page.inner_text("#tree .node.active-leaf")
    assert page.locator(".branch.on-path .branch-head:has-text('active path')").count() == 1
    assert page.js_errors == []


def test_the_header_names_project_provider_and_model_and_settings_mask_secrets(
    page: Any, soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    use_scripted_ollama(soong_env, scripted_ollama, RuleModel(frame_delay_s=0.01))
    secret = "sk-browser-0123456789abcdef"
    soong_env.write_config(
        model={
            "provider": "ollama",
            "base_url": scripted_ollama.base_url.replace("http://", "http://alice:url-secret-99@"),
            "api_key_env": "SCRIPTED_LLM_KEY",
            **ROOMY,
        }
    )
    server = start_serve(soong_env, extra_env={"SCRIPTED_LLM_KEY": secret})
    try:
        open_ui(page, server)
        page.wait_for_selector("#model:not([hidden])")
        assert page.inner_text("#model") == "ollama · test-model"
        assert soong_env.project.name in page.inner_text("#project")
        assert page.get_attribute("#project", "title") == f"project: {soong_env.project}"
        page.click("#new-session")
        say(page, "hello header")
        wait_run_finished(page)
        page.wait_for_selector("#session-usage:not([hidden])")
        assert re.search(r"session: \d+ in · \d+ out", page.inner_text("#session-usage"))
        page.click("#open-settings")
        dialog = page.wait_for_selector("dialog#settings[open]")
        assert dialog is not None
        page.click("details.config-section[data-section=model] summary")
        text = dialog.inner_text()
        assert str(soong_env.project) in text and "test-model" in text
        assert "SCRIPTED_LLM_KEY" in text and "set · named by model.api_key_env" in text
        assert "alice:[REDACTED]@" in text
        assert secret not in text and "url-secret-99" not in text and server.token not in text
        assert "Alt+1" in text  # the shortcuts are listed
        page.keyboard.press("Escape")
        page.wait_for_selector("dialog#settings:not([open])", state="attached")
        assert page.js_errors == []
    finally:
        assert server.stop() == 0


def test_the_layout_at_420_px_has_no_horizontal_scroll(
    browser: Any, served: ServeProcess, soong_env: SoongEnv
) -> None:
    soong_env.write_project("readme.md", "hello\n")
    context = browser.new_context(viewport={"width": 420, "height": 820})
    page = context.new_page()
    page.set_default_timeout(15_000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        open_ui(page, served)
        sidebar = page.locator("#sidebar")
        box = sidebar.bounding_box()
        assert box is not None and box["x"] + box["width"] <= 0  # folded away
        main = page.locator("#main").bounding_box()
        assert main is not None and main["width"] >= 410
        page.click("#toggle-sidebar")
        page.wait_for_function("() => document.querySelector('#sidebar').getBoundingClientRect().left >= 0")
        page.click("#new-session")  # picking closes it again
        page.wait_for_function("() => document.querySelector('#sidebar').getBoundingClientRect().right <= 0")
        long_line = "x" * 400
        say(page, f"reply {long_line} https://example.com/{'y' * 200}\n\n```\n{'z' * 300}\n```")
        wait_run_finished(page)
        say(page, "delegate look around")
        wait_run_finished(page)
        page.click("#conversation .toolbox[data-tool='agent.create_sub_agent'] > .tool")
        assert no_page_scroll(page)
        for view in ("trace", "tree", "agents", "pools", "conversation"):
            page.click(f"[data-view={view}]")
            page.wait_for_timeout(200)
            assert no_page_scroll(page), view
        # the composer and its buttons are inside the screen
        for selector in ("#message", "#send"):
            rect = page.locator(selector).bounding_box()
            assert rect is not None and rect["x"] >= 0 and rect["x"] + rect["width"] <= 420, selector
        page.click("#open-settings")
        page.wait_for_selector("dialog#settings[open]")
        assert no_page_scroll(page)
        assert errors == []
    finally:
        context.close()


def test_the_dark_theme_follows_the_system(browser: Any, served: ServeProcess) -> None:
    def colours(scheme: str) -> dict[str, str]:
        context = browser.new_context(viewport={"width": 1000, "height": 700}, color_scheme=scheme)
        page = context.new_page()
        try:
            open_ui(page, served)
            page.click("#new-session")
            say(page, "reply ```python\nx = 1\n```")
            wait_run_finished(page)
            return dict(
                page.evaluate(
                    """() => ({
                        body: getComputedStyle(document.body).backgroundColor,
                        text: getComputedStyle(document.body).color,
                        reply: getComputedStyle(document.querySelector('.msg.assistant')).backgroundColor,
                        code: getComputedStyle(document.querySelector('.md pre code.hljs')).color,
                    })"""
                )
            )
        finally:
            context.close()

    def luminance(css: str) -> float:
        r, g, b = (int(v) for v in re.findall(r"\d+", css)[:3])
        return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255

    dark, light = colours("dark"), colours("light")
    assert luminance(dark["body"]) < 0.15 and luminance(dark["text"]) > 0.8
    assert luminance(light["body"]) > 0.9 and luminance(light["text"]) < 0.2
    assert luminance(dark["reply"]) < 0.2
    assert dark["code"] != light["code"]  # the dark highlight.js theme applies too


def test_every_view_runs_under_the_strict_policy(
    page: Any, served: ServeProcess, soong_env: SoongEnv
) -> None:
    """The page's policy allows scripts and styles from the server only, without inline code or eval; no
    view (Markdown, highlighting, the waterfall's bars, the settings panel) trips it."""
    soong_env.write_project("readme.md", "hello\n")
    page.add_init_script(
        "window.violations = [];"
        "document.addEventListener('securitypolicyviolation', (e) => window.violations.push(`${e.violatedDirective} ${e.blockedURI}`));"
    )
    response = page.goto(served.stdout_line.split(" ", 1)[1].strip())
    assert response is not None
    policy = response.headers["content-security-policy"]  # of GET / (after the token redirect)
    assert "script-src 'self'" in policy and "style-src 'self'" in policy
    assert (
        "unsafe-inline" not in policy and "unsafe-eval" not in policy and "frame-ancestors 'none'" in policy
    )
    page.wait_for_function("() => document.querySelector('#version').textContent.startsWith('v')")
    page.click("#new-session")
    say(page, "reply " + MARKDOWN)
    wait_run_finished(page)
    say(page, "delegate look around")
    wait_run_finished(page)
    page.click("#conversation .toolbox[data-tool='agent.create_sub_agent'] > .tool")
    for view in ("trace", "tree", "agents", "pools"):
        page.click(f"[data-view={view}]")
        page.wait_for_timeout(300)
    page.click("[data-view=trace]")
    page.locator(".wf-row[data-kind=model]").first.click()  # a locator: the view may redraw meanwhile
    page.click("#open-settings")
    page.wait_for_selector("dialog#settings[open] details.config-section")
    assert page.evaluate("window.violations") == []
    assert page.evaluate("Boolean(window.markdownit && window.DOMPurify && window.hljs)")
    assert page.js_errors == []
