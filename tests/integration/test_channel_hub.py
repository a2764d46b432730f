"""The channel hub with an in-memory channel (issue 38 item 3): ``/new`` maps the conversation to a new
session without reaching the agent, a press on a question of another conversation or one that is no
longer pending answers nothing, a deleted session is replaced, a failed run is told in one line, and an
MCP server's question (elicitation) is answered by the conversation's next message."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from agent_core.adapters.channels import (
    ChannelEvents,
    ChannelHub,
    ChatAddress,
    ChoiceAnswer,
    InboundMessage,
    OutboundMessage,
    Sent,
)
from agent_core.testing import CallTool, FunctionModel, ModelReply, open_runtime, tool_results
from agent_core.types.model import ModelRequest
from tests.fixtures.chat_platforms import until
from tests.fixtures.env import SoongEnv
from tests.integration.channel_support import ChannelAsker, running_hub, scripted_model, user_texts

MCP_SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_full_server.py"


class MemoryChannel:
    """A channel whose platform is two lists: what users wrote, what the bot sent."""

    kind = "memory"
    session_scope = "thread"

    def __init__(self, name: str = "mem") -> None:
        self.name = name
        self.sent: list[OutboundMessage] = []
        self.edits: list[tuple[Sent, str]] = []
        self.typing_calls: list[bool] = []
        self.events: ChannelEvents | None = None

    async def serve(self, events: ChannelEvents) -> None:
        self.events = events
        await asyncio.Event().wait()

    async def send(self, message: OutboundMessage) -> Sent:
        self.sent.append(message)
        return Sent(message.address, str(len(self.sent)))

    async def edit(self, sent: Sent, text: str) -> None:
        self.edits.append((sent, text))

    async def typing(self, address: ChatAddress, active: bool, message_id: str | None = None) -> None:
        self.typing_calls.append(active)

    async def aclose(self) -> None:
        pass

    def texts(self) -> list[str]:
        return [m.text for m in self.sent]


def says(text: str, chat: str = "c1", user: str = "u1") -> InboundMessage:
    return InboundMessage("mem", ChatAddress(chat), user, text, message_id="m1")


async def test_commands_stale_presses_and_deleted_sessions(soong_env: SoongEnv) -> None:
    model = scripted_model()
    asker = ChannelAsker()
    channel = MemoryChannel()
    async with open_runtime(
        model, project_dir=soong_env.project, home_dir=soong_env.home, permission_callback=asker
    ) as runtime:
        hub = asker.hub = ChannelHub(runtime, [channel])
        async with running_hub(hub):
            await until(lambda: channel.events is not None)
            await hub.on_message(says("ping"))
            await until(lambda: "pong" in channel.texts(), what="pong")
            first = hub.session_for("mem", ChatAddress("c1"))

            await hub.on_message(says("/new"))
            second = hub.session_for("mem", ChatAddress("c1"))
            assert first and second and second != first
            assert channel.texts()[-1].startswith(f"Started a new session ({second})")
            await hub.on_message(says("/help"))
            assert "write a message and the agent answers here" in channel.texts()[-1]
            assert len(model.requests) == 1  # commands never reach the agent

            await hub.on_message(says("please write hello.txt"))
            question = await until(lambda: [m for m in channel.sent if m.choices], what="the question")
            allow = question[0].choices[0].value
            other = ChoiceAnswer("mem", ChatAddress("c2"), "u1", allow)
            assert await hub.on_choice(other) == "This request belongs to another conversation."
            assert await hub.on_choice(ChoiceAnswer("mem", ChatAddress("c1"), "u1", "nope:o")) == (
                "This request is no longer pending."
            )
            assert await hub.on_choice(ChoiceAnswer("mem", ChatAddress("c1"), "u1", allow)) == "Allowed once."
            await until(lambda: any(t.startswith("Wrote") for t in channel.texts()), what="the answer")
            assert await hub.on_choice(ChoiceAnswer("mem", ChatAddress("c1"), "u1", allow)) == (
                "This request is no longer pending."
            )
            assert True in channel.typing_calls and channel.typing_calls[-1] is False

            # the mapped session was deleted: the next message starts a new one
            await runtime.delete_session(second)
            await hub.on_message(says("ping"))
            await until(lambda: channel.texts().count("pong") == 2, what="the second pong")
            third = hub.session_for("mem", ChatAddress("c1"))
            assert third not in (None, first, second)


async def test_a_failed_run_is_told_in_one_line(soong_env: SoongEnv) -> None:
    def broken(request: Any) -> str:
        raise RuntimeError("model exploded")

    channel = MemoryChannel()
    async with open_runtime(
        FunctionModel(broken), project_dir=soong_env.project, home_dir=soong_env.home
    ) as runtime:
        hub = ChannelHub(runtime, [channel])
        async with running_hub(hub):
            await hub.on_message(says("hi"))
            await until(lambda: channel.sent, what="the failure line")
    assert channel.texts()[0].startswith("The run failed: ") and "exploded" in channel.texts()[0]


async def test_an_mcp_servers_question_is_answered_by_the_next_message(soong_env: SoongEnv) -> None:
    """An MCP server's elicitation in a channel session: the question lists the form's fields, a reply
    that does not fit is told why, the next fitting message is the answer (never reaching the agent),
    and Decline declines."""

    def reply(request: ModelRequest) -> str | ModelReply:
        if request.messages[-1].role == "tool":
            return "tool said: " + json.dumps(tool_results(request), sort_keys=True)
        return ModelReply(tool_calls=[CallTool("mcp.full.ask_name", {}, "c_ask")])

    model = FunctionModel(reply)
    asker = ChannelAsker()
    channel = MemoryChannel()
    entry = {"command": sys.executable, "args": [str(MCP_SERVER)], "startup_timeout_ms": 60000}
    soong_env.home.mkdir(parents=True, exist_ok=True)
    (soong_env.home / "mcp.json").write_text(json.dumps({"mcpServers": {"full": entry}}))
    async with open_runtime(
        model, project_dir=soong_env.project, home_dir=soong_env.home, permission_callback=asker
    ) as runtime:
        hub = asker.hub = ChannelHub(runtime, [channel])
        async with running_hub(hub):
            await hub.on_message(says("who am I?"))
            tool = await until(
                lambda: [m for m in channel.sent if m.choices], what="the tool question", timeout=60
            )
            assert "mcp.full.ask_name" in tool[0].text
            assert await hub.on_choice(ChoiceAnswer("mem", ChatAddress("c1"), "u1", tool[0].choices[0].value))
            form = await until(
                lambda: [m for m in channel.sent if "asks:" in m.text], what="the form", timeout=60
            )
            assert form[0].text.startswith(
                "MCP server full asks: Who are you?\nReply with one line per field:"
            )
            assert "\nname: <string>" in form[0].text and "\nage: <integer>" in form[0].text
            assert [c.label for c in form[0].choices] == ["Decline"]

            await hub.on_message(says("name: Ada\nage: abc"))
            assert (
                channel.texts()[-1]
                == "Not an answer: age: expected an integer. Reply again, or press Decline."
            )
            await hub.on_message(says("name: Ada\nage: 36"))
            await until(lambda: any("tool said" in t for t in channel.texts()), what="the answer", timeout=30)
            assert "accept: Ada is 36" in channel.texts()[-1]
            assert channel.edits[-1][1].endswith("→ answered by u1")
            assert not any("Ada" in t for t in user_texts(model))  # the answers never reached the agent

            await hub.on_message(says("again"))
            tools = await until(
                lambda: [m for m in channel.sent if "ask_name" in m.text][1:], what="a 2nd call"
            )
            assert await hub.on_choice(
                ChoiceAnswer("mem", ChatAddress("c1"), "u1", tools[0].choices[0].value)
            )
            await until(lambda: len([m for m in channel.sent if "asks:" in m.text]) == 2, what="a 2nd form")
            form = [m for m in channel.sent if "asks:" in m.text][-1]
            assert (
                await hub.on_choice(ChoiceAnswer("mem", ChatAddress("c1"), "u1", form.choices[0].value))
                == "Declined."
            )
            await until(
                lambda: channel.texts()[-1].startswith("tool said"), what="the 2nd answer", timeout=30
            )
            assert channel.texts()[-1].endswith(': "decline"}')
            await hub.on_message(says("name: Bob\nage: 1"))  # no form pending: an ordinary message
            await until(lambda: any("name: Bob" in t for t in user_texts(model)), what="the agent got it")


class QuickChannel(MemoryChannel):
    """A platform whose user presses a button before the answer to posting it arrives."""

    def __init__(self) -> None:
        super().__init__()
        self.acks: list[str] = []

    async def send(self, message: OutboundMessage) -> Sent:
        if message.choices and self.events is not None:
            press = ChoiceAnswer("mem", message.address, "u1", message.choices[0].value)
            self.acks.append(await self.events.on_choice(press))
        return await super().send(message)


async def test_a_press_that_comes_before_the_post_returns_answers(soong_env: SoongEnv) -> None:
    asker = ChannelAsker()
    channel = QuickChannel()
    async with open_runtime(
        scripted_model(), project_dir=soong_env.project, home_dir=soong_env.home, permission_callback=asker
    ) as runtime:
        hub = asker.hub = ChannelHub(runtime, [channel])
        async with running_hub(hub):
            await until(lambda: channel.events is not None)
            await hub.on_message(says("please write hello.txt"))
            await until(lambda: any(t.startswith("Wrote") for t in channel.texts()), what="the answer")
    assert channel.acks == ["Allowed once."]
    assert (soong_env.project / "hello.txt").read_text() == "hi\n"
    assert channel.edits[-1][1].endswith("→ allowed once by u1")


async def test_the_models_question_is_answered_by_a_button_or_a_reply(soong_env: SoongEnv) -> None:
    """``internal.ask_user`` in a channel session: the question is posted with its options as buttons; a
    press answers with the option, a reply message answers with its text (never reaching the agent)."""

    def reply(request: ModelRequest) -> str | ModelReply:
        if request.messages[-1].role == "tool":
            return "heard: " + request.messages[-1].model_dump_json()  # the result is {"answer": ...}
        ask = {"question": "Which color?", "options": ["red", "blue"]}
        return ModelReply(tool_calls=[CallTool("internal.ask_user", ask)])

    model = FunctionModel(reply)
    asker = ChannelAsker()
    channel = MemoryChannel()
    async with open_runtime(
        model,
        project_dir=soong_env.project,
        home_dir=soong_env.home,
        permission_callback=asker,
        question_callback=asker.ask_user,
    ) as runtime:
        hub = asker.hub = ChannelHub(runtime, [channel])
        async with running_hub(hub):
            await hub.on_message(says("pick one"))
            asked = await until(lambda: [m for m in channel.sent if m.choices], what="the question")
            assert asked[0].text == "The agent asks: Which color?\nPress an answer or reply with a message."
            assert [c.label for c in asked[0].choices] == ["red", "blue"]
            elsewhere = ChoiceAnswer("mem", ChatAddress("c2"), "u1", asked[0].choices[1].value)
            assert await hub.on_choice(elsewhere) == "This request is no longer pending."
            assert await hub.on_choice(
                ChoiceAnswer("mem", ChatAddress("c1"), "u1", asked[0].choices[1].value)
            ) == ("Answered.")
            await until(lambda: channel.texts()[-1].startswith("heard"), what="the answer")
            assert '"answer"' in channel.texts()[-1] and '"blue"' in channel.texts()[-1]
            assert channel.edits[-1][1].endswith("→ answered by u1: blue")

            await hub.on_message(says("again"))
            await until(lambda: len([m for m in channel.sent if m.choices]) == 2, what="the 2nd question")
            await hub.on_message(says("green, actually"))
            await until(lambda: channel.texts()[-1].startswith("heard"), what="the 2nd answer")
            assert '"green, actually"' in channel.texts()[-1]
            assert not any("green" in t for t in user_texts(model))
