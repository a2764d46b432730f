"""The web UI and issue 37 in headless Chromium: a question of ``internal.ask_user`` answered from its card
(an option, or the user's own words), a write in the "accept edits" permission mode that asks nothing, a
plan-mode run carried out with one click, and "Rewind to here" putting files and conversation back."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fixtures.env import SoongEnv
from tests.fixtures.scripted_servers import ScriptedOllamaServer
from tests.fixtures.serve import RuleModel, ServeProcess, start_serve, use_scripted_ollama

pytestmark = pytest.mark.browser


@pytest.fixture
def served(soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer) -> Iterator[ServeProcess]:
    use_scripted_ollama(soong_env, scripted_ollama, RuleModel(frame_delay_s=0.02))
    server = start_serve(soong_env)
    try:
        yield server
    finally:
        assert server.stop() == 0


def open_ui(page: Any, server: ServeProcess) -> None:
    page.goto(server.stdout_line.split(" ", 1)[1].strip())
    page.wait_for_selector("#version:has-text('v')")


def say(page: Any, text: str) -> None:
    page.fill("#message", text)
    page.press("#message", "Enter")


def wait_run_finished(page: Any) -> None:
    page.wait_for_function("() => !state.live", timeout=15_000)


def test_question_answered_from_its_card(page: Any, served: ServeProcess) -> None:
    open_ui(page, served)
    page.click("#new-session")
    say(page, "ask Which colour for the button? | red | blue")
    card = page.wait_for_selector(".question")
    assert card is not None and "Which colour for the button?" in card.inner_text()
    assert page.locator(".question button.option").all_inner_texts() == ["red", "blue"]
    page.click(".question button.option:has-text('blue')")
    page.wait_for_selector(".msg.assistant:has-text('Done:')")
    wait_run_finished(page)
    page.wait_for_function("() => document.querySelectorAll('.question').length === 0")
    assert '"answer": "blue"' in json.dumps(page.evaluate("() => state.replay.nodes.map((n) => n.content)"))
    # the user's own words
    say(page, "ask Anything else? | no")
    page.wait_for_selector(".question")
    page.fill(".question input[type=text]", "yes: <b>bold</b> please")
    page.press(".question input[type=text]", "Enter")
    page.wait_for_selector(".msg.assistant:has-text('yes: <b>bold</b> please')")
    wait_run_finished(page)
    assert page.locator("#conversation b").count() == 0  # shown as text, never as HTML
    assert page.js_errors == []


def test_permission_mode_plan_approval_and_rewind_to_here(
    page: Any, served: ServeProcess, soong_env: SoongEnv
) -> None:
    open_ui(page, served)
    page.click("#new-session")
    page.select_option("#permission-mode", "accept_edits")
    say(page, "write first.txt one")
    page.wait_for_selector(".msg.assistant:has-text('Done:')")
    wait_run_finished(page)
    assert page.locator(".approval").count() == 0  # accept edits: nothing asked
    assert (soong_env.project / "first.txt").read_text() == "one"
    say(page, "write second.txt two")
    page.wait_for_function(
        "() => [...document.querySelectorAll('.msg.assistant')].filter((m) => m.innerText.includes('Done:')).length === 2"
    )
    wait_run_finished(page)
    assert (soong_env.project / "second.txt").exists()

    # plan mode: the reply is a plan; one click carries it out in the default mode
    page.select_option("#permission-mode", "plan")
    say(page, "plan it")
    page.wait_for_selector(".msg.assistant:has-text('Echo: plan it')")
    wait_run_finished(page)
    page.wait_for_selector("#approve-plan:not([hidden])")
    page.click("#approve-plan")
    page.wait_for_selector(".msg.assistant:has-text('Echo: Carry out the plan.')")
    wait_run_finished(page)
    assert page.input_value("#permission-mode") == "default"
    page.wait_for_selector("#approve-plan[hidden]", state="attached")
    runs = page.evaluate("() => state.replay.runs.map((r) => r.permission_mode)")
    assert runs == ["accept_edits", "accept_edits", "plan", "default"]

    # rewind to the first reply: second.txt goes away and the conversation continues from there
    page.click("[data-view=tree]")
    first_reply = page.evaluate(
        "() => state.replay.nodes.find((n) => n.role === 'assistant' && JSON.stringify(n.content).includes('Done:')).node_id"
    )
    while page.locator("#tree button.collapsed-run").count():  # the tree folds long linear runs
        page.locator("#tree button.collapsed-run").first.click()
    page.once("dialog", lambda dialog: dialog.accept())
    page.click(f".node[data-node='{first_reply}'] button.rewind")
    page.wait_for_selector("#rewind-status:has-text('rewound: 0 file(s) restored, 1 removed')")
    assert not (soong_env.project / "second.txt").exists()
    assert (soong_env.project / "first.txt").read_text() == "one"
    page.click("[data-view=conversation]")
    assert "second.txt" not in page.locator("#conversation").inner_text()

    # a file changed by hand refuses the rewind and changes nothing
    (soong_env.project / "first.txt").write_text("by hand")
    page.click("[data-view=tree]")
    messages: list[str] = []

    def answer(dialog: Any) -> None:
        messages.append(dialog.message)
        dialog.accept()

    page.on("dialog", answer)
    first_message = page.evaluate("() => state.replay.nodes.find((n) => n.role === 'user').node_id")
    page.click(f".node[data-node='{first_message}'] button.rewind")
    page.wait_for_selector("#rewind-status:has-text('rewind refused')")
    assert any("changed since" in m for m in messages)
    assert (soong_env.project / "first.txt").read_text() == "by hand"
    assert page.js_errors == []
