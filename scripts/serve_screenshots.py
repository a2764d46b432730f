"""Regenerates the web UI screenshots under docs/ (serve-*.png): a private home and project in a temp dir,
the scripted Ollama server from tests/fixtures as the model, headless /usr/bin/chromium via Playwright.

Usage: .venv/bin/python scripts/serve_screenshots.py
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from playwright.sync_api import sync_playwright  # noqa: E402
from tests.fixtures.env import SoongEnv  # noqa: E402
from tests.fixtures.scripted_servers import ScriptedOllamaServer  # noqa: E402
from tests.fixtures.serve import RuleModel, start_serve, use_scripted_ollama  # noqa: E402

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env = SoongEnv(home=Path(tmp) / "home", project=Path(tmp) / "project")
        env.home.mkdir()
        env.project.mkdir()
        env.write_project("README.md", "# demo project\n")
        env.write_project("src/app.py", "print('hello')\n")
        os.environ["SOONG_AGENT_HOME"] = str(env.home)
        with ScriptedOllamaServer() as model:
            rules = use_scripted_ollama(env, model, RuleModel())
            server = start_serve(env)
            try:
                with sync_playwright() as p:
                    browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
                    page = browser.new_page(viewport={"width": 1200, "height": 720})
                    page.goto(server.stdout_line.split(" ", 1)[1].strip())
                    page.click("#new-session")
                    for text in ("What does this project do?", "reply <b>HTML from the model stays text</b>"):
                        page.fill("#message", text)
                        page.press("#message", "Enter")
                        page.wait_for_selector(f".msg.assistant:has-text('{text.split()[-1]}')")
                        page.wait_for_function("() => !state.live")
                    page.fill("#message", "delegate look around the project")  # a sub agent, nested below
                    page.press("#message", "Enter")
                    page.wait_for_function("() => !state.live")
                    page.wait_for_selector(".nested .child-activity .tool")
                    page.fill("#message", "write notes.txt first line of the notes")
                    page.press("#message", "Enter")
                    page.wait_for_selector(".approval")
                    page.screenshot(path=str(ROOT / "docs/serve-approval.png"))
                    page.click(".approval button[data-decision=allow_once]")
                    page.wait_for_function("() => !state.live")
                    page.wait_for_timeout(1200)
                    page.wait_for_selector(".nested .child-activity .tool")
                    page.evaluate("document.querySelector('.toolbox:has(.nested)').scrollIntoView()")
                    page.screenshot(path=str(ROOT / "docs/serve-conversation.png"))
                    page.click("[data-view=tree]")
                    page.locator(".node:has-text('Echo: What does') button.switch").click()
                    page.wait_for_selector(".node.active-leaf")
                    page.click("[data-view=conversation]")
                    page.fill("#message", "a second branch")
                    page.press("#message", "Enter")
                    page.wait_for_selector(".msg.assistant:has-text('Echo: a second branch')")
                    page.wait_for_function("() => !state.live")
                    page.click("[data-view=tree]")
                    page.screenshot(path=str(ROOT / "docs/serve-tree.png"))
                    page.click("[data-view=agents]")
                    page.screenshot(path=str(ROOT / "docs/serve-agents.png"))
                    page.click("[data-view=timeline]")
                    page.check("#debug-toggle")
                    page.screenshot(path=str(ROOT / "docs/serve-timeline.png"))
                    page.uncheck("#debug-toggle")
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
                    page.screenshot(path=str(ROOT / "docs/serve-pools.png"))
                    rules.frame_delay_s = 0.02
                    page.click("[data-view=conversation]")
                    page.wait_for_selector(
                        ".msg.assistant:has-text('Orchestrated: Worker did: @w1 then')", timeout=60_000
                    )
                    page.wait_for_function("() => !state.live")
                    page.wait_for_timeout(800)
                    page.screenshot(path=str(ROOT / "docs/serve-orchestrator.png"))
                    browser.close()
            finally:
                server.stop()


if __name__ == "__main__":
    main()
