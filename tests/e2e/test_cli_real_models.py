"""The CLI with real-model features (issue 34): ``run --image`` sends an image, the model's reasoning is
one dimmed, folded stderr line (stdout keeps only the answer), and a bad image fails with one line."""

from __future__ import annotations

import base64

from tests.fixtures.cli import run_cli
from tests.fixtures.env import SoongEnv
from tests.fixtures.real_models import png
from tests.fixtures.scripted_servers import OllamaWire, ScriptedOllamaServer, stream


def test_run_image_and_folded_reasoning(soong_env: SoongEnv) -> None:
    image = png(12, 8)
    (soong_env.project / "shot.png").write_bytes(image)
    with ScriptedOllamaServer(capabilities=("completion", "tools", "vision", "thinking")) as server:
        thought = "look at the colour\nit is red\nso: red"
        server.enqueue(stream([OllamaWire.thinking(thought), OllamaWire.content("Red."), OllamaWire.done()]))
        soong_env.write_config(
            model={
                "provider": "ollama",
                "base_url": server.base_url,
                "input_modalities": ["text", "image"],
                "thinking_budget_tokens": 1024,
            }
        )
        result = run_cli(
            ["run", "--path", str(soong_env.project), "--image", "shot.png", "what colour?"],
            cwd=soong_env.project,
        )
        server.verify()
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "Red."
    assert "▸ reasoning (3 lines): look at the colour" in result.stderr
    assert "it is red" not in result.stderr  # folded to its first line
    (chat,) = server.requests_to("/api/chat")
    user = [m for m in chat.json["messages"] if m["role"] == "user"][-1]
    assert user["images"] == [base64.b64encode(image).decode()]


def test_run_image_that_is_not_an_image_fails_with_one_line(soong_env: SoongEnv) -> None:
    (soong_env.project / "notes.txt").write_text("not an image")
    with ScriptedOllamaServer() as server:
        soong_env.write_config(
            model={"provider": "ollama", "base_url": server.base_url, "input_modalities": ["text", "image"]}
        )
        result = run_cli(["run", "--image", "notes.txt", "what is it?"], cwd=soong_env.project)
        missing = run_cli(["run", "--image", "nope.png", "what is it?"], cwd=soong_env.project)
        server.verify()
    assert result.exit_code == 1
    assert "is not an image" in result.stderr and "Traceback" not in result.stderr
    assert missing.exit_code == 1 and "cannot read --image" in missing.stderr
    assert server.requests_to("/api/chat") == []


def test_chat_image_attaches_to_the_next_message_only(soong_env: SoongEnv) -> None:
    """``/image <file>`` in chat (a terminal): the image goes with the next message, not the one after;
    a missing file is one error line."""
    from tests.fixtures.chat_pty import ChatTerminal

    image = png(10, 6)
    (soong_env.project / "shot.png").write_bytes(image)
    with ScriptedOllamaServer(capabilities=("completion", "tools", "vision")) as server:
        server.enqueue(stream(OllamaWire.text_stream("Red.")))
        server.enqueue(stream(OllamaWire.text_stream("Still red.")))
        soong_env.write_config(
            model={"provider": "ollama", "base_url": server.base_url, "input_modalities": ["text", "image"]}
        )
        term = ChatTerminal(["--path", str(soong_env.project)], cwd=soong_env.project)
        try:
            term.wait_prompt()
            term.say("/image nope.png")
            assert "error: /image: no such file 'nope.png'" in term.text()
            term.say("/image shot.png")
            assert "attached shot.png" in term.text()
            term.say("what colour?")
            assert "Red." in term.text()
            term.say("and now?")
            assert "Still red." in term.text()
            term.send_line("/exit")
            assert term.finish() == 0
        finally:
            term.close()
        server.verify()
    first, second = server.requests_to("/api/chat")
    asked = [m for m in first.json["messages"] if m["role"] == "user"][-1]
    assert asked["content"].startswith("what colour?") and asked["images"] == [
        base64.b64encode(image).decode()
    ]
    again = [m for m in second.json["messages"] if m["role"] == "user"]
    assert "images" not in again[-1] and again[0]["images"] == asked["images"]  # the history keeps it
