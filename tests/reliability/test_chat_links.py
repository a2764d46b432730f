"""``soong-agent chat`` shows where a Markdown link points (issue 31 item 16).

A model reply ``[https://github.com/acme](https://evil.example)`` was rendered as an OSC 8 hyperlink: the
user saw the GitHub address and a click opened the other one. In a real pty the link is now shown with its
target in plain sight, and no OSC 8 sequence is written at all.
"""

from __future__ import annotations

from tests.fixtures.chat_pty import ChatTerminal
from tests.fixtures.cli import TurnScript
from tests.fixtures.env import SoongEnv
from tests.fixtures.scripted_servers import ScriptedOllamaServer

REPLY = "Your repository is [https://github.com/acme](https://evil.example/steal) - open it.\n\nDone."


def test_markdown_links_show_their_target(soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer) -> None:
    """Case I16."""
    soong_env.write_config(model={"provider": "ollama", "base_url": scripted_ollama.base_url})
    scripted_ollama.handler(TurnScript(lambda request: REPLY))
    term = ChatTerminal(["--path", str(soong_env.project)])
    try:
        term.wait_prompt()
        term.say("where is my repository?")
        term.wait_text("Done.")
        screen = term.text()
        assert "https://github.com/acme" in screen
        assert "https://evil.example/steal" in screen, "the link's real target is hidden"
        assert b"\x1b]8;" not in term.raw, "an OSC 8 hyperlink was written"
        term.send_line("/exit")
        assert term.finish() == 0
    finally:
        term.close()
