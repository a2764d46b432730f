"""The Telegram channel against a scripted Bot API server on 127.0.0.1 (issue 38 item 3): a message from an
allowed user reaches a session through the inbox, the run's permission request becomes an inline keyboard,
a press answers it, the final answer comes back as a reply; strangers are never answered, and the
conversation → session map survives a restart."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agent_core.adapters.channels import ChannelHub, ChatAddress
from agent_core.adapters.channels.telegram import TelegramChannel
from agent_core.testing import open_runtime
from tests.fixtures.chat_platforms import FakeTelegram, until
from tests.fixtures.env import SoongEnv
from tests.integration.channel_support import ChannelAsker, running_hub, scripted_model, user_texts

TOKEN = "123456:AAtelegram-test-token-0123456789"


def telegram(fake: FakeTelegram, **kwargs: object) -> TelegramChannel:
    options: dict[str, object] = {"allowed_users": {"42"}, "base_url": fake.base_url, "poll_timeout_s": 1}
    options.update(kwargs)
    return TelegramChannel("tg", TOKEN, **options)  # type: ignore[arg-type]


async def test_full_path_inbound_run_approval_outbound(soong_env: SoongEnv) -> None:
    model = scripted_model()
    asker = ChannelAsker()
    with FakeTelegram(TOKEN) as fake:
        async with open_runtime(
            model, project_dir=soong_env.project, home_dir=soong_env.home, permission_callback=asker
        ) as runtime:
            channel = telegram(fake)
            hub = asker.hub = ChannelHub(runtime, [channel])
            async with running_hub(hub):
                # a stranger: dropped, never answered, never reaches the model
                fake.message(42, 99, "please write hello.txt")
                await until(lambda: channel.filtered.not_allowed == 1, what="the stranger to be dropped")

                asked_id = fake.message(42, 42, "please write hello.txt")
                question = await until(
                    lambda: [m for m in fake.sent("sendMessage") if "reply_markup" in m], what="the approval"
                )
                assert "code.write_file" in question[0]["text"]
                buttons = question[0]["reply_markup"]["inline_keyboard"][0]
                assert [b["text"] for b in buttons] == ["Allow once", "Allow for session", "Deny"]
                assert fake.sent("sendChatAction")[0] == {"chat_id": 42, "action": "typing"}
                assert not (soong_env.project / "hello.txt").exists()

                # a press by someone not allowed answers nothing
                question_id = 101 + len(fake.sent("sendMessage"))  # not needed by the bot: it keys by data
                fake.press(42, 99, question_id, buttons[0]["callback_data"])
                await until(
                    lambda: any("may not" in a.get("text", "") for a in fake.sent("answerCallbackQuery")),
                    what="the refusal of the stranger's press",
                )
                assert not (soong_env.project / "hello.txt").exists()

                fake.press(42, 42, question_id, buttons[0]["callback_data"])
                answer = await until(
                    lambda: [m for m in fake.sent("sendMessage") if m["text"].startswith("Wrote")],
                    what="the final answer",
                )
                assert answer[0]["text"] == "Wrote hello.txt <!channel> & co"
                assert answer[0]["reply_parameters"]["message_id"] == asked_id
                assert (soong_env.project / "hello.txt").read_text() == "hi\n"
                edits = fake.sent("editMessageText")
                assert edits and edits[0]["text"].endswith("→ allowed once by 42")
                assert "buttons" not in edits[0] and "reply_markup" not in edits[0]

                session_id = hub.session_for("tg", ChatAddress("42"))
                assert session_id is not None
                assert asker.requests[0].session_id == session_id
                note = user_texts(model)[0]
                assert (
                    'kind="channel"' in note and 'from="tg:u42"' in note and "please write hello.txt" in note
                )
                assert "stranger" not in "".join(user_texts(model)) and len(model.requests) == 2

                # the same chat goes on in the same session
                fake.message(42, 42, "ping")
                await until(lambda: [m for m in fake.sent("sendMessage") if m["text"] == "pong"], what="pong")
                assert hub.session_for("tg", ChatAddress("42")) == session_id
                replay = await runtime.replay_session(session_id)
                assert len([r for r in replay.runs if r.parent_run_id is None]) == 2

            # the map is durable: a new hub (a restarted `soong-agent channels`) continues the session
            restarted = ChannelHub(runtime, [telegram(fake)])
            assert restarted.session_for("tg", ChatAddress("42")) == session_id
            map_file = soong_env.home / "channels" / "tg.json"
            assert map_file.stat().st_mode & 0o777 == 0o600
            assert TOKEN not in map_file.read_text()


async def test_updates_are_confirmed_other_chats_dropped_and_a_bad_token_stops_the_channel(
    soong_env: SoongEnv,
) -> None:
    model = scripted_model()
    with FakeTelegram(TOKEN) as fake:
        async with open_runtime(model, project_dir=soong_env.project, home_dir=soong_env.home) as runtime:
            channel = telegram(fake, allowed_chats={"-100"}, allowed_users=set())
            hub = ChannelHub(runtime, [channel])
            async with running_hub(hub):
                fake.message(-100, 5, "ping")
                first = fake.last_update_id
                await until(lambda: [m for m in fake.sent("sendMessage") if m["text"] == "pong"], what="pong")
                fake.message(-200, 5, "ping")  # another group: not allowed
                await until(lambda: channel.filtered.not_allowed == 1, what="the other group to be dropped")
                await until(lambda: any(o is not None and o > first for o in fake.get_updates_offsets))
            assert len(model.requests) == 1

            wrong = TelegramChannel(
                "bad", "999:wrong", allowed_users={"1"}, base_url=fake.base_url, poll_timeout_s=1
            )
            broken = ChannelHub(runtime, [wrong])
            await asyncio.wait_for(broken.run(), 10)  # returns: its only channel stopped
            assert broken.failures == {"bad": "telegram getMe: Unauthorized"}


async def test_forum_topics_get_a_session_each(soong_env: SoongEnv) -> None:
    model = scripted_model()
    with FakeTelegram(TOKEN) as fake:
        async with open_runtime(model, project_dir=soong_env.project, home_dir=soong_env.home) as runtime:
            channel = telegram(fake, allowed_chats={"-100"}, allowed_users=set())
            hub = ChannelHub(runtime, [channel])
            async with running_hub(hub):
                fake.message(-100, 5, "ping", thread=11)
                fake.message(-100, 5, "ping", thread=12)
                replies = await until(
                    lambda: (lambda s: s if len(s) == 2 else None)(
                        [m for m in fake.sent("sendMessage") if m["text"] == "pong"]
                    ),
                    what="two answers",
                )
            assert sorted(m["message_thread_id"] for m in replies) == [11, 12]
            first = hub.session_for("tg", ChatAddress("-100", "11"))
            second = hub.session_for("tg", ChatAddress("-100", "12"))
            assert first and second and first != second


def test_channel_module_is_not_imported_by_the_sdk(tmp_path: Path) -> None:
    import subprocess
    import sys

    code = "import agent_core, agent_core.adapters, sys; print('agent_core.adapters.channels.telegram' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
