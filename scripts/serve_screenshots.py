"""Regenerates the web UI screenshots under docs/ (serve-*.png): a private home and project in a temp dir,
the scripted Ollama server from tests/fixtures as the model (with a Markdown answer for the first
question), headless /usr/bin/chromium via Playwright.

Usage: .venv/bin/python scripts/serve_screenshots.py
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from playwright.sync_api import sync_playwright  # noqa: E402
from tests.fixtures.env import SoongEnv  # noqa: E402
from tests.fixtures.scripted_servers import OllamaWire, ScriptedOllamaServer, split_text, stream  # noqa: E402
from tests.fixtures.serve import RuleModel, start_serve, use_scripted_ollama  # noqa: E402

ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
DOCS = ROOT / "docs"
QUESTION = "What does this project do?"
ANSWER = """## What this project does

A small **demo**: `src/app.py` prints a greeting, and the [README](https://example.com/demo/README) says how
to run it.

```python
print('hello')
```

- one module, no dependencies
- run it with `python src/app.py`
"""


class DemoModel(RuleModel):
    """The rule model, with a Markdown answer to the first question."""

    def __call__(self, request: Any) -> Any:
        messages = (request.json or {}).get("messages", [])
        last = next((m for m in reversed(messages) if m.get("role") in ("user", "tool")), {})
        if last.get("role") == "user" and str(last.get("content", "")).strip() == QUESTION:
            return stream(OllamaWire.text_stream(*split_text(ANSWER, 6)), self.frame_delay_s)
        return super().__call__(request)


def say(page: Any, text: str) -> None:
    before = page.evaluate("state.lastRunId")
    page.fill("#message", text)
    page.press("#message", "Enter")
    page.wait_for_function("(before) => state.lastRunId !== before", arg=before)


def finished(page: Any, timeout: int = 30_000) -> None:
    page.wait_for_function("() => !state.live", timeout=timeout)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env = SoongEnv(home=Path(tmp) / "home", project=Path(tmp) / "demo-project")
        env.home.mkdir()
        env.project.mkdir()
        env.write_project("README.md", "# demo project\n")
        env.write_project("src/app.py", "print('hello')\n")
        os.environ["SOONG_AGENT_HOME"] = str(env.home)
        with ScriptedOllamaServer() as model:
            rules = DemoModel()
            use_scripted_ollama(env, model, rules)
            env.write_config(
                model={
                    "provider": "ollama",
                    "base_url": model.base_url,
                    "context_window": 65536,
                    "price_input_per_mtok": 3.0,
                    "price_output_per_mtok": 15.0,
                    "retry": {"initial_backoff_ms": 50},
                }
            )
            server = start_serve(env)
            url = server.stdout_line.split(" ", 1)[1].strip()
            try:
                with sync_playwright() as p:
                    browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
                    page = browser.new_page(viewport={"width": 1280, "height": 800})
                    page.goto(url)
                    page.wait_for_function(
                        "() => document.querySelector('#version').textContent.startsWith('v')"
                    )
                    page.click("#new-session")
                    for text in (
                        QUESTION,
                        "reply <b>HTML from the model stays text</b>",
                        "flaky run the tests",
                    ):
                        say(page, text)
                        finished(page)
                    say(page, "delegate look around the project")  # a sub agent, nested below its call
                    finished(page)
                    page.wait_for_selector(".nested .child-activity .toolbox")
                    say(page, "write notes.md first line of the notes")
                    page.wait_for_selector(".approval")
                    page.wait_for_selector("#run-state[data-state=approval]")
                    page.screenshot(path=str(DOCS / "serve-approval.png"))
                    page.click(".approval button[data-decision=allow_once]")
                    finished(page)
                    page.wait_for_timeout(800)
                    page.evaluate("document.querySelector('#conversation .msg.user').scrollIntoView()")
                    page.screenshot(path=str(DOCS / "serve-conversation.png"))
                    page.click("#conversation .toolbox[data-tool='code.write_file'] > .tool")
                    page.evaluate("document.querySelector('#conversation').scrollTop = 1e9")
                    page.screenshot(path=str(DOCS / "serve-tool-card.png"))
                    page.evaluate("document.querySelector('.toolbox:has(.nested)').scrollIntoView()")
                    page.screenshot(path=str(DOCS / "serve-child-agent.png"))
                    # the trace of the delegating run: the child nested under its call; a click shows the figures
                    page.click("[data-view=trace]")
                    page.wait_for_selector(".wf-row[data-kind=run]")
                    page.select_option("#trace-run", index=3)
                    page.wait_for_selector(".wf-row[data-kind=run][data-depth='2']")
                    page.click(".wf-row[data-kind=model][data-depth='3'] >> nth=0")
                    page.screenshot(path=str(DOCS / "serve-trace.png"))
                    page.select_option("#trace-run", index=2)
                    page.wait_for_selector(".wf-row[data-kind=model]:has(.badge.retry)").click()
                    page.screenshot(path=str(DOCS / "serve-trace-retry.png"))
                    page.click("#show-raw")
                    page.check("#debug-toggle")
                    page.screenshot(path=str(DOCS / "serve-raw-events.png"))
                    page.uncheck("#debug-toggle")
                    page.click("#show-waterfall")
                    # a branch: back to the first answer, then a new message
                    page.click("[data-view=tree]")
                    page.locator(".node:has-text('What this project does') button.switch").click()
                    page.wait_for_selector(".node.active-leaf:has-text('What this project does')")
                    page.click("[data-view=conversation]")
                    say(page, "a second branch")
                    finished(page)
                    page.click("[data-view=tree]")
                    page.wait_for_selector(".branches")
                    page.hover(".node:has-text('What does this project do?')")
                    page.screenshot(path=str(DOCS / "serve-tree.png"))
                    page.click("[data-view=agents]")
                    page.screenshot(path=str(DOCS / "serve-agents.png"))
                    page.click("#open-settings")
                    page.wait_for_selector("dialog#settings[open]")
                    page.click("details.config-section[data-section=model] summary")
                    page.screenshot(path=str(DOCS / "serve-settings.png"))
                    page.keyboard.press("Escape")
                    # the same session at 420 px in the dark theme
                    session = page.evaluate("state.sessionId")
                    dark = browser.new_context(viewport={"width": 420, "height": 820}, color_scheme="dark")
                    narrow = dark.new_page()
                    narrow.goto(url)
                    narrow.goto(f"{server.base_url}/#{session}")
                    narrow.wait_for_selector("#conversation .msg.assistant")
                    narrow.evaluate("document.querySelector('#conversation .msg.assistant').scrollIntoView()")
                    narrow.screenshot(path=str(DOCS / "serve-narrow-dark.png"))
                    narrow.click("#toggle-sidebar")
                    narrow.wait_for_timeout(300)
                    narrow.screenshot(path=str(DOCS / "serve-narrow-sessions.png"))
                    dark.close()
                    # orchestrator mode: address a worker, queue a second message, watch the pools view
                    rules.frame_delay_s = 0.6
                    page.click("#new-session")
                    page.select_option("#new-mode", "orchestrator")
                    page.click("[data-view=pools]")
                    page.click("#pools tr[data-worker=w1] button.address")
                    page.type("#message", "fix the failing test in src/app.py")
                    page.press("#message", "Enter")
                    page.wait_for_function("() => state.sessionId && state.live")
                    page.fill("#message", "@w1 then update the changelog")
                    page.press("#message", "Enter")
                    page.click("[data-view=pools]")
                    page.wait_for_selector("#pools .status.busy", timeout=30_000)
                    page.wait_for_selector("#pools td.queued:has-text('1 queued')", timeout=30_000)
                    page.screenshot(path=str(DOCS / "serve-pools.png"))
                    rules.frame_delay_s = 0.02
                    page.click("[data-view=conversation]")
                    page.wait_for_selector(
                        ".msg.assistant:has-text('Orchestrated: Worker did: @w1 then')", timeout=60_000
                    )
                    finished(page, 60_000)
                    page.wait_for_timeout(800)
                    page.screenshot(path=str(DOCS / "serve-orchestrator.png"))
                    # a reasoning model: the run says it reasons, the reasoning streams into a folded section
                    page.select_option("#new-mode", "normal")
                    page.click("#new-session")
                    say(page, "think 60")
                    page.wait_for_selector("#run-state[data-state=thinking]")
                    page.click("#conversation details.reasoning summary")
                    page.wait_for_timeout(2500)
                    page.screenshot(path=str(DOCS / "serve-reasoning.png"))
                    finished(page)
                    browser.close()
            finally:
                server.stop()


if __name__ == "__main__":
    main()
